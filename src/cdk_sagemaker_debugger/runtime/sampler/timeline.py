"""Python-timeline trace files written for the training process, in Debugger's format, off the training thread.

``add()`` (what ``step()`` calls) only appends a tuple to a queue; a writer thread formats and writes the queue every
second, and closes a file once it covers 60 s of events (or 10 MiB, or has been open 60 s). A file is a JSON array,
one event per line: a ``process_name`` record with the file's time origin, one ``process_name`` record per phase,
then complete ("X") events with ``ts``/``dur`` in microseconds. It is written in ``.partial/`` and renamed to
``framework/pevents/<hour>/<end us of its last event>_<rank>-<node>_pythontimeline.json`` when closed (at exit, on
``flush()``, at rotation). A process that ends without closing it (SIGTERM, ``os._exit``, exec, pool workers) leaves
it in ``.partial/`` with every event up to its last write; the sampler recovers it (``recover_partials``).
"""

from __future__ import annotations

import collections
import json
import os
import threading
import time
import weakref
from typing import Callable

from . import layout
from .status import write_atomic

ROTATE_AFTER_S = 60.0
ROTATE_AFTER_BYTES = 10 * 1024 * 1024
WRITE_EVERY_S = 1.0
MAX_QUEUED = 100_000
MODES = ("TRAIN", "EVAL", "PREDICT", "GLOBAL")
PARTIAL_SUFFIX = ".timeline.json"
_writers: weakref.WeakSet = weakref.WeakSet()


def phase_name(mode: str) -> str:
    return f"Step:ModeKeys.{mode}"


class TimelineWriter:
    """The events of one process; ``add`` is thread-safe and cheap; after a fork the child starts its own file."""

    def __init__(self, root: str, token: str, log: Callable[[str], None], clock: Callable[[], float] = time.time,
                 min_free_bytes: int = 0):
        self.root = root
        self.token = token
        self.log = log
        self.clock = clock
        self.min_free_bytes = min_free_bytes
        self.failures = 0
        self.dropped = 0
        self.retry_at = 0.0
        #: Called by the writer thread when it takes events off the queue (the training loop's progress, heartbeat.py).
        self.on_drain: Callable[[], None] | None = None
        self._after_fork()
        _writers.add(self)

    def _after_fork(self) -> None:
        """A new process: its own lock, queue, file and writer thread (the parent's file stays the parent's; a lock
        the parent's writer thread held at the fork would otherwise stay held in the child forever)."""
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.queue: collections.deque = collections.deque()
        self.thread: threading.Thread | None = None
        self.wake = threading.Event()
        self.fd: int | None = None
        self.sequence = 0
        self._reset()

    def _reset(self) -> None:
        self.fd = None
        self.origin_us = 0
        self.opened_at = 0.0
        self.size = 0
        self.last_end_us = 0
        self.phases: dict = {}
        self.sequence += 1

    def partial_path(self) -> str:
        name = f"{self.token}.{self.pid}.{self.sequence}{PARTIAL_SUFFIX}"
        return os.path.join(self.root, layout.partial_file(name))

    def add(self, phase: str, name: str, start_s: float, end_s: float, args: dict) -> None:
        """Queue one complete event (the training thread's whole cost); never raises."""
        if len(self.queue) >= MAX_QUEUED:
            self.dropped += 1
            return
        self.queue.append((phase, name, start_s, end_s, args))
        if self.thread is None:
            self._start_thread()

    def _start_thread(self) -> None:
        with self.lock:
            if self.thread is not None:
                return
            self.thread = threading.Thread(target=self._run, name="cdk-sagemaker-sampler-timeline", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        me = self.thread
        while self.thread is me:
            self.wake.wait(WRITE_EVERY_S)
            self.wake.clear()
            with self.lock:
                if self.thread is not me:
                    return
                self._drain()
                if self.fd is not None and self.clock() - self.opened_at > ROTATE_AFTER_S:
                    self._close_quietly()

    def _drain(self) -> None:
        """Write what is queued (called with the lock held)."""
        if not self.queue:
            return
        if self.on_drain is not None:
            try:
                self.on_drain()
            except Exception:  # a mark is never worth an event
                pass
        if self.retry_at and self.clock() < self.retry_at:
            self.queue.clear()
            return
        parts = []
        try:
            while self.queue:
                phase, name, start_s, end_s, args = self.queue.popleft()
                parts.append(self._event_text(phase, name, start_s, end_s, args))
                if self.last_end_us - self.origin_us > ROTATE_AFTER_S * 1e6 or self.size > ROTATE_AFTER_BYTES:
                    self._write(parts)
                    parts = []
                    self._close_file()
            self._write(parts)
        except (OSError, ValueError, TypeError) as exc:
            self._fail(exc)

    def _event_text(self, phase: str, name: str, start_s: float, end_s: float, args: dict) -> str:
        start_us = int(start_s * 1e6)
        if self.fd is None:
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
        self.size += len(text)
        self.last_end_us = max(self.last_end_us, end_us)
        return text

    def _write(self, parts: list) -> None:
        if parts and self.fd is not None:
            os.write(self.fd, "".join(parts).encode())

    def _open(self, origin_us: int) -> None:
        path = self.partial_path()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if self.min_free_bytes:
            stats = os.statvfs(os.path.dirname(path))
            if stats.f_bavail * stats.f_frsize < self.min_free_bytes:
                raise OSError(28, f"less than {self.min_free_bytes >> 20} MB free: the space stays the training's")
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self.origin_us = origin_us
        self.opened_at = self.clock()
        header = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": origin_us}},
                  {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}}]
        text = "[\n" + "".join(json.dumps(line) + ",\n" for line in header)
        os.write(self.fd, text.encode())
        self.size = len(text)

    def _close_file(self) -> None:
        """Finish the array (the last event loses its comma) and move the file into place, named by its end time."""
        if self.fd is None:
            return
        path = self.partial_path()
        os.close(self.fd)
        self.fd = None
        with open(path, "rb") as source:
            body = source.read()
        final = os.path.join(self.root, layout.timeline_file(self.last_end_us, self.token))
        write_atomic(final, body.rstrip().rstrip(b",") + b"\n]\n")
        os.unlink(path)
        self._reset()

    def _close_quietly(self) -> None:
        try:
            self._close_file()
        except (OSError, ValueError) as exc:
            self._fail(exc)

    def close(self) -> None:
        """Write out what is queued and the open file (at exit, on flush); never raises."""
        if os.getpid() != self.pid:
            return
        with self.lock:
            self._drain()
            self._close_quietly()

    def _fail(self, exc: Exception) -> None:
        """Count, log the first failure, and pause the timeline for a minute (a full disk stays cheap)."""
        self.failures += 1
        self.retry_at = self.clock() + ROTATE_AFTER_S
        if self.failures == 1:
            self.log(f"cannot write framework events under {self.root}: {type(exc).__name__}: {exc}; "
                     "step timings are lost while this lasts (training continues)")
        try:
            if self.fd is not None:
                os.close(self.fd)
        except OSError:
            pass
        self._reset()


