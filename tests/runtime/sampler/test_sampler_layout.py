"""The files the sampler writes have the layout and schema of the real smdebug files, and the readers parse them."""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

import pytest
from sampler_fakes import per_core_cpu_lines

from cdk_sagemaker_debugger.cli import main
from cdk_sagemaker_debugger.runtime.evaluator.readers import (
    ParseStats,
    parse_framework_key,
    parse_system_key,
    parse_system_lines,
    parse_trace,
)
from cdk_sagemaker_debugger.runtime.sampler.timeline import TimelineWriter

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "smdebug_test_resources"
REAL_SYSTEM = FIXTURES / "test_traces" / "system" / "incremental" / "1591748100.algo-1.json"
REAL_TIMELINE = next((FIXTURES / "merge_traces").glob("framework/pevents/*/*_pythontimeline.json"))
# smdebug's own key patterns (smdebug/profiler/utils.py and the system reader), written out here independently
SMDEBUG_SYSTEM_KEY = re.compile(r".+/system/.+/(\d{10}).algo-\d+.json")
SMDEBUG_TRACE_NAME = re.compile(r"(\d+)_([^_]+(?:_[^_]+)*)_pythontimeline\.json$")
KNOWN = {("cpu", "CPUUtilization"), ("cpu", "I/OWaitPercentage"), ("gpu", "GPUUtilization"),
         ("gpu", "GPUMemoryUtilization"), ("memory", ""), ("i/o", ""), ("network", "Algorithm")}


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sampled") / "profiler-output"
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(["sample", "--out", str(out), "--interval-ms", "100", "--duration", "1.2", "--node", "algo-2"],
                stdout=stdout, stderr=stderr)
    assert code == 0, stderr.getvalue()
    assert f"wrote {out}" in stdout.getvalue()
    return out


def test_system_files_are_named_and_foldered_like_debuggers(sampled: Path):
    files = sorted(sampled.glob("system/incremental/*/*.json"))
    assert files
    for path in files:
        key = "s3://bucket/job/profiler-output/" + path.relative_to(sampled).as_posix()
        match = SMDEBUG_SYSTEM_KEY.match(key)
        assert match, key
        epoch = int(match.group(1))
        assert epoch % 60 == 0
        assert path.parent.name == time.strftime("%Y%m%d%H", time.gmtime(epoch))
        assert parse_system_key(path.relative_to(sampled).as_posix()).node == "algo-2"
    assert (sampled / "system" / "training_job_end.ts").read_bytes() == b""


def test_records_have_the_real_files_fields_in_order_and_types(sampled: Path):
    real = json.loads(REAL_SYSTEM.read_text().splitlines()[0])
    real_types = [type(v) for v in real.values()]
    for path in sampled.glob("system/incremental/*/*.json"):
        minute = int(path.name.split(".")[0])
        data = path.read_bytes()
        assert data.endswith(b"\n")
        for line in data.decode().splitlines():
            record = json.loads(line)
            assert list(record) == list(real)  # Type, Name, Dimension, Value, NodeId, Timestamp
            assert [type(v) for v in record.values()] == real_types
            assert (record["Type"], record["Dimension"]) in KNOWN
            assert record["NodeId"] == "algo-2"
            assert minute <= record["Timestamp"] < minute + 61
        stats = ParseStats()
        assert len(parse_system_lines(data, path.name, stats)) == len(data.splitlines())
        assert stats.bad_lines == 0


def test_one_record_per_core_and_group_per_sample(sampled: Path):
    lines = [json.loads(line) for p in sampled.glob("system/incremental/*/*.json") for line in p.read_text().splitlines()]
    cores = per_core_cpu_lines()
    utilisation = [r for r in lines if r["Dimension"] == "CPUUtilization"]
    assert {r["Name"] for r in utilisation} == {f"cpu{i}" for i in range(cores)}
    by_time: dict = {}
    for r in utilisation:
        by_time.setdefault(r["Timestamp"], []).append(r["Name"])
    assert len(by_time) >= 8  # about 11 samples in 1.2 s at 100 ms, the first only primes the counters
    assert all(len(names) == cores for names in by_time.values())  # one timestamp per cpu group
    assert all(0.0 <= r["Value"] <= 100.0 for r in lines if r["Type"] == "cpu")
    assert sum(1 for r in lines if r["Name"] == "ReceiveBytesPerSecond") == len(by_time)


def test_timeline_files_match_the_real_python_timeline(tmp_path: Path):
    real = json.loads(REAL_TIMELINE.read_text())
    writer = TimelineWriter(str(tmp_path), "0-algo-1", log=print)
    writer.add("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", 1700000000.25, 1700000000.5, {"pid": 7, "step_num": "0"})
    writer.add("Step:ModeKeys.EVAL", "Step:ModeKeys.EVAL", 1700000001.0, 1700000001.125, {"pid": 7, "step_num": "0"})
    writer.close()
    (path,) = tmp_path.glob("framework/pevents/*/*.json")
    ours = json.loads(path.read_text())
    assert path.name == "1700000001125000_0-algo-1_pythontimeline.json"  # end time of the last event, as upstream
    assert SMDEBUG_TRACE_NAME.search(REAL_TIMELINE.name) and SMDEBUG_TRACE_NAME.search(path.name)
    assert path.parent.name == time.strftime("%Y%m%d%H", time.gmtime(1700000001))
    assert [sorted(e) for e in ours[:2]] == [sorted(e) for e in real[:2]]  # origin and sort-index records
    assert ours[2] == {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "Step:ModeKeys.TRAIN"}}
    real_step = next(e for e in real if e.get("ph") == "X")
    our_steps = [e for e in ours if e.get("ph") == "X"]
    assert all(list(e) == list(real_step) and sorted(e["args"]) == sorted(real_step["args"]) for e in our_steps)
    key = path.relative_to(tmp_path).as_posix()
    events = parse_trace(path.read_bytes(), parse_framework_key(key), ParseStats())
    assert [(e.phase, e.start_us, e.end_us, e.node, e.args["step_num"]) for e in events] == [
        ("Step:ModeKeys.TRAIN", 1700000000250000, 1700000000500000, "algo-1-0", "0"),
        ("Step:ModeKeys.EVAL", 1700000001000000, 1700000001125000, "algo-1-0", "0"),
    ]
    assert not list(tmp_path.glob(".partial/*"))  # the partial file is gone once the file is in place


def test_the_cli_refuses_bad_options_with_the_fix(tmp_path: Path):
    err = io.StringIO()
    assert main(["sample", "--out", str(tmp_path), "--node", "worker-1", "--duration", "0"], stderr=err) == 2
    assert "algo-1, algo-2" in err.getvalue()
    err = io.StringIO()
    assert main(["sample", "--out", str(tmp_path), "--s3-uri", "s3://bucket/p", "--duration", "0"],
                stderr=err) == 2
    assert "--job-name" in err.getvalue()
    err = io.StringIO()
    assert main(["sample", "--out", str(tmp_path), "--interval-ms", "250"], stderr=err) == 2
    assert "invalid choice: 250" in err.getvalue()


def test_two_samplers_never_write_the_same_folder(tmp_path: Path):
    from cdk_sagemaker_debugger.runtime.sampler.lock import try_lock

    fd = try_lock(str(tmp_path))
    try:
        err = io.StringIO()
        assert main(["sample", "--out", str(tmp_path), "--duration", "0.1"], stderr=err) == 4  # --out not writable
        assert "another sampler" in err.getvalue()
    finally:
        import os

        os.close(fd)
