"""Two small services for the timeline writer of a training process: the clock it stamps with, and a thread that
writes out its open file once the process has recorded nothing for a few seconds.

Without the idle write-out, the last minute of events of a rank that hangs would stay in ``.partial/`` and the
evaluator would see that rank stop up to a minute early (and could name the wrong rank as the first to stop).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

IDLE_AFTER_S = 5.0
CHECK_EVERY_S = 1.0


def shifted_clock(offset_s: float) -> Callable[[], float]:
    """``time.time`` plus ``offset_s`` (0 outside tests)."""
    if not offset_s:
        return time.time
    return lambda: time.time() + offset_s


def idle_for(writer: object) -> float | None:
    """Seconds since the writer's last event ended, or None when it has no open file."""
    if getattr(writer, "handle", None) is None or not writer.last_end_us:
        return None
    return writer.clock() - writer.last_end_us / 1e6


def _run(writer: object, idle_after_s: float, stop: threading.Event) -> None:
    while not stop.wait(CHECK_EVERY_S):
        try:
            idle = idle_for(writer)
            if idle is not None and idle > idle_after_s:
                writer.close()
        except Exception:  # never into training; the next event or exit writes the file out
            pass


def watch_idle(writer: object, idle_after_s: float = IDLE_AFTER_S) -> threading.Event:
    """Start the daemon thread (it never keeps the process alive); set the returned event to stop it."""
    stop = threading.Event()
    thread = threading.Thread(target=_run, args=(writer, idle_after_s, stop), name="cdk-sagemaker-sampler-idle",
                              daemon=True)
    thread.start()
    return stop
