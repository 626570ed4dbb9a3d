"""Phase timings of the training loop, in the training process itself: ``with sampler.phase("data"):``.

Each phase is one complete event ``Phase:<name>`` in the process's python-timeline file (args: pid, rank, local_rank),
next to the step events. The evaluator's Straggler, DataWait and TrainingHang rules read them; Debugger-compatible
readers count them as "general" framework time. Like ``step()``, a phase costs a few microseconds, nothing when no
sampler is configured, and never raises into training.
"""

from __future__ import annotations

import os
import time

from . import ranks
from .api import _writer, log_once

PHASE_PREFIX = "Phase:"
#: The phases the evaluator's rules know; any other name is recorded and shown, but judged by TrainingHang only.
KNOWN_PHASES = ("data", "forward", "backward", "optimizer", "checkpoint", "eval")
_ids: dict = {}


def identity() -> dict:
    """pid, rank and local rank of this process (cached per pid: a forked worker gets its own)."""
    pid = os.getpid()
    args = _ids.get(pid)
    if args is None:
        _ids.clear()
        args = _ids[pid] = {"pid": pid, "rank": ranks.rank(), "local_rank": ranks.local_rank()}
    return args


def record(phase: str, name: str, start_s: float, end_s: float, extra: dict | None = None) -> bool:
    """One event in this process's timeline; False when no sampler is configured here."""
    writer = _writer()
    if writer is None:
        return False
    args = dict(identity())
    if extra:
        args.update(extra)
    offset = writer.offset_s
    writer.add(phase, name, start_s + offset, end_s + offset, args)  # queued: the writer thread formats and marks
    return True


def record_phase(name: str, start_s: float, end_s: float) -> None:
    record(PHASE_PREFIX + name, name, start_s, end_s)


class phase:
    """``with sampler.phase("forward"):`` records how long the block took as the phase ``name``.

    Names the rules read: data (waiting for the next batch), forward, backward, optimizer, checkpoint (a pause the
    hang watch then expects), eval. Phases may nest inside ``sampler.step()``.
    """

    __slots__ = ("name", "started")

    def __init__(self, name: str):
        self.name = str(name)
        self.started = 0.0

    def __enter__(self) -> phase:
        self.started = time.time()
        return self

    def __exit__(self, *_exc: object) -> bool:
        try:
            record_phase(self.name, self.started, time.time())
        except Exception as exc:  # never into training
            log_once("phase", f"phase() failed: {type(exc).__name__}: {exc}")
        return False
