"""Recognise and validate the events the RuleAlarm handler receives, and read rule statuses from DescribeTrainingJob.

Nothing in an event is trusted beyond the training-job name: SageMaker's state-change events repeat old statuses and
their published schema does not promise rule statuses at all, so the job is always described again. Only the
evaluator's custom events carry statuses that DescribeTrainingJob cannot show (they are computed outside SageMaker).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from .contract_shared import EVENT_SOURCE as EVALUATOR_SOURCE
from .contract_shared import SAGEMAKER_SOURCE, TRAINING_JOB_STATE_CHANGE, reported_text
from .contract_shared import STATUS_CHANGE_DETAIL_TYPE as RULE_EVALUATION_STATUS_CHANGE

SCHEDULE_SOURCE = "aws.events"
SCHEDULED_EVENT = "Scheduled Event"

RULE_STATUSES = frozenset({"InProgress", "NoIssuesFound", "IssuesFound", "Error", "Stopping", "Stopped"})
RULE_STATUSES_STILL_RUNNING = frozenset({"InProgress", "Stopping"})
JOB_STATUSES_STILL_RUNNING = frozenset({"InProgress", "Stopping"})

MAX_RULE_NAME_CHARS = 256
MAX_STATUS_DETAILS_CHARS = 1024
MAX_STATUSES_PER_EVENT = 100
_JOB_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
_MAX_JOB_NAME_CHARS = 63
_EPOCH_MILLISECONDS_THRESHOLD = 100_000_000_000  # numbers above this are milliseconds (year 5138 in seconds)


class MalformedEvent(ValueError):
    """The event cannot be acted on; it is logged and dropped (retrying would never make it valid)."""


@dataclass(frozen=True)
class RuleStatus:
    """One entry of ProfilerRuleEvaluationStatuses / DebugRuleEvaluationStatuses, normalised."""

    rule: str
    status: str
    details: str | None = None
    modified_at: datetime | None = None
    evaluation_job_arn: str | None = None
    reported_by: str = "SageMaker"


@dataclass(frozen=True)
class JobEvent:
    """A training-job state change or an evaluator status change: "look at this job again"."""

    job_name: str
    source: str
    account: str | None = None
    evaluator_statuses: tuple[RuleStatus, ...] = ()
    rejected_entries: tuple[str, ...] = ()  # why individual evaluator entries were unusable (the rest still count)


@dataclass(frozen=True)
class SweepRequest:
    """The every-minute schedule: re-check every watched job."""


def parse_event(event: Any) -> JobEvent | SweepRequest:
    """Classify ``event``; raise :class:`MalformedEvent` (with the reason) for anything the handler must drop."""
    if not isinstance(event, Mapping):
        raise MalformedEvent(f"event is a {type(event).__name__}, expected a JSON object")
    source, detail_type = event.get("source"), event.get("detail-type")
    if not isinstance(source, str) or not isinstance(detail_type, str):
        raise MalformedEvent(
            f"'source' and 'detail-type' must be strings, got {_short(source)!r}/{_short(detail_type)!r}"
        )
    if source == SCHEDULE_SOURCE and detail_type == SCHEDULED_EVENT:
        return SweepRequest()
    if (source, detail_type) not in {
        (SAGEMAKER_SOURCE, TRAINING_JOB_STATE_CHANGE),
        (EVALUATOR_SOURCE, RULE_EVALUATION_STATUS_CHANGE),
    }:
        raise MalformedEvent(f"unexpected source/detail-type {_short(source)!r}/{_short(detail_type)!r}")
    detail = event.get("detail")
    if not isinstance(detail, Mapping):
        raise MalformedEvent(f"'detail' is a {type(detail).__name__}, expected a JSON object")
    job_name = validate_job_name(detail.get("TrainingJobName"))
    account = event.get("account")
    if account is not None and not isinstance(account, str):
        raise MalformedEvent(f"'account' is a {type(account).__name__}, expected a string")
    if source == SAGEMAKER_SOURCE:
        return JobEvent(job_name=job_name, source=source, account=account)
    entries = detail.get("ProfilerRuleEvaluationStatuses")
    if not isinstance(entries, list):
        raise MalformedEvent(f"'detail.ProfilerRuleEvaluationStatuses' is a {type(entries).__name__}, expected a list")
    if len(entries) > MAX_STATUSES_PER_EVENT:
        raise MalformedEvent(
            f"'detail.ProfilerRuleEvaluationStatuses' has {len(entries)} entries, at most {MAX_STATUSES_PER_EVENT} expected"
        )
    statuses: list[RuleStatus] = []
    rejected: list[str] = []
    for index, entry in enumerate(entries):
        try:
            statuses.append(rule_status_from_entry(entry, reported_by="RuleEvaluator"))
        except MalformedEvent as error:
            rejected.append(f"entry {index}: {error}")
    if rejected and not statuses:
        raise MalformedEvent(f"no usable rule status in 'detail.ProfilerRuleEvaluationStatuses': {rejected[0]}")
    return JobEvent(
        job_name=job_name,
        source=source,
        account=account,
        evaluator_statuses=tuple(statuses),
        rejected_entries=tuple(rejected),
    )


def validate_job_name(value: Any) -> str:
    """Return ``value`` if it is a valid training-job name (the CreateTrainingJob pattern), else raise MalformedEvent."""
    if not isinstance(value, str):
        raise MalformedEvent(f"'detail.TrainingJobName' is a {type(value).__name__}, expected a string")
    # length first: the pattern backtracks badly on long input
    if not 1 <= len(value) <= _MAX_JOB_NAME_CHARS or not _JOB_NAME.fullmatch(value):
        raise MalformedEvent(f"'detail.TrainingJobName' {_short(value)!r} is not a valid training job name")
    return value


def rule_status_from_entry(entry: Any, *, reported_by: str) -> RuleStatus:
    """Normalise one rule-status object; raise MalformedEvent if it lacks a usable rule name or status."""
    if not isinstance(entry, Mapping):
        raise MalformedEvent(f"rule status entry is a {type(entry).__name__}, expected a JSON object")
    rule = entry.get("RuleConfigurationName")
    if not isinstance(rule, str) or not 1 <= len(rule) <= MAX_RULE_NAME_CHARS:
        raise MalformedEvent(
            f"'RuleConfigurationName' {_short(rule)!r} is not a 1-{MAX_RULE_NAME_CHARS} character string"
        )
    status = entry.get("RuleEvaluationStatus")
    if status not in RULE_STATUSES:
        raise MalformedEvent(
            f"'RuleEvaluationStatus' {_short(status)!r} of rule {_short(rule)!r} is not one of {sorted(RULE_STATUSES)}"
        )
    details = entry.get("StatusDetails")
    job_arn = entry.get("RuleEvaluationJobArn")
    return RuleStatus(
        rule=rule,
        status=status,
        # one line without control characters from here on: the e-mail, the SMS, the logs, the transition events
        details=(reported_text(details, MAX_STATUS_DETAILS_CHARS) or None) if isinstance(details, str) else None,
        modified_at=parse_time(entry.get("LastModifiedTime")),
        evaluation_job_arn=job_arn if isinstance(job_arn, str) and job_arn else None,
        reported_by=reported_by,
    )


def statuses_from_description(description: Mapping[str, Any]) -> list[RuleStatus]:
    """Rule statuses of a DescribeTrainingJob response (profiler rules first, then debugger rules)."""
    statuses: list[RuleStatus] = []
    for key in ("ProfilerRuleEvaluationStatuses", "DebugRuleEvaluationStatuses"):
        for entry in description.get(key) or ():
            try:
                statuses.append(rule_status_from_entry(entry, reported_by="SageMaker"))
            except MalformedEvent:
                continue  # SageMaker's own response; an entry without a name or status has nothing to act on
    return statuses


def parse_time(value: Any) -> datetime | None:
    """Read a timestamp sent as a datetime, epoch seconds or milliseconds (number or string) or ISO 8601; else None.

    The result is in UTC. A time that has no UTC equivalent (``9999-12-31T23:00:00-05:00`` is past year 9999 there)
    is None rather than an error later, when the verdict is recorded."""
    if isinstance(value, datetime):
        return _utc(value if value.tzinfo else value.replace(tzinfo=timezone.utc))
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text)
        except ValueError:
            try:
                parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
            except ValueError:
                return None
            return _utc(parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc))
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or value < 0:
            return None
        seconds = value / 1000 if value > _EPOCH_MILLISECONDS_THRESHOLD else value
        try:
            return datetime.fromtimestamp(seconds, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def _utc(value: datetime) -> datetime | None:
    try:
        return value.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        return None


def _short(value: Any, limit: int = 80) -> Any:
    """A bounded echo of a bad value for error messages (the event itself may be huge)."""
    if isinstance(value, str):
        return value if len(value) <= limit else f"{value[:limit]}..."
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return f"<{type(value).__name__}>"
