"""Which verdict bus a RuleAlarm listens on, and the synth check that it hears every evaluator of its family (the
evaluators reading its output bucket for overlapping job names or the same tag).

The verdict bus is per stack. A RuleAlarm in a monitoring stack given ``job.training_jobs`` listens on the bus of the
stack of the job's evaluator (a cross-stack reference to that bus). Any other RuleEvaluator of the app that evaluates
jobs of the alarm's family and publishes on a verdict bus the alarm does not listen on fails the synth: its verdicts
would never reach the alarm (no e-mail, no StopTraining) and nothing would say so.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_events as events
from constructs import Construct, IValidation

from ..model.parameters import is_token
from .event_bus import is_verdict_bus, verdict_bus
from .family import TrainingJobs
from .rule_evaluator import RuleEvaluator

__all__ = ["listening_bus", "require_heard_evaluators"]


def listening_bus(alarm: Construct, training_jobs: TrainingJobs) -> events.IEventBus:
    """The verdict bus of the family's evaluator's stack when the family is a ProfiledTrainingJob's with an evaluator
    on its stack's verdict bus, else the alarm's own stack's verdict bus."""
    origin = training_jobs.origin
    evaluator = origin.evaluator if origin is not None else None
    if isinstance(evaluator, RuleEvaluator) and is_verdict_bus(evaluator.event_bus):
        return evaluator.event_bus
    return verdict_bus(alarm)


def _same_bucket(first: TrainingJobs, second: TrainingJobs) -> bool:
    one, other = first.output_bucket, second.output_bucket
    if one is other or one.node.path == other.node.path and cdk.Stack.of(one) is cdk.Stack.of(other):
        return True
    return not is_token(one.bucket_name) and one.bucket_name == other.bucket_name


def _overlap(first: TrainingJobs, second: TrainingJobs) -> bool:
    """Whether a job could belong to both families: they read the same output bucket (another bucket is another
    deployment, another region or account) and their names or tags overlap (unknowable prefixes overlap only when they
    are the same token)."""
    if first is second:
        return True
    if not _same_bucket(first, second):
        return False
    if first.family.needs_tags or second.family.needs_tags:
        return first.family == second.family
    one, other = first.job_name_prefix, second.job_name_prefix
    if is_token(one) or is_token(other):
        return one == other
    return one.startswith(other) or other.startswith(one)


@jsii.implements(IValidation)
class _HeardEvaluators:
    """Fails the synth for an evaluator of the alarm's family whose verdict bus the alarm does not listen on."""

    def __init__(self, alarm: Any) -> None:  # a RuleAlarm (it imports this module)
        self._alarm = alarm

    def validate(self) -> list[str]:
        alarm = self._alarm
        heard = alarm.verdict_bus
        problems = []
        for construct in alarm.node.root.node.find_all():
            if not isinstance(construct, RuleEvaluator) or not is_verdict_bus(construct.event_bus):
                continue  # an evaluator with its own event_bus= already warns that no RuleAlarm hears it
            if construct.event_bus is heard or construct.event_bus.node.path == heard.node.path:
                continue
            if _overlap(construct.training_jobs, alarm.training_jobs):
                problems.append(
                    f"{alarm.node.path}: training_jobs: the RuleEvaluator {construct.node.path} evaluates jobs of "
                    f"this alarm's family ({alarm.training_jobs.label}) and publishes on the verdict bus of stack "
                    f"{cdk.Stack.of(construct).stack_name}, but the alarm listens on the verdict bus of stack "
                    f"{cdk.Stack.of(heard).stack_name}, so it would never hear those verdicts (no notification, no "
                    "StopTraining). Pass the job's own training_jobs (job.training_jobs: the alarm then listens on "
                    "its evaluator's bus), or create the RuleAlarm in the evaluator's stack.")
        return problems


def require_heard_evaluators(alarm: Any) -> None:
    """Check at synth (after every construct exists) that the alarm hears every evaluator of its family."""
    alarm.node.add_validation(_HeardEvaluators(alarm))
