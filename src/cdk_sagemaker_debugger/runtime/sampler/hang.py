"""The sampler's own hang watch: no step or phase on this host for ``hang_minutes`` -> a line in the job's log, and
with ``on_hang=exit`` the end of the training's process group, so that the job *fails* (and SageMaker's retry
strategy or a restart from the last checkpoint applies) instead of billing until MaxRuntime.

Progress is the heartbeat files of the training processes (heartbeat.py). Nothing is judged before the first step:
a slow start is MaxInitializationTime's business. The watch learns the longest pause between steps seen so far (a
checkpoint save, an evaluation pass) and waits at least ``PAUSE_FACTOR`` times that long.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Callable

from .heartbeat import heartbeat_folder, write_out_request

PAUSE_FACTOR = 2.0
CHECK_EVERY_S = 1.0
#: Between asking the training processes to write out their timelines and SIGTERM (their write-out thread looks
#: once a second).
WRITE_OUT_GRACE_S = 3.0
#: After SIGTERM, the group gets this long to exit (torchrun forwards it to its workers) before SIGKILL.
KILL_AFTER_S = 30.0


def newest_mark(folder: str) -> float | None:
    """The newest heartbeat time in ``folder`` (None before any step)."""
    newest = None
    try:
        entries = os.scandir(folder)
    except OSError:
        return None
    with entries:
        for entry in entries:
            try:
                mtime = entry.stat().st_mtime
            except OSError:
                continue
            newest = mtime if newest is None or mtime > newest else newest
    return newest


def tell_job_log(pid: int | None, line: str) -> bool:
    """Write ``line`` to the standard error of ``pid`` (the training's entry point: its output is the job's log)."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/fd/2", "a", encoding="utf-8") as stream:
            stream.write(line + "\n")
        return True
    except OSError:
        return False


class HangWatch:
    def __init__(self, root: str, node: str, action: str, minutes: float, watch_pid: int | None, status: object,
                 clock: Callable[[], float] = time.time, kill: Callable[[int, int], None] = os.killpg):
        self.folder = heartbeat_folder(root)
        self.request = write_out_request(root)
        self.terminated = False
        self.node, self.action, self.minutes, self.watch_pid = node, action, minutes, watch_pid
        self.status, self.clock, self.kill = status, clock, kill
        self.newest: float | None = None
        self.longest_pause = 0.0
        self.next_check = 0.0
        self.fired_at: float | None = None
        self.group: int | None = None

    def limit_s(self) -> float:
        return max(self.minutes * 60.0, PAUSE_FACTOR * self.longest_pause)

    def check(self) -> None:
        """Called from the sampling loop; reads the heartbeat folder at most once a second."""
        now = self.clock()
        if now < self.next_check:
            return
        self.next_check = now + CHECK_EVERY_S
        if self.fired_at is not None:
            self._escalate(now)
        newest = newest_mark(self.folder)
        if newest is None:
            return
        if self.newest is None or newest > self.newest:
            if self.newest is not None:
                self.longest_pause = max(self.longest_pause, newest - self.newest)
            self.newest = newest
            if self.fired_at is not None and self.action != "exit":
                self.fired_at = None  # progress again: a later hang is reported again
            return
        stalled = now - self.newest
        if stalled > self.limit_s() and self.fired_at is None:
            self.fire(now, stalled)

    def fire(self, now: float, stalled: float) -> None:
        self.fired_at = now
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.newest))
        line = (f"cdk-sagemaker-debugger sampler: TrainingHang on {self.node}: no training step or phase for "
                f"{stalled / 60:.1f} minutes (last at {at}; the limit is {self.limit_s() / 60:.1f} minutes)")
        if self.action == "exit" and self.watch_pid:
            try:
                self.group = os.getpgid(self.watch_pid)
            except OSError:
                self.group = None
        if self.group is not None:
            line += (f"; on_hang=exit: ending the training (process group {self.group}) with a non-zero status so "
                     "that the job fails and its retry strategy applies")
        self.status.set("hang", {"at": now, "stalled_s": round(stalled, 1), "action": self.action})
        self.status.fail("hang", line)
        tell_job_log(self.watch_pid, line)
        self._ask_write_out()

    def _ask_write_out(self) -> None:
        """The last events of every rank, out of .partial/ and into the upload (who stopped first)."""
        try:
            with open(self.request, "a", encoding="ascii"):
                pass
            os.utime(self.request)
        except OSError as exc:
            self.status.fail("write", f"cannot ask for the timelines to be written out: {exc}")

    def _escalate(self, now: float) -> None:
        if self.group is None:
            return
        if not self.terminated and now - self.fired_at >= WRITE_OUT_GRACE_S:
            self.terminated = True
            self._signal(signal.SIGTERM)
        elif self.terminated and now - self.fired_at > WRITE_OUT_GRACE_S + KILL_AFTER_S:
            self._signal(signal.SIGKILL)
            self.group = None

    def _signal(self, number: int) -> None:
        try:
            self.kill(self.group, number)
        except OSError as exc:
            self.status.fail("hang_signal", f"cannot signal process group {self.group}: {exc}")
