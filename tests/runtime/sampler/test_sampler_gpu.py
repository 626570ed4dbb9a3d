"""GPU records through a fake nvidia-smi on PATH and a fake NVML library loaded with ctypes; none: one warning."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from sampler_fakes import compile_fake_nvml, system_records, write_fake_smi

from cdk_sagemaker_debugger.runtime.sampler.daemon import Daemon
from cdk_sagemaker_debugger.runtime.sampler.gpu import SmiSource, parse_smi_line
from cdk_sagemaker_debugger.runtime.sampler.settings import Settings
from cdk_sagemaker_debugger.runtime.sampler.status import Status


def gpu_values(root: Path) -> dict:
    values: dict = {}
    for r in system_records(root):
        if r["Type"] == "gpu":
            assert r["Name"].startswith("gpu") and r["NodeId"] == "algo-1"
            values.setdefault((r["Name"], r["Dimension"]), set()).add(r["Value"])
    return values


def run(tmp_path: Path, seconds: float, nvml: str) -> dict:
    settings = Settings(local_dir=str(tmp_path / "out"), interval_ms=100, nvml_library=nvml)
    return Daemon(settings).run(duration_s=seconds)


def test_nvidia_smi_when_nvml_cannot_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    write_fake_smi(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GPUS", "3")
    monkeypatch.setenv("FAKE_GPU_UTIL", "57")
    monkeypatch.setenv("FAKE_GPU_MEMORY", "13")
    status = run(tmp_path, 0.8, str(tmp_path / "missing-libnvidia-ml.so.1"))
    assert status["gpu_source"] == "nvidia-smi" and status["gpus"] == 3
    assert gpu_values(tmp_path / "out") == {
        **{(f"gpu{i}", "GPUUtilization"): {57.0} for i in range(3)},
        **{(f"gpu{i}", "GPUMemoryUtilization"): {13.0} for i in range(3)},
    }
    assert status["failures"] == {}


def test_nvml_through_ctypes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    library = compile_fake_nvml(tmp_path / "nvml")
    if library is None:
        pytest.skip("no C compiler to build the fake NVML library")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no nvidia-smi: NVML alone must do
    monkeypatch.setenv("FAKE_NVML_GPUS", "2")
    status = run(tmp_path, 0.5, str(library))
    assert status["gpu_source"] == "nvml" and status["gpus"] == 2
    # the values the C library returns: utilisation 30 + 10 i, memory utilisation 7 + i
    assert gpu_values(tmp_path / "out") == {("gpu0", "GPUUtilization"): {30.0}, ("gpu1", "GPUUtilization"): {40.0},
                                            ("gpu0", "GPUMemoryUtilization"): {7.0},
                                            ("gpu1", "GPUMemoryUtilization"): {8.0}}


def test_neither_means_no_gpu_records_and_one_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    status = run(tmp_path, 0.4, str(tmp_path / "missing.so"))
    assert status["gpu_source"] == "none" and "gpus" not in status
    assert gpu_values(tmp_path / "out") == {}
    assert status["failures"] == {}
    log = (tmp_path / "out" / "sampler" / "log-algo-1.txt").read_text()
    assert log.count("no GPU metrics") == 1 and "nvidia-smi is not on PATH" in log


def test_a_failing_nvidia_smi_is_retried_then_given_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "bin").mkdir()
    failing = tmp_path / "bin" / "nvidia-smi"  # what nvidia-smi does on a host without a working driver
    failing.write_text("#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                       "driver.\"\nexit 9\n")
    failing.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    status = run(tmp_path, 2.0, str(tmp_path / "missing.so"))  # restarts 0.1, 0.2, 0.4 s apart
    assert status["failures"]["gpu_nvidia_smi_exit"] == 3  # three restarts (backed off), then it gives up
    assert status["failures"]["gpu_nvidia_smi_output"] >= 1  # its message is counted, not parsed as a GPU
    assert any("gave up" in m for m in status["messages"])
    assert status["counts"]["samples"] >= 6  # sampling went on
    assert gpu_values(tmp_path / "out") == {}


@pytest.mark.parametrize(("line", "parsed"), [
    ("0, 45, 12", (0, 45.0, 12.0)),
    ("7, 100, 0", (7, 100.0, 0.0)),
    ("1, [N/A], 3", None),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", None),
])
def test_nvidia_smi_lines(line: str, parsed: tuple | None):
    assert parse_smi_line(line) == parsed


# ---- readings that age out, restarts that back off, NVML errors per GPU


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def smi_script(folder: Path, body: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "nvidia-smi"
    path.write_text(f"#!{sys.executable}\nimport sys, time\n{body}")
    path.chmod(0o755)
    return str(path)


def read_after(source: SmiSource, clock: FakeClock, advance_s: float, real_s: float = 0.3) -> list:
    time.sleep(real_s)  # the real process writes meanwhile
    clock.now += advance_s
    return source.read()


def test_a_gpu_that_falls_off_the_bus_ages_out_instead_of_repeating(tmp_path: Path):
    smi = smi_script(tmp_path, "print('0, 90, 10\\n1, 90, 10', flush=True)\n"
                               "while True:\n    print('0, 5, 10', flush=True)\n    time.sleep(0.05)\n")
    clock, status = FakeClock(), Status("algo-1", log=lambda message: None)
    source = SmiSource(smi, 100, status, monotonic=clock)
    try:
        assert {v[0] for v in read_after(source, clock, 0.0)} == {0, 1}
        later = read_after(source, clock, 3.0)  # gpu1's only reading is 3 s old now (stale after 2 s at 100 ms)
        assert [v[:2] for v in later] == [(0, 5.0)]
        assert status.failures["gpu_stale"] == 1 and "gpu1" in status.messages[-1]
    finally:
        source.close()


def test_a_hanging_nvidia_smi_reports_nothing_and_is_restarted(tmp_path: Path):
    starts = tmp_path / "starts"
    smi = smi_script(tmp_path, f"open({str(starts)!r}, 'a').write('x')\nprint('0, 70, 10', flush=True)\n"
                               "time.sleep(600)\n")
    clock, status = FakeClock(), Status("algo-1", log=lambda message: None)
    source = SmiSource(smi, 100, status, monotonic=clock)
    try:
        assert read_after(source, clock, 0.0) == [(0, 70.0, 10.0)]
        assert read_after(source, clock, 2.5) == []  # the reading is 2.5 s old: never repeated as live
        assert read_after(source, clock, 2.0) == []  # hung for over twice the limit: killed, restart scheduled
        assert status.failures["gpu_nvidia_smi_hung"] == 1
        read_after(source, clock, 1.0)
        assert read_after(source, clock, 0.0) == [(0, 70.0, 10.0)]  # the restarted one's fresh reading
        assert starts.read_text() == "xx"
    finally:
        source.close()


def test_an_nvidia_smi_that_exits_after_each_reading_is_restarted_with_a_back_off(tmp_path: Path):
    starts = tmp_path / "starts"
    smi = smi_script(tmp_path, f"open({str(starts)!r}, 'a').write('x')\nprint('0, 42, 10', flush=True)\n")
    clock, status = FakeClock(), Status("algo-1", log=lambda message: None)
    source = SmiSource(smi, 100, status, monotonic=clock)
    seen = []
    try:
        for _ in range(30):  # 3 s at 100 ms: 30 restarts without a back-off
            seen += read_after(source, clock, 0.1, real_s=0.05)
    finally:
        source.close()
    assert (0, 42.0, 10.0) in seen
    assert len(starts.read_text()) <= 6  # 0.1, 0.2, 0.4, 0.8, 1.6 s apart
    assert "gpu" not in status.warned  # it produces readings: backed off, never given up


def test_an_nvml_error_on_one_gpu_is_counted_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    library = compile_fake_nvml(tmp_path / "nvml")
    if library is None:
        pytest.skip("no C compiler to build the fake NVML library")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("FAKE_NVML_GPUS", "2")
    monkeypatch.setenv("FAKE_NVML_FAIL", "1:3")  # gpu1 answers NVML_ERROR_NOT_SUPPORTED (a MIG instance)
    status = run(tmp_path, 0.5, str(library))
    assert status["gpu_source"] == "nvml" and status["gpu_count"] == 2
    assert status["gpu_errors"] == {"gpu1": "NVML_ERROR_NOT_SUPPORTED"}
    assert status["failures"]["gpu1_nvml"] >= 3  # every sample counted
    assert set(gpu_values(tmp_path / "out")) == {("gpu0", "GPUUtilization"), ("gpu0", "GPUMemoryUtilization")}
