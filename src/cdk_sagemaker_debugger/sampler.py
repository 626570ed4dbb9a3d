"""The sampler's public API in the full package: ``from cdk_sagemaker_debugger import sampler; sampler.step()``.

Inside training containers the same API comes from the sampler bundle (``cdk_sagemaker_debugger.sampler`` there is the
runtime package itself), so a training script imports it the same way in both places. Importing this module never
imports aws_cdk or jsii.
"""

from .runtime.sampler.api import flush, start, step, stop
from .runtime.sampler.callbacks import huggingface_callback, lightning_callback
from .runtime.sampler.loader import wrap
from .runtime.sampler.phases import phase

__all__ = ["flush", "huggingface_callback", "lightning_callback", "phase", "start", "step", "stop", "wrap"]

if __name__ == "__main__":  # ``python -m cdk_sagemaker_debugger.sampler``, as inside the bundle
    import sys

    from .runtime.sampler.__main__ import main

    sys.exit(main())
