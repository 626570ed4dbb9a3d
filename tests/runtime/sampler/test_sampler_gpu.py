"""GPU records through a fake nvidia-smi on PATH and a fake NVML library loaded with ctypes; none: one warning."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sampler_fakes import compile_fake_nvml, system_records, write_fake_smi

from cdk_sagemaker_debugger.runtime.sampler.daemon import Daemon
from cdk_sagemaker_debugger.runtime.sampler.gpu import parse_smi_line
from cdk_sagemaker_debugger.runtime.sampler.settings import Settings


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
    status = run(tmp_path, 1.2, str(tmp_path / "missing.so"))
    assert status["failures"]["gpu_nvidia_smi_exit"] == 3  # three restarts, then it gives up
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
