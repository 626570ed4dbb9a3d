"""Files sampled on this machine evaluate to real verdicts, and a busy core shows in CPUBottleneck's inputs.

One run: 2.5 s at 100 ms, starting 1.5 s before a minute boundary (the evaluator, like the managed rules, never judges
the newest minute), with fake GPUs idling at 5 % (a fake nvidia-smi on PATH), one core kept busy by a pinned load generator, and
step events written while sampling.
"""

from __future__ import annotations

import io
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sampler_fakes import clock_crossing_a_minute, system_records, write_fake_smi

from cdk_sagemaker_debugger.cli import main
from cdk_sagemaker_debugger.runtime.evaluator.report import SUMMARY_NAME
from cdk_sagemaker_debugger.runtime.sampler.daemon import Daemon
from cdk_sagemaker_debugger.runtime.sampler.settings import Settings
from cdk_sagemaker_debugger.runtime.sampler.timeline import TimelineWriter

SECONDS = 2.5
BUSY_LOOP = "import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\nend = time.time() + float(sys.argv[2])\n" \
            "while time.time() < end:\n    pass\n"


def busy_core() -> int:
    return max(os.sched_getaffinity(0))


def write_steps(root: Path, clock, stop: threading.Event) -> int:
    writer = TimelineWriter(str(root), "0-algo-1", log=print, clock=clock)
    count = 0
    while not stop.is_set():
        started = clock()
        time.sleep(0.05)
        writer.add("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", started, clock(), {"pid": 1, "step_num": str(count)})
        count += 1
    writer.close()
    return count


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("evaluate")
    root = base / "profiler-output"
    write_fake_smi(base / "bin")
    env = {"PATH": f"{base / 'bin'}{os.pathsep}{os.environ['PATH']}", "FAKE_GPUS": "2", "FAKE_GPU_UTIL": "5"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    load = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(busy_core()), str(SECONDS + 1)])
    try:
        time.sleep(0.2)  # let the load generator spin up
        clock = clock_crossing_a_minute(1.5)
        settings = Settings(local_dir=str(root), interval_ms=100, nvml_library=str(base / "missing.so"))
        daemon = Daemon(settings, clock=clock)
        sampling = threading.Thread(target=daemon.run, kwargs={"duration_s": SECONDS})
        stop = threading.Event()
        sampling.start()
        steps = threading.Thread(target=write_steps, args=(root, clock, stop))
        steps.start()
        sampling.join()
        stop.set()
        steps.join()
    finally:
        load.wait()
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
    return root


@pytest.fixture(scope="module")
def report(job: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    stdout, stderr = io.StringIO(), io.StringIO()
    assert main(["evaluate", str(job), "--out", str(out)], stdout=stdout, stderr=stderr) == 0, stderr.getvalue()
    return out


def verdicts(report: Path) -> dict:
    summary = json.loads((report / SUMMARY_NAME).read_text())
    return {v["Rule"]: v["Verdict"] for r in summary["rules"] for v in r["Verdicts"]}


def rule_report(report: Path, rule: str) -> dict:
    return json.loads((report / "profiler-reports" / f"{rule}.json").read_text())


def test_the_sampled_job_spans_two_minute_files(job: Path):
    assert len(list(job.glob("system/incremental/*/*.json"))) == 2
    assert list(job.glob("framework/pevents/*/*_0-algo-1_pythontimeline.json"))


@pytest.mark.parametrize("rule", ["OverallSystemUsage", "CPUBottleneck", "LowGPUUtilization", "StepOutlier"])
def test_rules_have_real_datapoints(report: Path, rule: str):
    assert verdicts(report)[rule] != "NotApplicable"
    assert rule_report(report, rule)["Datapoints"] > 5


def test_overall_system_usage_sees_cpu_gpu_memory_and_network(report: Path):
    details = rule_report(report, "OverallSystemUsage")["Details"]
    assert set(details["GPU"]["algo-1"]) >= {"max", "p50", "min"}
    assert details["GPU"]["algo-1"]["p50"] == 5.0  # the fake GPUs
    for metric in ("CPU", "CPU memory", "Network", "I/O"):
        assert "algo-1" in details[metric], metric


def test_low_gpu_utilisation_sees_each_fake_gpu(job: Path, report: Path):
    values = [r["Value"] for r in system_records(job) if r["Dimension"] == "GPUUtilization"]
    assert set(values) == {5.0} and len(values) > 30
    assert verdicts(report)["LowGPUUtilization"] in ("NoIssuesFound", "IssuesFound")


def test_the_busy_core_stands_out_and_shows_in_cpu_bottleneck(job: Path, report: Path):
    core = f"cpu{busy_core()}"
    busy = [r["Value"] for r in system_records(job) if r["Name"] == core and r["Dimension"] == "CPUUtilization"]
    assert statistics.median(busy) >= 85.0, busy
    details = rule_report(report, "CPUBottleneck")["Details"]
    bottlenecks = details["bottlenecks"]
    # snapshots where both fake GPUs idled below 10 % while at least one core ran above 90 %
    assert len(bottlenecks) >= 4, details
    assert all(b["GPUs"] == 2 and b["CPUs"] >= 1 for b in bottlenecks.values())
    assert details["low_gpu_utilization"] >= len(bottlenecks)
