"""Golden cases: every rule has a generated job on which it fires and one on which it stays quiet, including values
exactly at each threshold (comparisons are strict), several nodes, several GPUs and CPU-only instances."""

from __future__ import annotations

import json
import math
import statistics

import pytest
from evaluator_jobs import evaluate, report, small_spec, standalone, verdict

from cdk_sagemaker_debugger.runtime.evaluator.report import report_files
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import DataloaderSpec, StepSpec, constant

ORIGIN = small_spec().start * 1_000_000
MINUTE = 60_000_000


def by_node(values: dict[int, float], default: float = 85.0):
    return lambda node, device, sample, t: values.get(node, default)


# ---------------------------------------------------------------- LowGPUUtilization
def test_low_gpu_fires_below_p95_threshold_per_gpu_and_window():
    ev = evaluate(small_spec(gpu_util=constant(69.0)), standalone("LowGPUUtilization"))
    v = verdict(ev, "LowGPUUtilization")
    assert v.verdict == "IssuesFound"
    # 1,200 and 1,800 values exceed patience 1000 in windows 1 and 2, for each of the 2 GPUs
    assert v.report["RuleTriggered"] == v.report["Violations"] == 4
    details = v.report["Details"]
    assert set(details["algo-1"]) == {"gpu0", "gpu1"}
    assert details["algo-1"]["gpu0"]["gpu_95"] == 69.0
    assert details["last_timestamp"] == ORIGIN + 2 * MINUTE
    result = ev.results(final=True)[0]
    assert result.status == "IssuesFound"
    assert result.status_details.startswith("RuleEvaluationConditionMet: Evaluation of the rule LowGPUUtilization at step 1 ")


def test_low_gpu_quiet_when_p95_is_exactly_the_threshold():
    v = verdict(evaluate(small_spec(gpu_util=constant(70.0)), standalone("LowGPUUtilization")), "LowGPUUtilization")
    assert v.verdict == "NoIssuesFound" and v.report["Violations"] == 0 and v.report["Datapoints"] == 1800


@pytest.mark.parametrize(("low", "fires"), [(9.0, True), (10.0, False)])
def test_low_gpu_fluctuation_uses_strict_p5(low, fires):
    signal = lambda node, device, sample, t: 80.0 if sample % 2 else low  # noqa: E731
    v = verdict(evaluate(small_spec(gpu_util=signal), standalone("LowGPUUtilization")), "LowGPUUtilization")
    assert (v.verdict == "IssuesFound") is fires
    if fires:
        assert v.report["Details"]["algo-1"]["gpu0"]["gpu_5"] == low


def test_low_gpu_multi_node_reports_only_the_idle_node():
    ev = evaluate(small_spec(nodes=2, gpu_util=by_node({1: 30.0})), standalone("LowGPUUtilization"))
    v = verdict(ev, "LowGPUUtilization")
    assert set(v.report["Details"]) == {"algo-2", "last_timestamp"}
    assert v.report["Violations"] == 4
    assert "algo-2/gpu0 (p95 30, p5 30)" in v.reason and "algo-1" not in v.reason


def test_low_gpu_waits_for_patience():
    v = verdict(evaluate(small_spec(minutes=1, gpu_util=constant(5.0)), standalone("LowGPUUtilization")),
                "LowGPUUtilization")
    assert v.verdict == "NoIssuesFound" and v.report["Datapoints"] == 600


# ---------------------------------------------------------------- BatchSize
LOW_USE = {"gpu_util": constant(20.0), "gpu_memory": constant(30.0), "cpu_util": constant(35.0)}


def test_batch_size_fires_when_cpu_gpu_and_memory_are_all_low():
    ev = evaluate(small_spec(**LOW_USE), report())
    v = verdict(ev, "BatchSize")
    assert v.verdict == "IssuesFound" and v.report["Violations"] == 4
    node = v.report["Details"]["algo-1"]
    assert list(node) == ["cpu", "gpu0", "gpu0_memory", "gpu1", "gpu1_memory"]
    assert node["cpu"]["p95"] == 35.0
    # under ProfilerReport the managed rule's clock never leaves the first window
    assert v.report["Details"]["last_timestamp"] == ORIGIN


def test_batch_size_standalone_reports_the_window_start():
    v = verdict(evaluate(small_spec(**LOW_USE), standalone("BatchSize")), "BatchSize")
    assert v.report["Details"]["last_timestamp"] == ORIGIN + 2 * MINUTE


@pytest.mark.parametrize("at_threshold", ["cpu_util", "gpu_util", "gpu_memory"])
def test_batch_size_quiet_when_any_p95_is_exactly_70(at_threshold):
    signals = dict(LOW_USE, **{at_threshold: constant(70.0)})
    v = verdict(evaluate(small_spec(**signals), standalone("BatchSize")), "BatchSize")
    assert v.verdict == "NoIssuesFound" and v.report["Violations"] == 0


