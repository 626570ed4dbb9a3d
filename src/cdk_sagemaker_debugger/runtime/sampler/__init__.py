"""The sampler: profiler data from inside a training container, in SageMaker Debugger's layout, without Debugger.

Standard library only, Python 3.8+: it runs inside other people's training images. Relative imports only, so the
package also works when shipped alone (as ``cdk_sagemaker_debugger.sampler`` inside the sampler bundle).

Public API (each name loads its module on first use, so the bundle's sitecustomize, which runs at every interpreter
start in the container, imports almost nothing)::

    with sampler.step():            # one Step:ModeKeys.TRAIN event with args.step_num
        train_step(batch)
    with sampler.phase("data"):     # per-rank phase timings (data, forward, backward, optimizer, checkpoint)
        batch = next(iterator)
    for batch in sampler.wrap(loader):   # time blocked in the DataLoader's __next__, num_workers, pin_memory
        ...
    sampler.start()                 # explicit start where PYTHONPATH is not honoured; idempotent; never raises
    sampler.flush(); sampler.stop()
    trainer = Trainer(callbacks=[sampler.lightning_callback()])      # or sampler.huggingface_callback()

This file parses and runs on Python 3.6 and 3.7 (no module ``__getattr__``, no annotations): there ``step()`` and
``phase()`` do nothing, ``wrap(loader)`` returns the loader, ``start()``/``stop()``/``flush()`` return False, and one
line on stderr says why, so an instrumented script still runs unchanged.
"""

import sys

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
OLDEST_PYTHON = (3, 8)

__all__ = sorted(_EXPORTS)


class _NoStep:
    """``step()`` or ``phase()`` where the sampler cannot run (Python older than 3.8): records nothing."""

    def __init__(self, *_args, **_options):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        return False


def _too_old(*_args, **_options):
    return False


def _unwrapped(loader):
    return loader


def _no_callback(*_args, **_options):
    raise ImportError("the sampler's framework callbacks need Python 3.8 or newer; this is Python {}.{}".format(
        *sys.version_info[:2]))


def _load(name):
    """The real function (bound into this module, so the next call goes to it directly)."""
    if sys.version_info[:2] < OLDEST_PYTHON:
        try:
            sys.stderr.write(f"cdk-sagemaker-debugger sampler: Python {sys.version_info[0]}.{sys.version_info[1]} is older than 3.8; sampler.{name}() does "
                             "nothing here\n")
        except (OSError, ValueError):
            pass
        value = {"step": _NoStep, "phase": _NoStep, "wrap": _unwrapped, "lightning_callback": _no_callback,
                 "huggingface_callback": _no_callback}.get(name, _too_old)
    else:
        import importlib

        value = getattr(importlib.import_module("." + _EXPORTS[name], __name__), name)
    globals()[name] = value
    return value


def step(step_num=None, mode="TRAIN"):
    """``with sampler.step():`` records one ``Step:ModeKeys.<mode>`` event (see api.step)."""
    return _load("step")(step_num, mode)


def phase(name):
    """``with sampler.phase("forward"):`` records one ``Phase:<name>`` event for this rank (see phases.phase)."""
    return _load("phase")(name)


def wrap(loader):
    """``for batch in sampler.wrap(loader):`` records the time blocked in the loader (see loader.wrap)."""
    return _load("wrap")(loader)


def start(**options):
    """Start the sampler for this container (see api.start)."""
    return _load("start")(**options)


def stop(timeout=5.0):
    """Write out this process's step events and leave the training (see api.stop)."""
    return _load("stop")(timeout)


def flush():
    """Write out step events and ask the sampler to upload now (see api.flush)."""
    return _load("flush")()


def lightning_callback():
    """A PyTorch Lightning callback recording train and validation batches (see callbacks.lightning_callback)."""
    return _load("lightning_callback")()


def huggingface_callback():
    """A Hugging Face TrainerCallback recording optimizer steps (see callbacks.huggingface_callback)."""
    return _load("huggingface_callback")()
