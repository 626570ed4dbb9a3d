"""The sampler's own hang watch: no step or phase on this host for ``hang_minutes`` -> a line in the job's log, and
with ``on_hang=exit`` the end of the training's process group, so that the job *fails* (and SageMaker's retry
strategy or a restart from the last checkpoint applies) instead of billing until MaxRuntime.

Progress is the heartbeat files of the training processes (heartbeat.py). The sampler belongs to no process of the
training, so "the training" is found when the watch fires: the process group of the training process that first
started a sampler in this container (``--training-pid``, kept in TRAINING_FILE so that a supervised restart by another
member does not forget the launcher), and the groups of the processes that marked progress (torchrun puts each worker
in a session of its own). The sampler's own group is never signalled. Nothing is judged before the first step:
a slow start is MaxInitializationTime's business. The watch learns the longest pause between steps seen so far (a
checkpoint save, an evaluation pass) and waits at least ``PAUSE_FACTOR`` times that long.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Callable

from .heartbeat import heartbeat_folder, write_out_request

#: Next to the heartbeat folder (never uploaded, never progress): the pid of the first training process that started
#: a sampler in this container.
TRAINING_FILE = ".heartbeat-training"

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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: it exists
    return True


def remember_training(root: str, pid: int | None) -> int | None:
    """The training's first starter: the pid recorded by a predecessor while it lives, else ``pid`` (recorded)."""
    path = os.path.join(root, TRAINING_FILE)
    try:
        with open(path, encoding="ascii") as handle:
            text = handle.read().strip()
        if text.isdigit() and _alive(int(text)):
            return int(text)
    except OSError:
        pass
    if pid:
        try:
            os.makedirs(root, exist_ok=True)
            with open(path, "w", encoding="ascii") as handle:
                handle.write(str(pid))
        except OSError:
            pass
    return pid


def marking_pids(folder: str) -> list:
    """The pids of the training processes that marked progress (heartbeat files ``<token>.<pid>``), alive ones."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    pids = {int(n.rpartition(".")[2]) for n in names if n.rpartition(".")[2].isdigit()}
    return sorted(p for p in pids if p > 0 and _alive(p))


def training_groups(pids: list) -> list:
    """The distinct process groups of ``pids``, without the sampler's own."""
    groups = []
    own = os.getpgrp()
    for pid in pids:
        try:
            group = os.getpgid(pid)
        except OSError:
            continue
        if group != own and group > 0 and group not in groups:
            groups.append(group)
    return groups


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
        self.node, self.action, self.minutes = node, action, minutes
        self.watch_pid = remember_training(root, watch_pid)
        self.status, self.clock, self.kill = status, clock, kill
        self.newest: float | None = None
        self.longest_pause = 0.0
        self.next_check = 0.0
        self.fired_at: float | None = None
        self.groups: list = []

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
        ranks = marking_pids(self.folder)
        starter = [self.watch_pid] if self.watch_pid and _alive(self.watch_pid) else []
        if self.action == "exit":
            self.groups = training_groups(starter + ranks)
        if self.groups:
            which = ("process groups " if len(self.groups) > 1 else "process group ") + \
                ", ".join(str(group) for group in self.groups)
            line += (f"; on_hang=exit: ending the training ({which}) with a non-zero status so that the job fails "
                     "and its retry strategy applies")
        self.status.set("hang", {"at": now, "stalled_s": round(stalled, 1), "action": self.action})
        self.status.fail("hang", line)
        for pid in starter + ranks:
            if tell_job_log(pid, line):
                break
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
        if not self.groups:
            return
        if not self.terminated and now - self.fired_at >= WRITE_OUT_GRACE_S:
            self.terminated = True
            self._signal(signal.SIGTERM)
        elif self.terminated and now - self.fired_at > WRITE_OUT_GRACE_S + KILL_AFTER_S:
            self._signal(signal.SIGKILL)
            self.groups = []

    def _signal(self, number: int) -> None:
        for group in self.groups:
            try:
                self.kill(group, number)
            except ProcessLookupError:
                pass  # that group has already ended
            except OSError as exc:
                self.status.fail("hang_signal", f"cannot signal process group {group}: {exc}")
