"""The sampler's hang watch: heartbeats, the learned pause, the job's log line and the fail-fast signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cdk_sagemaker_debugger.runtime.sampler import hang
from cdk_sagemaker_debugger.runtime.sampler.heartbeat import HEARTBEAT_DIR, write_out_request
from cdk_sagemaker_debugger.runtime.sampler.status import Status


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def mark(root: Path, at: float, name: str = "0-algo-1.100") -> None:
    folder = root / HEARTBEAT_DIR
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.touch()
    os.utime(path, (at, at))


@pytest.fixture
def starter():
    """A stand-in for the training's entry point: its own process group, its stderr a pipe we read."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    yield process
    process.kill()
    process.wait()


def watch(root: Path, clock: Clock, action: str, pid: int | None, signals: list) -> hang.HangWatch:
    status = Status("algo-1", lambda message: None)
    return hang.HangWatch(str(root), "algo-1", action, 1.0, pid, status, clock=clock,
                          kill=lambda group, number: signals.append((group, number)))


def test_exit_writes_the_log_line_asks_for_the_timelines_then_terminates_then_kills(tmp_path: Path, starter):
    clock, signals = Clock(1000.0), []
    w = watch(tmp_path, clock, "exit", starter.pid, signals)
    w.check()  # no heartbeat yet: nothing is judged before the first step
    for t in (1000.0, 1001.0, 1002.0):
        mark(tmp_path, t, f"0-algo-1.{starter.pid}")
        clock.now = t + 0.5
        w.check()
    clock.now = 1002.0 + 61
    w.check()
    assert w.fired_at == clock.now and signals == []  # asked for the timelines first
    assert os.path.exists(write_out_request(str(tmp_path)))
    clock.now += hang.WRITE_OUT_GRACE_S
    w.check()
    assert signals == [(starter.pid, signal.SIGTERM)]
    clock.now += hang.KILL_AFTER_S + 1
    w.check()
    assert signals == [(starter.pid, signal.SIGTERM), (starter.pid, signal.SIGKILL)]
    starter.kill()
    line = starter.stderr.read()
    assert "TrainingHang on algo-1: no training step or phase for 1.0 minutes" in line
    assert f"process group {starter.pid}" in line and "non-zero status" in line
    assert w.status.failures["hang"] == 1


def test_a_learned_pause_raises_the_limit_and_log_only_never_signals(tmp_path: Path):
    clock, signals = Clock(0.0), []
    w = watch(tmp_path, clock, "log", None, signals)
    mark(tmp_path, 100.0)
    clock.now = 100.5
    w.check()
    mark(tmp_path, 250.0)  # a 150 s checkpoint save, seen once
    clock.now = 250.5
    w.check()
    assert w.limit_s() == 300.0
    clock.now = 250.0 + 200  # longer than minutes (60 s), shorter than twice the learned pause
    w.check()
    assert w.fired_at is None
    clock.now = 250.0 + 301
    w.check()
    assert w.fired_at is not None and signals == [] and w.status.failures["hang"] == 1
    mark(tmp_path, clock.now)  # progress again: a later hang is reported again
    clock.now += 1
    w.check()
    assert w.fired_at is None


def test_a_restarted_sampler_keeps_the_launcher_and_ends_the_ranks_groups_too(tmp_path: Path, starter):
    """The sampler is nobody's child: a supervised restart by a rank must still end the launcher's group, and the
    ranks' own sessions (torchrun starts each worker in one) are ended with it; the sampler's own group never."""
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        hang.HangWatch(str(tmp_path), "algo-1", "exit", 1.0, starter.pid, Status("algo-1", lambda m: None))
        clock, signals = Clock(1000.0), []
        w = watch(tmp_path, clock, "exit", rank.pid, signals)  # restarted by the rank: the launcher is remembered
        assert w.watch_pid == starter.pid
        mark(tmp_path, 1000.0, f"1-algo-1.{rank.pid}")
        mark(tmp_path, 1000.0, f"0-algo-1.{os.getpid()}")  # a process in the sampler's own group: never signalled
        clock.now = 1000.5
        w.check()
        clock.now = 1000.0 + 61
        w.check()
        clock.now += hang.WRITE_OUT_GRACE_S
        w.check()
        assert signals == [(starter.pid, signal.SIGTERM), (rank.pid, signal.SIGTERM)]
        assert any(f"process groups {starter.pid}, {rank.pid}" in m for m in w.status.messages)
    finally:
        rank.kill()
        rank.wait()


def test_a_dead_launcher_is_replaced_by_the_new_starter(tmp_path: Path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert hang.remember_training(str(tmp_path), dead.pid) == dead.pid
    assert hang.remember_training(str(tmp_path), os.getpid()) == os.getpid()  # the recorded one has ended
    assert hang.remember_training(str(tmp_path), None) == os.getpid()
