"""Host metrics: /proc parsing with hand-computed values, a fake /proc root, and failures that never stop sampling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdk_sagemaker_debugger.runtime.sampler import procfs
from cdk_sagemaker_debugger.runtime.sampler.daemon import Daemon
from cdk_sagemaker_debugger.runtime.sampler.settings import Settings

STAT_1 = """cpu  300 0 100 1600 0 0 0 0 0 0
cpu0 100 0 50 800 0 0 0 0 0 0
cpu1 200 0 50 800 0 0 0 0 0 0
intr 12345 1 2 3
ctxt 999
"""
# cpu0: +60 user, +20 system, +10 idle, +10 iowait over 100 jiffies -> 80 % busy, 10 % I/O wait
# cpu1: +100 idle                                                        -> 0 % busy, 0 % I/O wait
STAT_2 = """cpu  360 0 120 1710 10 0 0 0 0 0
cpu0 160 0 70 810 10 0 0 0 0 0
cpu1 200 0 50 900 0 0 0 0 0 0
intr 12399 1 2 3
"""
MEMINFO = "MemTotal:       16000000 kB\nMemFree:         2000000 kB\nMemAvailable:    12000000 kB\nCached: 1 kB\n"
NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 5000 10 0 0 0 0 0 0 5000 10 0 0 0 0 0 0
  eth0: 1000 5 0 0 0 0 0 0 400 3 0 0 0 0 0 0
  eth1:200 1 0 0 0 0 0 0 100 1 0 0 0 0 0 0
"""
DISKSTATS = """   8       0 sda 10 0 80 0 5 0 40 0 0 0 0
   8       1 sda1 9 0 72 0 5 0 40 0 0 0 0
 259       0 nvme0n1 4 0 16 0 2 0 8 0 0 0 0
 259       1 nvme0n1p1 4 0 16 0 2 0 8 0 0 0 0
   7       0 loop0 100 0 800 0 0 0 0 0 0 0 0
 253       0 dm-0 50 0 400 0 50 0 400 0 0 0 0
"""


def test_cpu_rows_are_per_core_deltas():
    rows = procfs.cpu_rows(procfs.parse_stat(STAT_1), procfs.parse_stat(STAT_2))
    assert rows == [
        ("cpu", "cpu0", "CPUUtilization", 80.0),
        ("cpu", "cpu1", "CPUUtilization", 0.0),
        ("cpu", "cpu0", "I/OWaitPercentage", 10.0),
        ("cpu", "cpu1", "I/OWaitPercentage", 0.0),
    ]


def test_cores_sort_numerically_and_the_aggregate_line_is_skipped():
    text = "cpu  1 1 1 1\n" + "".join(f"cpu{i} {i} 0 0 10 0 0 0 0\n" for i in (10, 2, 1, 0))
    assert list(procfs.parse_stat(text)) == ["cpu10", "cpu2", "cpu1", "cpu0"]
    rows = procfs.cpu_rows(procfs.parse_stat(text), procfs.parse_stat(text))
    assert [r[1] for r in rows[:4]] == ["cpu0", "cpu1", "cpu2", "cpu10"]


def test_memory_network_and_disk_counters():
    assert procfs.memory_used_percent(MEMINFO) == 25.0  # (16e6 - 12e6) / 16e6
    assert procfs.network_bytes(NET_DEV) == (1200, 500)  # loopback excluded
    # whole disks only: sda (10+5 ops, 80/40 sectors) and nvme0n1 (4+2, 16/8); partitions, loop and dm skipped
    assert procfs.disk_counters(DISKSTATS) == (21, 96 * 512, 48 * 512)


def test_a_stat_without_cores_is_an_error_for_the_guard():
    with pytest.raises(ValueError):
        procfs.parse_stat("intr 1 2 3\n")


def fake_proc(root: Path, cores: int) -> Path:
    (root / "net").mkdir(parents=True)
    (root / "stat").write_text("cpu  0 0 0 0\n" + "".join(f"cpu{i} {i} 0 0 100 0 0 0 0\n" for i in range(cores)))
    (root / "meminfo").write_text(MEMINFO)
    (root / "net" / "dev").write_text(NET_DEV)
    (root / "diskstats").write_text(DISKSTATS)
    return root


def test_a_fake_proc_root_with_96_cores(tmp_path: Path):
    settings = Settings(local_dir=str(tmp_path / "out"), interval_ms=100, proc_root=str(fake_proc(tmp_path / "p", 96)),
                        nvml_library=str(tmp_path / "none.so"))
    Daemon(settings).run(duration_s=0.35)
    records = [json.loads(line) for f in (tmp_path / "out").glob("system/incremental/*/*.json")
               for line in f.read_text().splitlines()]
    names = {r["Name"] for r in records if r["Dimension"] == "CPUUtilization"}
    assert names == {f"cpu{i}" for i in range(96)}
    assert {r["Value"] for r in records if r["Name"] == "MemoryUsedPercent"} == {25.0}
    assert {r["Value"] for r in records if r["Type"] == "network"} == {0.0}  # unchanging counters


def test_no_proc_is_counted_backed_off_and_never_raised(tmp_path: Path):
    settings = Settings(local_dir=str(tmp_path / "out"), interval_ms=100, proc_root=str(tmp_path / "missing"),
                        nvml_library=str(tmp_path / "none.so"))
    status = Daemon(settings).run(duration_s=1.2)
    # 12 samples, but each missing file is retried after 1 s, then 2 s: at most two attempts each
    assert status["counts"]["samples"] >= 5
    for kind in ("proc_stat", "proc_meminfo", "proc_net", "proc_disk"):
        assert 1 <= status["failures"][kind] <= 2
    log = (tmp_path / "out" / "sampler" / "log-algo-1.txt").read_text()
    assert log.count("proc_stat:") == 1  # logged once


def test_an_unwritable_folder_is_counted_and_never_raised(tmp_path: Path):
    settings = Settings(local_dir="/proc/cdk-sagemaker-sampler-test", interval_ms=100,
                        nvml_library=str(tmp_path / "none.so"))
    status = Daemon(settings, log=lambda message: None).run(duration_s=0.3)
    assert status["failures"]["write"] >= 1
    assert status["counts"]["samples"] >= 2