def _after_fork_in_child() -> None:
    for writer in list(_writers):
        if writer.fd is not None:
            try:
                os.close(writer.fd)  # the child's copy only: no buffered data, the parent's file is untouched
            except OSError:
                pass
        writer._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _partial_events(body: bytes) -> tuple:
    """(origin us, end us of the last event, the complete lines) of a partial file."""
    end = body.rfind(b"\n")
    lines = body[: end + 1].splitlines() if end >= 0 else []
    origin = last_end = None
    kept = []
    for line in lines:
        text = line.strip().rstrip(b",")
        if text == b"[":
            kept.append(line)
            continue
        try:
            event = json.loads(text)
        except ValueError:
            break  # a torn write: everything before it is whole
        kept.append(line)
        if origin is None:
            origin = event.get("args", {}).get("start_time_since_epoch_in_micros")
        if event.get("ph") == "X":
            last_end = max(last_end or 0, int(event["ts"]) + int(event["dur"]))
    return origin, last_end, b"\n".join(kept)


def recover_partials(root: str, alive: Callable[[int], bool] | None) -> int:
    """Move the partial timeline files of processes that ended into place; ``alive`` None: every one (the training
    has ended). Returns how many files were recovered."""
    folder = os.path.join(root, layout.PARTIAL_DIR)
    try:
        names = [n for n in os.listdir(folder) if n.endswith(PARTIAL_SUFFIX)]
    except FileNotFoundError:
        return 0
    recovered = 0
    for name in names:
        token, _, rest = name[: -len(PARTIAL_SUFFIX)].partition(".")
        pid_text = rest.partition(".")[0]
        if not pid_text.isdigit() or (alive is not None and alive(int(pid_text))):
            continue
        path = os.path.join(folder, name)
        with open(path, "rb") as source:
            origin, last_end, body = _partial_events(source.read())
        if origin is not None and last_end is not None:
            end_us = int(origin) + last_end
            final = os.path.join(root, layout.timeline_file(end_us, token))
            write_atomic(final, body.rstrip().rstrip(b",") + b"\n]\n")
            recovered += 1
        os.unlink(path)
    return recovered
