"""The training-script API: step(), start(), stop(), flush(), the framework callbacks, the public shim."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from cdk_sagemaker_debugger.runtime.sampler import api, contract, launcher, watch
from cdk_sagemaker_debugger.runtime.sampler.lock import holder_pid
from cdk_sagemaker_debugger.runtime.sampler.timeline import ROTATE_AFTER_S, TimelineWriter


@pytest.fixture(autouse=True)
def fresh_api(monkeypatch: pytest.MonkeyPatch):
    for name in (contract.S3_URI, contract.DISABLED, contract.FRAMEWORK_EVENTS, "CDK_SAGEMAKER_SAMPLER_LOCAL_DIR",
                 "RANK", "TRAINING_JOB_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(api, "_state", {"settings": None, "writer": None, "checked": False, "counters": {},
                                        "logged": set()})
    monkeypatch.setattr(launcher, "before_stop", [])
    yield


def steps_in(root: Path) -> list:
    events = []
    for path in sorted(root.glob("framework/pevents/*/*.json")):
        events += [e for e in json.loads(path.read_text()) if e.get("ph") == "X"]
    return events


def test_step_does_nothing_when_no_sampler_is_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    with api.step():
        pass
    assert api.flush() is False
    assert list(tmp_path.iterdir()) == []


def test_steps_are_numbered_per_mode_and_written_on_flush(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys):
    monkeypatch.setenv("CDK_SAGEMAKER_SAMPLER_LOCAL_DIR", str(tmp_path))
    monkeypatch.setenv("RANK", "3")
    for _ in range(2):
        with api.step():
            pass
    with api.step(41, mode="EVAL"):
        pass
    with api.step(mode="TRAINING"):  # not a mode: logged once, not recorded
        pass
    with api.step(mode="TRAINING"):
        pass
    assert api.flush() is False  # no sampler process to signal; the file is in place all the same
    events = steps_in(tmp_path)
    assert [(e["name"], e["args"]["step_num"]) for e in events] == [
        ("Step:ModeKeys.TRAIN", "0"), ("Step:ModeKeys.TRAIN", "1"), ("Step:ModeKeys.EVAL", "41")]
    assert all(e["dur"] >= 0 for e in events)
    assert next(tmp_path.glob("framework/pevents/*/*.json")).name.endswith("_3-algo-1_pythontimeline.json")
    assert capsys.readouterr().err.count("TRAINING") == 1


def test_framework_events_can_be_switched_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CDK_SAGEMAKER_SAMPLER_LOCAL_DIR", str(tmp_path))
    monkeypatch.setenv(contract.FRAMEWORK_EVENTS, "0")
    with api.step():
        pass
    api.flush()
    assert steps_in(tmp_path) == []


def test_timeline_files_rotate_every_minute(tmp_path: Path):
    now = [1_800_000_000.0]
    writer = TimelineWriter(str(tmp_path), "0-algo-1", log=print, clock=lambda: now[0])
    for _ in range(4):  # the file opened by the first step closes after the third (62 s), the fourth opens another
        writer.add("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", now[0], now[0] + 0.5, {"step_num": "0"})
        now[0] += ROTATE_AFTER_S / 2 + 1
    writer.close()
    files = sorted(tmp_path.glob("framework/pevents/*/*.json"))
    assert [len(json.loads(f.read_text())) - 4 for f in files] == [3, 1]  # events besides the 4 metadata records


def test_an_unwritable_timeline_costs_one_line_and_no_exception(capsys):
    writer = TimelineWriter("/proc/not-writable", "0-algo-1", log=lambda m: sys.stderr.write(m + "\n"))
    for _ in range(3):
        writer.add("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", 1.0, 2.0, {})
    writer.close()
    assert len(capsys.readouterr().err.splitlines()) == 1 and writer.failures == 1  # paused after the first failure


def test_start_refuses_unknown_options_with_one_line(capsys):
    assert api.start(intervall_ms=100) is False
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "'intervall_ms'" in err and "interval_ms" in err


def test_start_is_off_when_disabled(monkeypatch: pytest.MonkeyPatch, capsys, tmp_path: Path):
    monkeypatch.setenv(contract.DISABLED, "1")
    assert api.start(local_dir=str(tmp_path)) is False
    assert capsys.readouterr().err == "" and list(tmp_path.iterdir()) == []


def test_start_then_stop_runs_one_detached_sampler_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CDK_SAGEMAKER_SAMPLER_NVML_LIBRARY", str(tmp_path / "none.so"))
    monkeypatch.setattr(watch, "joined", {})
    local = tmp_path / "local"
    assert api.start(local_dir=str(local), interval_ms=100) is True
    assert api.start(local_dir=str(local), interval_ms=100) is True  # idempotent
    with api.step():
        pass
    deadline = time.monotonic() + 10
    while holder_pid(str(local)) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = holder_pid(str(local))
    assert pid is not None and pid != os.getpid()
    with pytest.raises(ChildProcessError):  # nobody's child: this process has no child to wait for
        os.waitpid(pid, os.WNOHANG)
    assert api.stop() is True  # the last member left: the sampler writes out and ends now
    assert holder_pid(str(local)) is None
    assert len(steps_in(local)) == 1
    status = json.loads((local / "sampler" / "status-algo-1.json").read_text())
    assert status["pid"] == pid and status["interval_ms"] == 100 and status["finished"]
    assert "the last process of the training stopped the sampler" in status["stopped_because"]
    assert (local / "system" / "training_job_end.ts").exists() and (local / "framework" / "training_job_end.ts").exists()


def test_the_lightning_callback_records_train_and_eval_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CDK_SAGEMAKER_SAMPLER_LOCAL_DIR", str(tmp_path))
    lightning = types.ModuleType("lightning")
    lightning.pytorch = types.ModuleType("lightning.pytorch")
    lightning.pytorch.Callback = type("Callback", (), {})
    monkeypatch.setitem(sys.modules, "lightning", lightning)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", lightning.pytorch)
    from cdk_sagemaker_debugger.runtime.sampler.callbacks import lightning_callback

    callback = lightning_callback()
    assert isinstance(callback, lightning.pytorch.Callback)
    for batch in range(2):
        callback.on_train_batch_start(None, None, None, batch)
        callback.on_before_backward(None, None, None)
        callback.on_after_backward(None, None)
        callback.on_train_batch_end(None, None, None, None, batch)
    callback.on_validation_batch_start(None, None, None, 0, 0)
    callback.on_validation_batch_end(None, None, None, None, 0, 0)
    api.flush()
    events = steps_in(tmp_path)
    assert [(e["name"], e["args"]["step_num"]) for e in events if e["name"].startswith("Step:")] == [
        ("Step:ModeKeys.TRAIN", "0"), ("Step:ModeKeys.TRAIN", "1"), ("Step:ModeKeys.EVAL", "0")]
    # the phases Lightning's hooks bound: the data wait between the two batches, forward and backward of each
    assert [e["name"] for e in events if not e["name"].startswith("Step:")] == [
        "forward", "backward", "data", "forward", "backward"]


def test_the_hugging_face_callback_numbers_steps_by_global_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CDK_SAGEMAKER_SAMPLER_LOCAL_DIR", str(tmp_path))
    transformers = types.ModuleType("transformers")
    transformers.TrainerCallback = type("TrainerCallback", (), {})
    monkeypatch.setitem(sys.modules, "transformers", transformers)
    from cdk_sagemaker_debugger.runtime.sampler.callbacks import huggingface_callback

    callback = huggingface_callback()
    state = types.SimpleNamespace(global_step=0)
    for _ in range(2):
        callback.on_step_begin(None, state, None)
        state.global_step += 1
        callback.on_step_end(None, state, None)
    api.flush()
    events = steps_in(tmp_path)
    assert [e["args"]["step_num"] for e in events if e["name"].startswith("Step:")] == ["1", "2"]
    assert [e["name"] for e in events if not e["name"].startswith("Step:")] == ["data"]  # between the two steps


def test_a_missing_framework_is_a_clear_import_error(monkeypatch: pytest.MonkeyPatch):
    from cdk_sagemaker_debugger.runtime.sampler.callbacks import huggingface_callback

    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(ImportError, match=r"transformers.TrainerCallback.*sampler.step"):
        huggingface_callback()


def test_the_public_shim_exports_the_api_without_aws_cdk():
    code = ("import sys\nfrom cdk_sagemaker_debugger import sampler\n"
            "print(sorted(n for n in sampler.__all__ if callable(getattr(sampler, n))))\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'jsii', 'constructs')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines() == [
        "['flush', 'huggingface_callback', 'lightning_callback', 'phase', 'start', 'step', 'stop', 'wrap']", "[]"]


def test_a_forked_child_that_exits_normally_writes_its_own_steps_and_never_hangs(tmp_path: Path):
    """The parent's writer thread may hold the writer's lock at the fork: the child gets a lock of its own."""
    code = f"""
import os, sys, threading
sys.path.insert(0, {str(Path(api.__file__).parents[3])!r})
from cdk_sagemaker_debugger.runtime.sampler.timeline import TimelineWriter
writer = TimelineWriter({str(tmp_path)!r}, "0-algo-1", log=print)
writer.add("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", 1.0, 2.0, {{"step_num": "0"}})
writer.lock.acquire()  # as if the writer thread were writing at the moment of the fork
pid = os.fork()
if pid == 0:
    writer.add("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", 3.0, 4.0, {{"step_num": "1"}})
    writer.close()  # also what atexit does
    sys.exit(0)
writer.lock.release()
_, status = os.waitpid(pid, 0)
writer.close()
print(os.waitstatus_to_exitcode(status))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert result.stdout == "0\n", result.stderr
    assert sorted(e["args"]["step_num"] for e in steps_in(tmp_path)) == ["0", "1"]