def test_batch_size_memory_box_plot_uses_the_memory_quartiles():
    """Deviation: the managed rule computes the memory iqr with the utilisation p25 (upper -1.0, lower 16.0 in 2024)."""
    memory = lambda node, device, sample, t: float(10 + sample % 21)  # noqa: E731
    v = verdict(evaluate(small_spec(gpu_util=constant(20.0), gpu_memory=memory, cpu_util=constant(35.0)),
                         standalone("BatchSize")), "BatchSize")
    box = v.report["Details"]["algo-1"]["gpu0_memory"]
    values = [float(10 + s % 21) for s in range(1800)]
    p25, _, p75 = statistics.quantiles(values, n=4, method="inclusive")  # numpy's default linear method
    assert box["p25"] == p25 and box["p75"] == p75
    assert box["upper"] == min(p75 + 1.5 * (p75 - p25), max(values))
    assert box["lower"] == max(p25 - 1.5 * (p75 - p25), min(values))
    assert box["lower"] <= box["p25"] <= box["p75"] <= box["upper"]


# ---------------------------------------------------------------- GPUMemoryIncrease
def _memory_jump(height: float):
    return lambda node, device, sample, t: 0.0 if sample < 1500 else height


@pytest.mark.parametrize(("height", "violations"), [(26.0, 2), (25.0, 0)])
def test_gpu_memory_increase_compares_numpy_slices_strictly(height, violations):
    # two jumped values in the last 10 and none in v[-11:-2]: diff = 2 * height / 10 (5.2 fires, exactly 5.0 does not)
    v = verdict(evaluate(small_spec(gpu_memory=_memory_jump(height)), standalone("GPUMemoryIncrease")),
                "GPUMemoryIncrease")
    assert v.report["Violations"] == violations
    assert (v.verdict == "IssuesFound") is bool(violations)
    if violations:
        assert v.report["Details"]["algo-1"]["gpu0"]["increase"] == pytest.approx(5.2)
        assert v.report["Details"]["last_timestamp"] == ORIGIN + 2 * MINUTE


# ---------------------------------------------------------------- LoadBalancing
def test_load_balancing_compares_gpus_pairwise():
    """Deviation: the managed rule's loop never compares two GPUs, so it can never fire."""
    util = lambda node, device, sample, t: 90.0 if device == 0 else 10.0  # noqa: E731
    v = verdict(evaluate(small_spec(gpu_util=util), report()), "LoadBalancing")
    assert v.verdict == "IssuesFound"
    distance = v.report["Details"]["algo-1"]["distances"]["gpu0"]["gpu1"]
    assert distance == pytest.approx(math.sqrt(math.log(2)))
    assert v.report["Details"]["algo-1"]["workloads"]["gpu0"][45] == 1800


def test_load_balancing_quiet_at_exactly_the_threshold_and_for_balanced_gpus():
    util = lambda node, device, sample, t: 90.0 if device == 0 else 10.0  # noqa: E731
    at = verdict(evaluate(small_spec(gpu_util=util), standalone("LoadBalancing", threshold=math.sqrt(math.log(2)))),
                 "LoadBalancing")
    assert at.verdict == "NoIssuesFound"
    balanced = verdict(evaluate(small_spec(), standalone("LoadBalancing")), "LoadBalancing")
    assert balanced.verdict == "NoIssuesFound"


def test_load_balancing_not_applicable_with_one_gpu_per_node():
    v = verdict(evaluate(small_spec(gpus=1, nodes=2), report()), "LoadBalancing")
    assert v.verdict == "NotApplicable" and "single GPU" in v.reason


# ---------------------------------------------------------------- CPUBottleneck / IOBottleneck
def test_cpu_bottleneck_fires_when_gpus_idle_while_cores_are_saturated():
    v = verdict(evaluate(small_spec(gpu_util=constant(5.0), cpu_util=constant(95.0)), report()), "CPUBottleneck")
    assert v.verdict == "IssuesFound"
    assert v.report["Datapoints"] == 1800 and v.report["Violations"] == 1800 and v.report["RuleTriggered"] == 2
    assert v.report["Details"]["low_gpu_utilization"] == 1800
    assert set(map(str, v.report["Details"]["bottlenecks"].values())) == {"{'GPUs': 2, 'CPUs': 4}"}


def test_cpu_bottleneck_quiet_at_exactly_half_the_samples():
    gpu = lambda node, device, sample, t: 5.0 if sample % 2 == 0 else 50.0  # noqa: E731
    v = verdict(evaluate(small_spec(gpu_util=gpu, cpu_util=constant(95.0)), report()), "CPUBottleneck")
    assert v.report["Violations"] == 900 and v.report["Datapoints"] == 1800
    assert v.verdict == "NoIssuesFound"


