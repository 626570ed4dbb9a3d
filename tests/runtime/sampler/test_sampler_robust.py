"""Hostile conditions in one process: a volume that fills, a clock that steps back, a credential refresh that fails,
an inconsistent /proc/meminfo, bad CLI input, and step() kept off the training thread."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from sampler_fakes import LocalHttp

from cdk_sagemaker_debugger.cli import main
from cdk_sagemaker_debugger.runtime.sampler import procfs
from cdk_sagemaker_debugger.runtime.sampler.credentials import CredentialChain
from cdk_sagemaker_debugger.runtime.sampler.daemon import Daemon
from cdk_sagemaker_debugger.runtime.sampler.minutes import MinuteFiles
from cdk_sagemaker_debugger.runtime.sampler.settings import Settings
from cdk_sagemaker_debugger.runtime.sampler.status import Status
from cdk_sagemaker_debugger.runtime.sampler.timeline import TimelineWriter

MIB = 1024 * 1024
MINUTE = 1_796_029_200  # 2026-11-30 09:00 UTC


@pytest.fixture
def small_volume(tmp_path: Path):
    """A 24 MiB tmpfs mounted for this test (root only): a training volume that can really fill."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; the full-disk test runs where the tests run as root")
    volume = tmp_path / "volume"
    volume.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(volume)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield volume
    finally:
        subprocess.run(["umount", "-l", str(volume)], check=False)


def test_a_long_upload_outage_never_takes_the_trainings_disk(small_volume: Path, monkeypatch: pytest.MonkeyPatch):
    for name, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    local = small_volume / "sampler"
    for i in range(12):  # twelve minutes that could not be uploaded, 1 MiB each
        path = local / "system/incremental/2026113009" / f"{MINUTE + 60 * i}.algo-1.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * (MIB - 1) + b"\n")
        os.utime(path, (MINUTE + 60 * i, MINUTE + 60 * i))
    (small_volume / "dataset").write_bytes(b"d" * 6 * MIB)
    settings = Settings(local_dir=str(local), interval_ms=100, s3_uri="s3://bucket/p", job_name="job",
                        uploader="stdlib", endpoint_url="http://127.0.0.1:9", nvml_library="none.so",
                        prune_uploaded=True, max_buffer_mb=4, min_free_mb=8)
    status = Daemon(settings, log=lambda message: None).run(duration_s=0.5)
    kept = sorted(p.name for p in local.glob("system/incremental/*/*.json"))
    assert status["counts"]["dropped_files"] >= 8 and status["failures"]["buffer_dropped"] >= 1
    assert f"{MINUTE}.algo-1.json" not in kept and f"{MINUTE + 660}.algo-1.json" in kept  # the oldest went first
    (small_volume / "checkpoint.pt").write_bytes(b"c" * 9 * MIB)  # the training's next write has its space


def test_the_sampler_stops_writing_before_the_volume_is_full(small_volume: Path):
    (small_volume / "dataset").write_bytes(b"d" * 18 * MIB)
    settings = Settings(local_dir=str(small_volume / "sampler"), interval_ms=100, nvml_library="none.so",
                        min_free_mb=8)
    status = Daemon(settings, log=lambda message: None).run(duration_s=0.4)
    assert status["counts"]["samples_skipped_low_disk"] >= 3 and "samples" not in status["counts"]
    assert any("less than 8 MB free" in m for m in status["messages"])
    writer = TimelineWriter(str(small_volume / "sampler"), "0-algo-1", log=lambda m: None, min_free_bytes=8 * MIB)
    writer.add("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", 1.0, 2.0, {})
    writer.close()
    assert writer.failures == 1 and not list(small_volume.glob("sampler/framework/pevents/*/*"))


