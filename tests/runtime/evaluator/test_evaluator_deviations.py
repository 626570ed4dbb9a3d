"""Smaller documented differences from the managed rules (docs/evaluator.md, "Where this differs")."""

from __future__ import annotations

import json
import math

import pytest
from evaluator_jobs import evaluate, report, small_spec, verdict

from cdk_sagemaker_debugger.runtime.evaluator import rules as rule_module
from cdk_sagemaker_debugger.runtime.evaluator.engine import SubRuleResult
from cdk_sagemaker_debugger.runtime.evaluator.readers import TraceEvent, parse_framework_key
from cdk_sagemaker_debugger.runtime.evaluator.report import report_json
from cdk_sagemaker_debugger.runtime.evaluator.rules import FrameworkBreakdown


def _event(phase: str, name: str, start: int, end: int) -> TraceEvent:
    return TraceEvent(phase, name, start, end, "algo-1-0", {}, "DetailedframeworkMetrics", (1, 0, "k", 0))


def test_breakdown_ratio_labels_carry_their_own_values():
    b = FrameworkBreakdown()
    b.add(_event("cpu_functions", "aten::add", 0, 30))
    b.add(_event("gpu_functions-dev:0", "aten::add", 0, 70))
    details = b.details(framework_rule=False)
    assert details["ratio"] == {"gpu_functions-dev:0": 70.0, "cpu_functions": 30.0}


def test_breakdown_others_phase_is_never_negative():
    b = FrameworkBreakdown()
    # two overlapping steps (two processes): step time exceeds the wall-clock span
    b.add(_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", 0, 100))
    b.add(_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", 0, 100))
    phase = b.details(framework_rule=True)["phase"]
    assert phase["others"] == 0.0 and phase["Step:ModeKeys.TRAIN"] == 100.0


def test_system_usage_history_is_bounded(monkeypatch):
    monkeypatch.setattr(rule_module, "MAX_DATAPOINTS", 1000)
    cpu = lambda node, core, sample, t: 10.0 if t < 120 else 90.0  # noqa: E731
    usage = verdict(evaluate(small_spec(cpu_util=cpu), report()), "OverallSystemUsage").report["Details"]
    # 1,200 values after two windows passed the bound and were dropped; only the third window's 90 % remain
    assert usage["CPU"]["algo-1"]["min"] == 90.0


def test_nan_is_written_as_null():
    sub = SubRuleResult("LoadBalancing", "NoIssuesFound", "", {"RuleTriggered": 0, "Violations": 0,
                                                               "Details": {"d": math.nan}, "Datapoints": 1,
                                                               "RuleParameters": ""}, "")
    assert json.loads(report_json(sub))["Details"] == {"d": None}


@pytest.mark.parametrize("key", [
    "framework/tensorflow/detailed_profiling/2020070206/000000001/plugins/profile/2020_07_02_06_00_00/h.trace.json.gz",
    "framework/pytorch/cprofile/51-algo-1/prestepzero-*-start-1593673051000000_end-1593673052000000/python_stats",
])
def test_only_timeline_traces_are_read(key):
    assert parse_framework_key(key) is None
