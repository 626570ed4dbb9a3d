"""The framework breakdowns: OverallFrameworkMetrics' phase split with several ranks, measured per rank on its own step
log, and the StepOutlier and CPU/IO bottleneck breakdowns without an invented ``others`` phase (the managed helper
``aggregate_framework_metrics`` has none; deployed StepOutlier.json and CPUBottleneck.json show TRAIN 100 %)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from evaluator_jobs import FIXTURES, report, small_spec, verdict

from cdk_sagemaker_debugger.runtime.evaluator.readers import TraceEvent
from cdk_sagemaker_debugger.runtime.evaluator.reading import evaluate_store
from cdk_sagemaker_debugger.runtime.evaluator.rules import FrameworkBreakdown
from cdk_sagemaker_debugger.runtime.evaluator.storage import LocalStore
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import StepSpec, _trace_file, write_job

TRAIN = "Step:ModeKeys.TRAIN"


def _rank_steps(root: Path, start_s: int, rank: int, step_s: float, gap_s: float, count: int) -> None:
    """One rank's python timeline (``<rank>-algo-1``), one file per minute, as the managed hook writes it."""
    by_minute: dict[int, list[dict]] = {}
    t = 10.0
    for n in range(count):
        event = {"name": TRAIN, "pid": 1, "ph": "X", "ts": int(t * 1e6), "dur": int(step_s * 1e6),
                 "args": {"pid": 4000 + rank, "step_num": str(n)}}
        by_minute.setdefault(int((t + step_s) // 60), []).append(event)
        t += step_s + gap_s
    for minute in sorted(by_minute):
        _trace_file(root, f"{rank}-algo-1", "pythontimeline.json", by_minute[minute], start_s * 1_000_000, {1: TRAIN})


def _framework_phase(ranks: list[tuple[int, float, float]]) -> dict[str, float]:
    spec = small_spec(minutes=4)
    with tempfile.TemporaryDirectory() as tmp:
        root = write_job(Path(tmp) / "profiler-output", spec)
        for rank, step_s, gap_s in ranks:
            _rank_steps(root, spec.start, rank, step_s, gap_s, count=150)
        evaluator = evaluate_store(LocalStore(root), [report()], read_workers=1)
    return verdict(evaluator, "OverallFrameworkMetrics").report["Details"]["phase"]


# Each rank's own step log: rank 0 spends 0.88 s of every second in a step, rank 1 0.80 s (150 steps each).
RANK_0, RANK_1 = (0, 0.88, 0.12), (1, 0.80, 0.20)


def test_one_rank_reports_its_own_step_share():
    # 150 steps of 0.88 s over 149.88 s (first start to last end): 88.07 %
    assert _framework_phase([RANK_0])[TRAIN] == pytest.approx(100 * 132 / 149.88, abs=0.01)
    assert _framework_phase([RANK_1])[TRAIN] == pytest.approx(100 * 120 / 149.80, abs=0.01)


def test_two_ranks_report_the_share_of_their_step_logs_not_100_percent():
    """The managed formula (one span over every process minus every process's steps) gave TRAIN 100 %."""
    phase = _framework_phase([RANK_0, RANK_1])
    # (132 + 120) s in steps over (149.88 + 149.80) s of step logs: 84.09 %, between the ranks' 88 % and 80 %
    assert phase[TRAIN] == pytest.approx(100 * 252 / 299.68, abs=0.01)
    assert phase["others"] == pytest.approx(100 - phase[TRAIN])


def _event(phase: str, start: int, end: int, node: str = "algo-1-0") -> TraceEvent:
    return TraceEvent(phase, phase, start, end, node, {"step_num": "1"}, "PythontimelineMetrics", (1, 0, "k", 0))


def test_overlapping_steps_of_one_rank_leave_no_negative_others():
    b = FrameworkBreakdown()
    b.add(_event(TRAIN, 0, 100))
    b.add(_event(TRAIN, 0, 100))  # the same interval twice (GLOBAL and TRAIN, or a re-read)
    assert b.details(framework_rule=True)["phase"] == {TRAIN: 100.0, "others": 0.0}


def test_step_outlier_and_bottleneck_breakdowns_carry_no_others_phase():
    b = FrameworkBreakdown()
    b.add(_event(TRAIN, 0, 10))
    b.add(_event(TRAIN, 990, 1000))  # two short steps far apart: 98 % of the span between them
    assert b.details(framework_rule=False)["phase"] == {TRAIN: 100.0}
    assert b.details(framework_rule=True)["phase"] == {TRAIN: 2.0, "others": 98.0}


def test_step_outlier_breakdown_of_a_fired_job_is_train_100_percent():
    """The issue's repro: StepOutlier showed TRAIN 1.7 %, others 98.3 %, where the managed code shows TRAIN 100 %."""
    steps = StepSpec(count=400, duration_s=0.2, gap_s=0.05, slow_steps={200 + i: 2.0 for i in range(11)})
    with tempfile.TemporaryDirectory() as tmp:
        root = write_job(Path(tmp) / "profiler-output", small_spec(steps=steps))
        evaluator = evaluate_store(LocalStore(root), [report()], read_workers=1)
    outlier = verdict(evaluator, "StepOutlier")
    assert outlier.verdict == "IssuesFound"
    assert outlier.report["Details"]["phase"] == {TRAIN: 100.0}


@pytest.mark.parametrize("rule", ["StepOutlier", "CPUBottleneck"])
def test_the_deployed_breakdowns_have_no_others_phase(rule):
    """Pins what the managed container wrote (2022-04, PyTorch with framework profiling)."""
    deployed = json.loads((FIXTURES / "deployed_profiler_reports" / "2022-04_pytorch_1gpu_framework-profiling" /
                           f"{rule}.json").read_text())
    assert "others" not in deployed["Details"]["phase"] and sum(deployed["Details"]["phase"].values()) == 100.0