def test_a_clock_stepping_back_never_replaces_an_uploaded_minute(tmp_path: Path):
    status = Status("algo-1", log=lambda message: None)
    files = MinuteFiles(str(tmp_path), "algo-1", status)
    files.append(MINUTE + 10, "first\n")
    files.append(MINUTE + 70, "second\n")  # completes MINUTE
    first = Path(files.final_path(MINUTE, 0))
    assert first.read_text() == "first\n"
    first.unlink()  # uploaded and pruned, as in a training container
    files.append(MINUTE + 20, "after the step back\n")  # NTP steps the clock back into MINUTE
    files.append(MINUTE + 80, "again\n")
    files.finish()
    assert not first.exists()  # the uploaded key is never written again
    assert (first.parent / f"{MINUTE + 1}.algo-1.json").read_text() == "after the step back\n"
    # back in the next minute, which the step back completed (and so may have uploaded): a second file there too
    assert (first.parent / f"{MINUTE + 60}.algo-1.json").read_text() == "second\n"
    assert (first.parent / f"{MINUTE + 61}.algo-1.json").read_text() == "again\n"
    assert status.counts["clock_steps_back"] == 2


def test_a_failed_advisory_refresh_keeps_still_valid_credentials():
    expires = "2026-12-01T12:04:00Z"  # four minutes after the clock below: inside the five-minute refresh window
    document = {"AccessKeyId": "ASIA1", "SecretAccessKey": "s", "Token": "t", "Expiration": expires}
    server = LocalHttp({("GET", "/creds"): (200, {}, json.dumps(document).encode())})
    now = [1_796_126_400.0]  # 2026-12-01T12:00:00Z
    try:
        chain = CredentialChain({"AWS_CONTAINER_CREDENTIALS_FULL_URI": server.url + "/creds"}, clock=lambda: now[0])
        assert chain.get().access_key == "ASIA1"
        server.routes[("GET", "/creds")] = (500, {}, b"unavailable")
        now[0] += 60
        assert chain.get().access_key == "ASIA1"  # the refresh failed; these are valid for three more minutes
        assert len(server.requests) == 2  # it did try
        now[0] += 200  # 20 s before expiry: no longer used
        with pytest.raises(Exception, match="no AWS credentials"):
            chain.get()
    finally:
        server.close()


@pytest.mark.parametrize(("meminfo", "percent"), [
    ("MemTotal: 1000 kB\nMemAvailable: 1500 kB\n", 0.0),  # available over total (a container's view)
    ("MemTotal: 1000 kB\nMemFree: 0 kB\nMemAvailable: -5 kB\n", 100.0),
    ("MemTotal: 0 kB\nMemAvailable: 10 kB\n", 0.0),
])
def test_memory_used_percent_stays_a_percent(meminfo: str, percent: float):
    assert procfs.memory_used_percent(meminfo) == percent


def test_sample_into_an_unwritable_folder_exits_4_without_a_traceback(tmp_path: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    err = io.StringIO()
    assert main(["sample", "--out", str(blocker / "out"), "--duration", "0.1"], stderr=err) == 4
    assert "cannot write to" in err.getvalue() and "Traceback" not in err.getvalue()


@pytest.mark.parametrize("duration", ["nan", "inf", "-1"])
def test_sample_refuses_a_duration_that_never_ends(tmp_path: Path, duration: str):
    err = io.StringIO()
    assert main(["sample", "--out", str(tmp_path), "--duration", duration], stderr=err) == 2
    assert "not a duration in seconds" in err.getvalue()
    assert list(tmp_path.iterdir()) == []


def test_step_events_are_written_by_a_thread_not_by_the_training(tmp_path: Path):
    writer = TimelineWriter(str(tmp_path), "0-algo-1", log=print)
    writer.add("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", 1.0, 2.0, {"step_num": "0"})
    assert list(tmp_path.rglob("*")) == []  # queued: no file opened, written or rotated on the caller's thread
    assert writer.thread is not None and writer.thread.daemon  # never keeps the interpreter from exiting
    writer.close()
    [path] = tmp_path.glob("framework/pevents/*/*.json")
    assert [e["args"] for e in json.loads(path.read_text()) if e["ph"] == "X"] == [{"step_num": "0"}]
