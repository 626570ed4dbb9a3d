"""Step events from PyTorch Lightning and the Hugging Face Trainer, without touching the training loop.

The classes are built on first use, subclassing the framework's own callback base, so importing the sampler never
imports a framework.
"""

from __future__ import annotations

import importlib
import time

from .api import record_step


def _base(candidates: tuple, what: str) -> type:
    for module_name, attribute in candidates:
        try:
            return getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError):
            continue
    names = " or ".join(f"{m}.{a}" for m, a in candidates)
    raise ImportError(f"{what} needs {names}, and none is importable; install the framework, or use "
                      "`with sampler.step():` around each step instead")


def lightning_callback() -> object:
    """A Lightning ``Callback``: every training batch is a TRAIN step, every validation batch an EVAL step."""
    base = _base((("lightning.pytorch", "Callback"), ("pytorch_lightning", "Callback")), "lightning_callback()")

    class SamplerLightningCallback(base):
        def __init__(self) -> None:
            super().__init__()
            self.started = {"TRAIN": 0.0, "EVAL": 0.0}

        def on_train_batch_start(self, *args: object, **kwargs: object) -> None:
            self.started["TRAIN"] = time.time()

        def on_train_batch_end(self, *args: object, **kwargs: object) -> None:
            record_step("TRAIN", None, self.started["TRAIN"], time.time())

        def on_validation_batch_start(self, *args: object, **kwargs: object) -> None:
            self.started["EVAL"] = time.time()

        def on_validation_batch_end(self, *args: object, **kwargs: object) -> None:
            record_step("EVAL", None, self.started["EVAL"], time.time())

    return SamplerLightningCallback()


def huggingface_callback() -> object:
    """A ``transformers.TrainerCallback``: every optimizer step is a TRAIN step numbered by ``state.global_step``."""
    base = _base((("transformers", "TrainerCallback"),), "huggingface_callback()")

    class SamplerTrainerCallback(base):
        started = 0.0

        def on_step_begin(self, args: object, state: object, control: object, **kwargs: object) -> None:
            self.started = time.time()

        def on_step_end(self, args: object, state: object, control: object, **kwargs: object) -> None:
            record_step("TRAIN", getattr(state, "global_step", None), self.started, time.time())

    return SamplerTrainerCallback()
