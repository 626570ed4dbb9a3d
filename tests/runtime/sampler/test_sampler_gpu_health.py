"""The GPU health fields through a fake NVML library (ctypes) and a fake nvidia-smi (a process on PATH)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from health_fakes import compile_health_nvml, write_health_smi
from sampler_fakes import system_records

from cdk_sagemaker_debugger.runtime.sampler.daemon import Daemon
from cdk_sagemaker_debugger.runtime.sampler.gpu_health import SmiHealth, parse_smi_health, smi_number
from cdk_sagemaker_debugger.runtime.sampler.settings import Settings
from cdk_sagemaker_debugger.runtime.sampler.status import Status


def values(root: Path) -> dict:
    found: dict = {}
    for r in system_records(root):
        if r["Type"] == "gpu":
            found.setdefault((r["Name"], r["Dimension"]), []).append(r["Value"])
    return found


@pytest.fixture
def health_nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The fake NVML library with health functions, and no nvidia-smi on PATH."""
    library = compile_health_nvml(tmp_path / "nvml")
    if library is None:
        pytest.skip("no C compiler to build the fake NVML library")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    return str(library)


def run(tmp_path: Path, seconds: float, nvml: str) -> dict:
    settings = Settings(local_dir=str(tmp_path / "out"), interval_ms=100, nvml_library=nvml)
    return Daemon(settings).run(duration_s=seconds)


def test_nvml_health_fields_and_one_xid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, health_nvml: str):
    for key, value in {"FAKE_NVML_POWER_W": "95", "FAKE_NVML_LIMIT_W": "700", "FAKE_NVML_THROTTLE": "0x40",
                       "FAKE_NVML_THROTTLE_GPU": "1", "FAKE_NVML_XID": "79", "FAKE_NVML_XID_GPU": "1",
                       "FAKE_NVML_TEMP": "93", "FAKE_NVML_SM_CLOCK": "1410"}.items():
        monkeypatch.setenv(key, value)
    status = run(tmp_path, 0.6, health_nvml)
    assert status["gpu_source"] == "nvml" and status["failures"] == {}
    found = values(tmp_path / "out")
    assert set(found[("gpu0", "GPUPowerDraw")]) == {95.0} and set(found[("gpu1", "GPUPowerLimit")]) == {700.0}
    assert set(found[("gpu1", "GPUThrottleReasons")]) == {64.0} and set(found[("gpu0", "GPUThrottleReasons")]) == {0.0}
    assert set(found[("gpu0", "GPUSMClock")]) == {1410.0} and set(found[("gpu0", "GPUTemperature")]) == {93.0}
    assert found[("gpu1", "GPUXid")] == [79.0] and ("gpu0", "GPUXid") not in found  # one event, once
    assert set(found[("gpu0", "GPURemappedRowsPending")]) == {0.0}
    # the slow fields come once per SLOW_EVERY_S, the fast ones every sample
    assert len(found[("gpu0", "GPUPowerLimit")]) == 1 < len(found[("gpu0", "GPUPowerDraw")])


def test_nvidia_smi_health_fields(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    write_health_smi(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVML_THROTTLE", "0x20")
    status = run(tmp_path, 1.5, str(tmp_path / "missing.so"))
    assert status["gpu_source"] == "nvidia-smi" and status["failures"] == {}
    found = values(tmp_path / "out")
    assert set(found[("gpu1", "GPUThrottleReasons")]) == {32.0}
    assert set(found[("gpu0", "GPUPowerDraw")]) == {300.0} and set(found[("gpu0", "GPURemappedRowsPending")]) == {0.0}
    assert ("gpu0", "GPURemappedRowsFailure") not in found  # [N/A]: dropped, not zero


def test_smi_values_parse_as_documented():
    assert smi_number("0x0000000000000040") == 64.0 and smi_number("Yes") == 1.0 and smi_number("[N/A]") is None
    index, fields = parse_smi_health("3, 250.5, 700.00, 1980, 2619, 71, 0x0000000000000004, 0, No, No")
    assert index == 3 and dict(fields)["GPUPowerDraw"] == 250.5 and dict(fields)["GPUThrottleReasons"] == 4.0
    assert parse_smi_health("NVIDIA-SMI has failed") is None


def test_an_nvml_error_on_one_gpu_is_counted_like_utilisation_and_the_other_gpu_keeps_its_fields(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, health_nvml: str):
    monkeypatch.setenv("FAKE_NVML_POWER_FAIL_GPU", "1")
    status = run(tmp_path, 0.6, health_nvml)
    assert status["gpu_errors"] == {"gpu1": "NVML_ERROR_GPU_IS_LOST"} and status["failures"]["gpu1_nvml"] >= 1
    found = values(tmp_path / "out")
    assert ("gpu1", "GPUPowerDraw") not in found and set(found[("gpu0", "GPUPowerDraw")]) == {300.0}
    assert set(found[("gpu1", "GPUTemperature")]) == {60.0}  # only the failing field is lost


def test_an_unsupported_health_field_is_named_in_the_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            health_nvml: str):
    monkeypatch.setenv("FAKE_NVML_POWER_FAIL_GPU", "0")
    monkeypatch.setenv("FAKE_NVML_POWER_FAIL_CODE", "3")  # NOT_SUPPORTED: dropped for that GPU, not an error
    status = run(tmp_path, 0.4, health_nvml)
    assert status["gpu_health_unsupported"] == {"gpu0": ["GPUPowerDraw"]} and "gpu_errors" not in status


def test_a_silent_nvidia_smi_health_reading_ages_out_instead_of_repeating(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    import time

    smi = write_health_smi(tmp_path / "bin")
    monkeypatch.setenv("FAKE_SMI_SILENT_AFTER", "1")
    now = [1000.0]
    status = Status("algo-1", lambda message: None)
    source = SmiHealth(str(smi), 100, status, monotonic=lambda: now[0])
    try:
        deadline = time.monotonic() + 20
        rows = source.rows()
        while not rows and time.monotonic() < deadline:
            time.sleep(0.05)
            rows = source.rows()
        assert {name for _, name, _, _ in rows} == {"gpu0", "gpu1"}
        now[0] += source.stale_after + 1
        assert source.rows() == [] and status.failures["gpu_health_stale"] == 2  # one per GPU
        assert "gpu_stale" not in status.failures  # the utilisation reader's key stays its own
    finally:
        source.close()
