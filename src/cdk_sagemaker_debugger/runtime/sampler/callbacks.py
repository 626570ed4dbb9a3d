"""Step events from PyTorch Lightning and the Hugging Face Trainer, without touching the training loop, and the
phases where the framework exposes their boundaries: Lightning's data (from one batch's end to the next batch's
start), forward (batch start to before backward) and backward; the Trainer's data (one step's end to the next step's
begin: the fetch of the next batch and the loop's own work).

The classes are built on first use, subclassing the framework's own callback base, so importing the sampler never
imports a framework.
"""

from __future__ import annotations

import importlib
import time

from .api import record_step
from .phases import record_phase


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
            self.marks = {"ended": 0.0, "backward": 0.0}

        def on_train_epoch_start(self, *args: object, **kwargs: object) -> None:
            self.marks["ended"] = 0.0  # the gap across epochs is not a data wait

        def on_train_batch_start(self, *args: object, **kwargs: object) -> None:
            now = self.started["TRAIN"] = time.time()
            if self.marks["ended"]:
                record_phase("data", self.marks["ended"], now)

        def on_before_backward(self, *args: object, **kwargs: object) -> None:
            now = self.marks["backward"] = time.time()
            record_phase("forward", self.started["TRAIN"], now)

        def on_after_backward(self, *args: object, **kwargs: object) -> None:
            record_phase("backward", self.marks["backward"], time.time())

        def on_train_batch_end(self, *args: object, **kwargs: object) -> None:
            now = self.marks["ended"] = time.time()
            record_step("TRAIN", None, self.started["TRAIN"], now)

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
        ended = 0.0

        def on_epoch_begin(self, args: object, state: object, control: object, **kwargs: object) -> None:
            self.ended = 0.0

        def on_step_begin(self, args: object, state: object, control: object, **kwargs: object) -> None:
            self.started = time.time()
            if self.ended:
                record_phase("data", self.ended, self.started)

        def on_step_end(self, args: object, state: object, control: object, **kwargs: object) -> None:
            self.ended = time.time()
            record_step("TRAIN", getattr(state, "global_step", None), self.started, self.ended)

    return SamplerTrainerCallback()
