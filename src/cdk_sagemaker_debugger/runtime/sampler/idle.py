"""Two small services for the timeline writer of a training process: the clock it stamps with, and a thread that
writes out its open file once the process has recorded nothing for a while, or when the sampler asks for it.

Without the write-out, the last minute of events of a rank that hangs would stay in ``.partial/`` and the evaluator
would see that rank stop up to a minute early (and could name the wrong rank as the first to stop). "A while" is
IDLE_AFTER_S, or twice the longest pause between two events seen so far (slow steps must not rotate a file each),
at most a minute (the writer's own rotation). The sampler asks (hang.py, before it ends a hung job) by touching
``.heartbeat-write-out``.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable

from .heartbeat import write_out_request

IDLE_AFTER_S = 5.0
MAX_IDLE_S = 60.0
CHECK_EVERY_S = 1.0


def shifted_clock(offset_s: float) -> Callable[[], float]:
    """``time.time`` plus ``offset_s`` (0 outside tests)."""
    if not offset_s:
        return time.time
    return lambda: time.time() + offset_s


def idle_for(writer: object) -> float | None:
    """Seconds since the writer's last event ended, or None when it has no open file."""
    if getattr(writer, "fd", None) is None or not writer.last_end_us:
        return None
    return writer.clock() - writer.last_end_us / 1e6


def _requested_at(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _run(writer: object, idle_after_s: float, stop: threading.Event) -> None:
    request = write_out_request(writer.root)
    handled = _requested_at(request)
    last_end, longest = 0, 0.0
    while not stop.wait(CHECK_EVERY_S):
        try:
            if writer.last_end_us != last_end:
                if last_end and writer.last_end_us > last_end:
                    longest = max(longest, (writer.last_end_us - last_end) / 1e6)
                last_end = writer.last_end_us
            idle = idle_for(writer)
            asked = _requested_at(request)
            if idle is not None and (asked > handled or idle > min(max(idle_after_s, 2 * longest), MAX_IDLE_S)):
                writer.close()
            handled = max(handled, asked)
        except Exception:  # never into training; the next event or exit writes the file out
            pass


def watch_idle(writer: object, idle_after_s: float = IDLE_AFTER_S) -> threading.Event:
    """Start the daemon thread (it never keeps the process alive); set the returned event to stop it."""
    stop = threading.Event()
    thread = threading.Thread(target=_run, args=(writer, idle_after_s, stop), name="cdk-sagemaker-sampler-idle",
                              daemon=True)
    thread.start()
    return stop