def test_cpu_bottleneck_thresholds_are_strict():
    v = verdict(evaluate(small_spec(gpu_util=constant(10.0), cpu_util=constant(90.0)), report()), "CPUBottleneck")
    assert v.report["Violations"] == 0 and v.report["Details"]["low_gpu_utilization"] == 0


def test_cpu_bottleneck_counts_snapshots_of_every_node():
    v = verdict(evaluate(small_spec(nodes=2, gpu_util=constant(5.0), cpu_util=constant(95.0)), report()),
                "CPUBottleneck")
    assert v.report["Datapoints"] == 3600 and v.verdict == "IssuesFound"


@pytest.mark.parametrize(("io", "fires"), [(60.0, True), (50.0, False)])
def test_io_bottleneck(io, fires):
    v = verdict(evaluate(small_spec(gpu_util=constant(5.0), io_wait=constant(io)), report()), "IOBottleneck")
    assert (v.verdict == "IssuesFound") is fires
    assert verdict(evaluate(small_spec(gpu_util=constant(5.0), io_wait=constant(io)), report()),
                   "CPUBottleneck").verdict == "NoIssuesFound"


@pytest.mark.parametrize("rule", ["CPUBottleneck", "IOBottleneck", "LowGPUUtilization", "BatchSize",
                                  "GPUMemoryIncrease", "LoadBalancing"])
def test_gpu_rules_are_not_applicable_on_cpu_only_instances(rule):
    v = verdict(_cpu_only(), rule)
    assert v.verdict == "NotApplicable" and "GPU" in v.reason


_CPU_ONLY = None


def _cpu_only():
    global _CPU_ONLY
    if _CPU_ONLY is None:
        _CPU_ONLY = evaluate(small_spec(gpus=0, cpu_util=constant(99.0), io_wait=constant(99.0)), report())
    return _CPU_ONLY


def test_cpu_only_profiler_report_has_no_false_verdict():
    result = _cpu_only().results(final=True)[0]
    assert result.status == "NoIssuesFound"
    usage = verdict(_cpu_only(), "OverallSystemUsage").report["Details"]
    assert usage["GPU"] == {} and usage["CPU"]["algo-1"]["p50"] == 99.0


# ---------------------------------------------------------------- Dataloader
@pytest.mark.parametrize(
    ("cores", "workers", "fires"),
    [(4, 2, True), (10, 7, False), (10, 21, True), (10, 20, False)],
)
def test_dataloader_parallelism_against_cores(cores, workers, fires):
    spec = small_spec(cores=cores, dataloader=DataloaderSpec(workers=workers))
    v = verdict(evaluate(spec, report()), "Dataloader")
    assert (v.verdict == "IssuesFound") is fires
    assert v.report["Details"]["cores"] == cores and v.report["Details"]["dataloaders"] == workers
    if fires:
        assert v.reason.startswith(f"{workers} parallel data loader(s) for {cores} cores")
    assert v.report["RuleTriggered"] == (1 if fires else 0)


def test_dataloader_not_applicable_without_framework_traces():
    v = verdict(evaluate(small_spec(minutes=1), report()), "Dataloader")
    assert v.verdict == "NotApplicable"


# ---------------------------------------------------------------- StepOutlier
@pytest.mark.parametrize(("slow", "fires"), [(11, True), (10, False)])
def test_step_outlier_needs_more_than_n_outliers(slow, fires):
    steps = StepSpec(count=400, duration_s=0.2, gap_s=0.05, slow_steps={200 + i: 2.0 for i in range(slow)})
    v = verdict(evaluate(small_spec(steps=steps), report()), "StepOutlier")
    assert (v.verdict == "IssuesFound") is fires
    node = v.report["Details"]["step_details"]["algo-1-0"]
    assert node["number_of_outliers"] == slow
    assert node["step_numbers"] == [str(200 + i) for i in range(slow)]
    assert v.report["Datapoints"] == 400


def test_step_outlier_not_applicable_without_steps():
    assert verdict(evaluate(small_spec(minutes=1), report()), "StepOutlier").verdict == "NotApplicable"


# ---------------------------------------------------------------- MaxInitializationTime
def test_max_initialization_time_fires_after_the_threshold_without_steps():
    ev = evaluate(small_spec(minutes=4, dataloader=DataloaderSpec(workers=3)),
                  standalone("MaxInitializationTime", threshold=2))
    v = verdict(ev, "MaxInitializationTime")
    assert v.verdict == "IssuesFound" and v.report["RuleTriggered"] == 1  # window 3 only: its start is 3 min > 2 min
    assert "at step 3 " in ev.results(final=True)[0].status_details


