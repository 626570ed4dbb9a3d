"""Python-timeline trace files written by the training process itself, in Debugger's format.

A JSON array, one event per line: a ``process_name`` record with the file's time origin, one ``process_name`` record
per phase, then complete ("X") events with ``ts``/``dur`` in microseconds. A file is closed after 60 s or 10 MiB and
renamed to ``framework/pevents/<hour>/<end us of its last event>_<rank>-<node>_pythontimeline.json``; until then it
lives in ``.partial/`` and the daemon does not upload it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Callable

from . import layout
from .status import write_atomic

ROTATE_AFTER_S = 60.0
ROTATE_AFTER_BYTES = 10 * 1024 * 1024
MODES = ("TRAIN", "EVAL", "PREDICT", "GLOBAL")


def phase_name(mode: str) -> str:
    return f"Step:ModeKeys.{mode}"


class TimelineWriter:
    """Appends events of one process; thread-safe; after a fork the child starts its own file."""

    def __init__(self, root: str, token: str, log: Callable[[str], None], clock: Callable[[], float] = time.time):
        self.root = root
        self.token = token
        self.log = log
        self.clock = clock
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.handle = None
        self.failures = 0
        self.retry_at = 0.0
        self._reset()

    def _reset(self) -> None:
        self.handle = None
        self.origin_us = 0
        self.opened_at = 0.0
        self.size = 0
        self.last_end_us = 0
        self.phases: dict = {}
        self.sequence = getattr(self, "sequence", 0) + 1

    def partial_path(self) -> str:
        return os.path.join(self.root, layout.partial_file(f"{self.token}.{self.pid}.{self.sequence}.timeline.json"))

    def add(self, phase: str, name: str, start_s: float, end_s: float, args: dict) -> None:
        """Record one complete event; never raises (a failing disk disables the timeline after one log line)."""
        with self.lock:
            if os.getpid() != self.pid:  # a forked child: its parent's open file is not ours
                self.pid = os.getpid()
                self._reset()
            if self.retry_at and self.clock() < self.retry_at:
                return
            try:
                self._write_event(phase, name, start_s, end_s, args)
                if self.clock() - self.opened_at > ROTATE_AFTER_S or self.size > ROTATE_AFTER_BYTES:
                    self._close_file()
            except (OSError, ValueError, TypeError) as exc:
                self._fail(exc)

    def _write_event(self, phase: str, name: str, start_s: float, end_s: float, args: dict) -> None:
        start_us = int(start_s * 1e6)
        if self.handle is None:
            self._open(start_us)
        lines = []
        pid = self.phases.get(phase)
        if pid is None:
            pid = self.phases[phase] = len(self.phases) + 1
            lines.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": phase}})
            lines.append({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}})
        end_us = max(int(end_s * 1e6), start_us)
        lines.append({"name": name, "pid": pid, "ph": "X", "ts": start_us - self.origin_us, "dur": end_us - start_us,
                      "args": args})
        text = "".join(json.dumps(line) + ",\n" for line in lines)
        self.handle.write(text)
        self.size += len(text)
        self.last_end_us = max(self.last_end_us, end_us)

    def _open(self, origin_us: int) -> None:
        path = self.partial_path()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.handle = open(path, "w", encoding="utf-8")
        self.origin_us = origin_us
        self.opened_at = self.clock()
        header = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": origin_us}},
                  {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}}]
        text = "[\n" + "".join(json.dumps(line) + ",\n" for line in header)
        self.handle.write(text)
        self.size = len(text)

    def _close_file(self) -> None:
        """Finish the array (the last event loses its comma) and move the file into place, named by its end time."""
        if self.handle is None:
            return
        path = self.partial_path()
        self.handle.close()
        self.handle = None
        with open(path, "rb") as source:
            body = source.read()
        final = os.path.join(self.root, layout.timeline_file(self.last_end_us, self.token))
        write_atomic(final, body.rstrip().rstrip(b",") + b"\n]\n")
        os.unlink(path)
        self._reset()

    def close(self) -> None:
        """Write out the open file (at exit, on flush); never raises."""
        with self.lock:
            if os.getpid() != self.pid:
                return
            try:
                self._close_file()
            except (OSError, ValueError) as exc:
                self._fail(exc)

    def _fail(self, exc: Exception) -> None:
        """Count, log the first failure, and pause the timeline for a minute (a full disk stays cheap)."""
        self.failures += 1
        self.retry_at = self.clock() + ROTATE_AFTER_S
        if self.failures == 1:
            self.log(f"cannot write framework events under {self.root}: {type(exc).__name__}: {exc}; "
                     "step timings are lost while this lasts (training continues)")
        try:
            if self.handle is not None:
                self.handle.close()
        except OSError:
            pass
        self._reset()
