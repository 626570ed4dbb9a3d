"""A RuleAlarm whose jobs no RuleEvaluator of the app evaluates (and that SageMaker Debugger does not evaluate either)
would wait for verdicts that never come: a synth warning says so, once, on the alarm."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import jsii
from constructs import IConstruct

#: The warning's id (``cdk.Annotations.of(alarm).acknowledge_warning(UNCOVERED_WARNING, reason)`` silences it).
UNCOVERED_WARNING = "cdk-sagemaker-debugger:alarmFamilyNotEvaluated"


@jsii.implements(cdk.IAspect)
class _Coverage:
    """Checks at synth, when every construct of the app exists."""

    def __init__(self, alarm: Any) -> None:
        self._alarm = alarm

    def visit(self, node: IConstruct) -> None:
        if node is not self._alarm:
            return
        message = uncovered_reason(self._alarm)
        if message:
            cdk.Annotations.of(node).add_warning_v2(UNCOVERED_WARNING, message)


def uncovered_reason(alarm: Any) -> str | None:
    """Why the alarm may never hear a verdict (None: a RuleEvaluator or Debugger evaluates its jobs)."""
    from .rule_evaluator import RuleEvaluator

    jobs = alarm.training_jobs
    origin = getattr(jobs, "origin", None)
    if origin is not None and origin.rule_report_location is not None:
        return None  # the job's rules are evaluated by SageMaker Debugger, not a RuleEvaluator
    evaluators = [c for c in cdk.App.of(alarm).node.find_all() if isinstance(c, RuleEvaluator)] \
        if cdk.App.of(alarm) is not None else []
    if any(e.training_jobs.family == jobs.family for e in evaluators):
        return None
    return (f"no RuleEvaluator in this app evaluates the {jobs.label}, so this alarm hears only SageMaker Debugger's "
            "verdicts. Add RuleEvaluator(..., training_jobs=<the same TrainingJobs>), or acknowledge this warning if "
            "the jobs run Debugger's rules.")


def check_coverage(alarm: Any) -> None:
    """Register the synth-time check on ``alarm``."""
    cdk.Aspects.of(alarm).add(_Coverage(alarm))