def test_max_initialization_time_quiet_at_exactly_the_threshold():
    ev = evaluate(small_spec(minutes=3, dataloader=DataloaderSpec(workers=3)),
                  standalone("MaxInitializationTime", threshold=2))
    assert verdict(ev, "MaxInitializationTime").verdict == "NoIssuesFound"


def test_max_initialization_time_fires_inside_profiler_report():
    """Deviation: under ProfilerReport the managed rule's clock never advances, so it can never fire there."""
    ev = evaluate(small_spec(minutes=4, dataloader=DataloaderSpec(workers=3)),
                  report(MaxInitializationTime_threshold=2))
    assert verdict(ev, "MaxInitializationTime").verdict == "IssuesFound"


def test_max_initialization_time_quiet_once_steps_run():
    ev = evaluate(small_spec(minutes=4, steps=StepSpec(count=50)), standalone("MaxInitializationTime", threshold=2))
    v = verdict(ev, "MaxInitializationTime")
    assert v.verdict == "NoIssuesFound"
    assert v.report["Details"]["step_num"]["first"] == ORIGIN + 30_000_000


def test_max_initialization_time_not_applicable_without_framework_traces():
    ev = evaluate(small_spec(minutes=4), standalone("MaxInitializationTime", threshold=2))
    assert verdict(ev, "MaxInitializationTime").verdict == "NotApplicable"


@pytest.mark.parametrize("config", [standalone("MaxInitializationTime", threshold=2),
                                    report(MaxInitializationTime_threshold=2)], ids=["standalone", "in-report"])
def test_a_not_applicable_rule_writes_no_trigger_in_its_report(config):
    """MaxInitializationTime.json said RuleTriggered 9 next to the verdict NotApplicable (CLI and Lambda)."""
    ev = evaluate(small_spec(minutes=6), config)
    assert verdict(ev, "MaxInitializationTime").verdict == "NotApplicable"
    written = json.loads(report_files(ev.results(final=True))["profiler-reports/MaxInitializationTime.json"])
    assert written["RuleTriggered"] == 0 and written["Violations"] == 0
    assert ev.results(final=True)[0].status == "NoIssuesFound"


# ---------------------------------------------------------------- the informational rules
def test_overall_system_usage_divides_by_devices_and_never_fires():
    v = verdict(evaluate(small_spec(gpus=4), report()), "OverallSystemUsage")
    d = v.report["Details"]
    assert d["GPU"]["algo-1"] == {"max": 85.0, "p99": 85.0, "p95": 85.0, "p50": 85.0, "min": 85.0}
    assert d["CPU"]["algo-1"]["p50"] == 35.0 and d["I/O"]["algo-1"]["p50"] == 1.0
    assert d["Network"]["algo-1"]["p50"] == 2000.0  # receive + transmit of the algorithm; platform traffic ignored
    assert d["CPU memory"]["algo-1"]["max"] == 12.0
    assert v.report["Datapoints"] == 1800 and v.verdict == "NoIssuesFound"


def test_overall_framework_metrics_splits_phases():
    spec = small_spec(steps=StepSpec(count=300, duration_s=0.2), dataloader=DataloaderSpec(workers=3))
    v = verdict(evaluate(spec, report()), "OverallFrameworkMetrics")
    d = v.report["Details"]
    assert set(d["phase"]) == {"Step:ModeKeys.TRAIN", "others"}
    assert sum(d["phase"].values()) == pytest.approx(100)
    assert set(d["general"]) == {"DataLoaderIterInitialize", "DataLoaderWorker"}
    assert v.report["RuleTriggered"] == 0


# ---------------------------------------------------------------- ProfilerReport
def test_profiler_report_healthy_job_has_no_issues():
    spec = small_spec(steps=StepSpec(count=300), dataloader=DataloaderSpec(workers=3))
    result = evaluate(spec, report()).results(final=True)[0]
    assert result.status == "NoIssuesFound" and result.status_details is None
    assert {s.verdict for s in result.rules} == {"NoIssuesFound"}


def test_profiler_report_issues_found_at_the_number_of_windows():
    result = evaluate(small_spec(gpu_util=constant(50.0)), report()).results(final=True)[0]
    assert result.status == "IssuesFound"
    assert result.status_details == (
        "RuleEvaluationConditionMet: Evaluation of the rule ProfilerReport at step 3 resulted in the condition being met\n")


def test_profiler_report_overrides_reach_the_sub_rule():
    ev = evaluate(small_spec(), report(LowGPUUtilization_threshold_p95="90"))
    v = verdict(ev, "LowGPUUtilization")
    assert v.verdict == "IssuesFound"
    assert v.report["RuleParameters"].startswith("threshold_p95:90\n")
