"""Real profiler files (smdebug's test resources) parse, and our report JSONs have the managed container's schema."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from evaluator_jobs import FIXTURES, evaluate, report, small_spec, verdict

from cdk_sagemaker_debugger.runtime.evaluator.engine import RuleConfig
from cdk_sagemaker_debugger.runtime.evaluator.numerics import jensen_shannon_distance
from cdk_sagemaker_debugger.runtime.evaluator.readers import (
    ParseStats,
    parse_framework_key,
    parse_system_key,
    parse_system_lines,
    parse_trace,
)
from cdk_sagemaker_debugger.runtime.evaluator.reading import evaluate_store
from cdk_sagemaker_debugger.runtime.evaluator.rules import REPORT_RULES
from cdk_sagemaker_debugger.runtime.evaluator.storage import LocalStore

RAW = FIXTURES / "smdebug_test_resources"
DEPLOYED = FIXTURES / "deployed_profiler_reports"


def test_real_system_file_parses_into_32_cpu_records():
    path = RAW / "test_traces/system/incremental/1591748100.algo-1.json"
    file = parse_system_key(str(path))
    assert file is not None and file.timestamp_us == 1591748100_000_000 and file.node == "algo-1"
    stats = ParseStats()
    records = parse_system_lines(path.read_bytes(), path.name, stats)
    assert len(records) == 32 and stats.bad_lines == 0
    assert {r["Dimension"] for r in records} == {"CPUUtilization"}
    assert len({r["Timestamp"] for r in records}) == 1


def test_truncated_last_line_is_counted_not_fatal():
    path = RAW / "1591160699.algo-1.json.corrupt"
    stats = ParseStats()
    records = parse_system_lines(path.read_bytes(), path.name, stats)
    assert len(records) == 13 and stats.bad_lines == 1
    assert "not valid JSON" in stats.problems[0]


@pytest.mark.parametrize(
    ("relative", "node", "kind", "events"),
    [
        ("merge_traces/framework/pevents/2020071317/1594662624718694_905-b88ab1bb8259_pythontimeline.json",
         "905-b88ab1bb8259", "pythontimeline", 40),
        ("merge_traces/framework/pevents/2020071317/1594662624558411_905-b88ab1bb8259_model_timeline.json",
         "905-b88ab1bb8259", "model_timeline", 661),
        ("merge_traces/framework/pevents/2020071317/1594662614815222_905-b88ab1bb8259_model_timeline.json",
         "905-b88ab1bb8259", "model_timeline", 1),
        ("model_timeline_traces/framework/pevents/2020052602/1590461127873222_0001_model_timeline.json",
         "0001", "model_timeline", 56),
        ("test_traces/framework/pevents/2020051923/1589930988000000_4487_0000_pythontimeline.json",
         "4487", "pythontimeline", 1),
    ],
)
def test_real_trace_files_parse(relative, node, kind, events):
    path = RAW / relative
    file = parse_framework_key(relative)
    assert file is not None and file.node == node and file.kind == kind
    stats = ParseStats()
    parsed = parse_trace(path.read_bytes(), file, stats)
    assert len(parsed) == events and stats.bad_lines == 0 and stats.bad_files == 0
    assert all(e.end_us >= e.start_us for e in parsed)


def test_python_timeline_steps_get_absolute_times_and_phases():
    relative = "merge_traces/framework/pevents/2020071317/1594662624718694_905-b88ab1bb8259_pythontimeline.json"
    parsed = parse_trace((RAW / relative).read_bytes(), parse_framework_key(relative), ParseStats())
    first = parsed[0]
    assert first.phase == first.name == "Step:ModeKeys.TRAIN"
    assert first.start_us == 1594662605425850 + 2664345 and first.end_us == first.start_us + 9020725
    assert first.args["step_num"] == "0" and first.file_type == "PythontimelineMetrics"
    assert sum(1 for e in parsed if e.name == "Step:ModeKeys.EVAL") == 10


def test_horovod_begin_end_pairs_become_complete_events():
    relative = ("horovod_timeline_traces/framework/pevents/2020070206/"
                "1593673051473228_88359-8c859046be41.ant.amazon.com_horovod_timeline.json")
    file = parse_framework_key(relative)
    parsed = parse_trace((RAW / relative).read_bytes(), file, ParseStats())
    raw = json.loads((RAW / relative).read_text())
    # 19 complete events; its four B events are never closed and its two E events have no B: both are ignored
    assert sum(1 for e in raw if e.get("ph") == "X") == len(parsed) == 19
    assert {e.file_type for e in parsed} == {""}


def test_begin_end_pairs_become_one_event_per_pid():
    trace = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": 1_000_000}},
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "NCCL"}},
        {"name": "allreduce", "ph": "B", "pid": 1, "ts": 10},
        {"name": "other", "ph": "B", "pid": 2, "ts": 15},
        {"name": "", "ph": "E", "pid": 1, "ts": 40},
        {"name": "", "ph": "E", "pid": 3, "ts": 50},
        {"name": "mark", "ph": "i", "pid": 1, "ts": 60},
    ]
    file = parse_framework_key("framework/pevents/2020070206/1000050_0-algo-1_horovod_timeline.json")
    parsed = parse_trace(json.dumps(trace).encode(), file, ParseStats())
    assert [(e.phase, e.name, e.start_us, e.end_us) for e in parsed] == [("NCCL", "allreduce", 1_000_010, 1_000_040)]


def test_rank_host_node_ids_are_rewritten_like_the_reference_reader():
    file = parse_framework_key("framework/pevents/2026112915/1764430000000000_51-algo-2_pythontimeline.json")
    assert file is not None and file.node == "algo-2-51"


def test_two_real_consecutive_minutes_evaluate(tmp_path: Path):
    root = tmp_path / "profiler-output" / "system" / "incremental" / "2020061000"
    root.mkdir(parents=True)
    for name in ("1591748100.algo-1.json", "1591748160.algo-1.json"):
        (root / name).write_bytes((RAW / "test_traces/system/incremental" / name).read_bytes())
    evaluator = evaluate_store(LocalStore(tmp_path / "profiler-output"), [report()])
    assert evaluator.windows_evaluated == 1  # the last file is the partial minute that is never analysed
    usage = verdict(evaluator, "OverallSystemUsage").report
    assert usage["Datapoints"] == 1 and set(usage["Details"]["CPU"]) == {"algo-1"}
    assert verdict(evaluator, "LowGPUUtilization").verdict == "NotApplicable"


def _deployed(job: str, rule: str) -> dict:
    return json.loads((DEPLOYED / job / f"{rule}.json").read_text())


@pytest.mark.parametrize("rule", sorted(cls.name for cls in REPORT_RULES))  # the managed container's rules
def test_report_schema_and_default_parameters_match_the_managed_container(rule):
    ours = verdict(evaluate(small_spec(minutes=2)), rule).report
    theirs = _deployed("2024-12_pytorch_1gpu_low-util", rule)
    assert list(ours) == list(theirs) == ["RuleTriggered", "Violations", "Details", "Datapoints", "RuleParameters"]
    assert ours["RuleParameters"] == theirs["RuleParameters"]


def test_usage_details_have_the_managed_metric_order():
    ours = verdict(evaluate(small_spec(minutes=2)), "OverallSystemUsage").report["Details"]
    theirs = _deployed("2023-11_llama2-7b_4gpu_100ms", "OverallSystemUsage")["Details"]
    assert list(ours) == list(theirs)
    assert list(ours["CPU"]["algo-1"]) == list(theirs["CPU"]["algo-1"])


def test_deployed_4gpu_histograms_are_balanced_under_the_pairwise_comparison():
    workloads = _deployed("2023-11_llama2-7b_4gpu_100ms", "LoadBalancing")["Details"]["algo-1"]["workloads"]
    names = sorted(workloads)
    distances = [jensen_shannon_distance(workloads[a], workloads[b]) for i, a in enumerate(names) for b in names[i + 1:]]
    assert len(distances) == 6
    assert all(0.04 < d < 0.07 for d in distances)
    assert max(distances) < 0.2  # the container default threshold: no trigger, as deployed


def test_all_deployed_reports_are_valid_json_with_the_common_keys():
    files = sorted(DEPLOYED.glob("*/*.json"))
    assert len(files) == 44
    for path in files:
        data = json.loads(path.read_text())
        assert list(data) == ["RuleTriggered", "Violations", "Details", "Datapoints", "RuleParameters"], path
        assert not any(isinstance(v, float) and math.isnan(v) for v in data.values())


def test_standalone_rule_parameters_include_the_configured_values():
    evaluator = evaluate(small_spec(minutes=1), RuleConfig("low", "LowGPUUtilization", {"window": "60", "patience": 5}))
    assert verdict(evaluator, "LowGPUUtilization").report["RuleParameters"] == (
        "threshold_p95:70\nthreshold_p5:10\nwindow:60\npatience:5")


def test_details_have_the_deployed_key_order():
    from cdk_sagemaker_debugger.runtime.evaluator.synthetic import DataloaderSpec, StepSpec, constant

    spec = small_spec(gpu_util=constant(5.0), cpu_util=constant(95.0), gpu_memory=lambda n, d, s, t: 0.0 if s < 1500 else 30.0,
                      steps=StepSpec(count=400, duration_s=0.2, slow_steps={300 + i: 2.0 for i in range(12)}),
                      dataloader=DataloaderSpec(workers=1))
    ev = evaluate(spec, report())
    old = "2022-04_pytorch_1gpu_framework-profiling"
    low = verdict(ev, "LowGPUUtilization").report["Details"]
    assert list(low["algo-1"]["gpu0"]) == list(_deployed(old, "LowGPUUtilization")["Details"]["algo-1"]["gpu0"])
    mem = verdict(ev, "GPUMemoryIncrease").report["Details"]
    assert list(mem["algo-1"]["gpu0"]) == list(_deployed(old, "GPUMemoryIncrease")["Details"]["algo-1"]["gpu0"])
    steps = verdict(ev, "StepOutlier").report["Details"]["step_details"]["algo-1-0"]
    assert list(steps) == list(_deployed(old, "StepOutlier")["Details"]["step_details"]["algo-1-51"])
    assert len(steps["probs"]) == 100 and len(steps["binedges"]) == 101
    loader = verdict(ev, "Dataloader").report["Details"]
    assert list(loader) == list(_deployed(old, "Dataloader")["Details"])
    assert list(loader["dataloading_time"]) == ["p25", "p50", "p95", "probs", "binedges"]
    cpu = verdict(ev, "CPUBottleneck").report["Details"]
    assert list(cpu)[:2] == list(_deployed(old, "CPUBottleneck")["Details"])[:2]
