"""The tensor collector's public API in the full package: ``from cdk_sagemaker_debugger import tensors``.

Inside training containers the same API comes from the sampler bundle (``cdk_sagemaker_debugger.tensors`` there is
the runtime package itself). Importing this module imports neither torch nor aws_cdk.
"""

from .runtime.tensors.api import record_labels, start, status, stop

__all__ = ["record_labels", "start", "status", "stop"]
