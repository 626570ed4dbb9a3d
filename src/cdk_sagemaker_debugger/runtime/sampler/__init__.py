"""The sampler: profiler data from inside a training container, in SageMaker Debugger's layout, without Debugger.

Standard library only, Python 3.8+: it runs inside other people's training images. Relative imports only, so the
package also works when shipped alone (as ``cdk_sagemaker_debugger.sampler`` inside the sampler bundle).

Public API (resolved on first use, so the bundle's sitecustomize, which runs at every interpreter start in the
container, imports almost nothing)::

    with sampler.step():            # one Step:ModeKeys.TRAIN event with args.step_num
        train_step(batch)
    with sampler.phase("data"):     # per-rank phase timings (data, forward, backward, optimizer, checkpoint)
        batch = next(iterator)
    for batch in sampler.wrap(loader):   # time blocked in the DataLoader's __next__, num_workers, pin_memory
        ...
    sampler.start()                 # explicit start where PYTHONPATH is not honoured; idempotent; never raises
    sampler.flush(); sampler.stop()
    trainer = Trainer(callbacks=[sampler.lightning_callback()])      # or sampler.huggingface_callback()
"""

import importlib

_EXPORTS = {
    "step": "api",
    "start": "api",
    "stop": "api",
    "flush": "api",
    "phase": "phases",
    "wrap": "loader",
    "lightning_callback": "callbacks",
    "huggingface_callback": "callbacks",
}

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
