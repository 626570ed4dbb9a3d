"""The tensor collector: gradients, weights and activations of a PyTorch training, for the RuleEvaluator's tensor
rules, without SageMaker Debugger. Standard library at import; torch is imported only when collecting starts.

In a job with tensor rules the sampler bundle's sitecustomize starts it as soon as the training imports torch. The
public API, for images that do not honour PYTHONPATH and for labels the loss module does not see::

    from cdk_sagemaker_debugger import tensors
    tensors.start()                              # reads the job's environment; idempotent; never raises
    tensors.record_labels(target, logits)        # ClassImbalance / Confusion
    tensors.stop()                               # called for you at interpreter exit

Relative imports only, so the package also works shipped alone (``cdk_sagemaker_debugger.tensors`` in the bundle).
"""

import importlib

_EXPORTS = {"start": "api", "stop": "api", "record_labels": "api", "status": "api"}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
