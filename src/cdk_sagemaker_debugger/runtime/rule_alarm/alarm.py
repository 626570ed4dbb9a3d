"""The RuleAlarm decision logic: which transitions to act on, and acting on each exactly once.

Flow for a job event: validate (prefix, account) -> DescribeTrainingJob (the source of truth) -> the job runs as the
family's execution role -> remember the job for the sweep -> evaluator verdicts only for configured rules and only when
the evaluator's report confirms them -> for each wanted (rule, status): claim it in the ledger -> StopTrainingJob (if
configured) -> SNS publish (at most the per-job cap) -> EventBridge "Rule Alarm Transition" event -> mark done. The sweep repeats the same for every watched job, and also resumes
transitions whose owner crashed. Failures after retries are re-raised at the end of the invocation so Lambda's
asynchronous retries and the dead-letter queue keep the event.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timezone
from typing import Any

from botocore.exceptions import ClientError

from .contract_shared import EVENT_SOURCE as EVALUATOR_SOURCE
from .contract_shared import TRANSITION_DETAIL_TYPE, job_tags
from .events import (
    JOB_STATUSES_STILL_RUNNING,
    RULE_STATUSES_STILL_RUNNING,
    JobEvent,
    MalformedEvent,
    RuleStatus,
    SweepRequest,
    parse_event,
    statuses_from_description,
)
from .ledger import DONE, Claim, ClaimRefused, JobLedger, LeaseLost, Ledger, Transition
from .logs import get_logger
from .message import JobView, Notification, compose
from .reports import findings, reported_status
from .settings import Settings

_NOT_FOUND_CODES = frozenset({"ValidationException", "ResourceNotFound"})
STOP_ON_STATUS = "IssuesFound"
#: Recorded instead of an SNS message id when the job's message cap kept the notification from being sent.
CAPPED = "capped"


class RuleAlarmIncomplete(RuntimeError):
    """Some transitions could not be handled after retries; raised so the event is retried or dead-lettered."""


@dataclass
class _Invocation:
    """Per-invocation bookkeeping; the processor itself holds no mutable state, so invocations may overlap."""

    lease_seconds: float
    request_id: str | None
    notified: int = 0
    stop_calls: int = 0
    refused: int = 0
    failures: list[str] = field(default_factory=list)
    stopped_jobs: set[str] = field(default_factory=set)

    def summary(self, outcome: str, **extra: Any) -> dict[str, Any]:
        result = {
            "outcome": outcome,
            "notified": self.notified,
            "stop_calls": self.stop_calls,
            "refused": self.refused,
            **extra,
        }
        if self.failures:
            raise RuleAlarmIncomplete(f"{len(self.failures)} failure(s): " + "; ".join(self.failures[:5]))
        return result


class RuleAlarmProcessor:
    """Handles one event at a time; safe to run in many concurrent Lambda instances (the ledger arbitrates)."""

    def __init__(
        self,
        settings: Settings,
        *,
        sagemaker: Any,
        sns: Any,
        events: Any,
        dynamodb: Any,
        s3: Any = None,
        clock: Callable[[], float] = time.time,
        new_owner_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        logger: logging.Logger | None = None,
    ) -> None:
        self.settings = settings
        self._sagemaker = sagemaker
        self._sns = sns
        self._events = events
        self._s3 = s3  # reads RuleEvaluator reports; without it no evaluator verdict is confirmed
        self._clock = clock
        self._new_owner_id = new_owner_id
        self._log = logger or get_logger()
        self.ledger = Ledger(
            dynamodb,
            settings.table_name,
            clock=clock,
            transition_ttl_seconds=settings.transition_ttl_days * 86400,
            watch_ttl_seconds=settings.watch_ttl_days * 86400,
        )

    # -- entry point ------------------------------------------------------------------------------------------------

    def handle(self, event: Any, context: Any = None) -> dict[str, Any]:
        invocation = _Invocation(lease_seconds=self._lease_seconds(context), request_id=_request_id(context))
        try:
            parsed = parse_event(event)
        except MalformedEvent as error:
            self._log.warning(
                "dropped malformed event",
                extra={"reason": str(error), "event_chars": _size(event), "request_id": invocation.request_id},
            )
            return {"outcome": "dropped", "reason": str(error)}
        if isinstance(parsed, SweepRequest):
            return self._sweep(invocation)
        return self._on_job_event(parsed, invocation)

    # -- job events -------------------------------------------------------------------------------------------------

    def _on_job_event(self, event: JobEvent, invocation: _Invocation) -> dict[str, Any]:
        fields = {"job": event.job_name, "source": event.source, "request_id": invocation.request_id}
        for reason in event.rejected_entries:
            self._log.warning("ignored malformed rule status entry", extra={**fields, "reason": reason})
        refusal = self._refuse_event(event)
        if refusal is not None:
            self._log.warning(f"dropped event: {refusal}", extra={**fields, "account": event.account})
            return {"outcome": "dropped", "reason": refusal}
        description = self._describe(event.job_name)
        if description is None:
            self._log.warning("dropped event for a training job that does not exist", extra=fields)
            return {"outcome": "dropped", "reason": "training job not found"}
        refusal = self._not_family(event.job_name, description)
        if refusal is not None:
            self._log.warning(f"dropped event: {refusal}", extra={**fields, "role": description.get("RoleArn")})
            return {"outcome": "dropped", "reason": refusal}
        # watch first: if anything below fails, the sweep still finds the job
        self.ledger.watch(event.job_name)
        job = JobView.from_description(description)
        reported = self._confirmed(event.evaluator_statuses, description, fields)
        statuses = _merge(statuses_from_description(description), reported)
        self._log.info(
            "received job event",
            extra={**fields, "job_status": job.status, "rule_statuses": {s.rule: s.status for s in statuses}},
        )
        self._act_on_statuses(job, statuses, invocation, known=None)
        return invocation.summary("processed", job=job.name)

    def _refuse_event(self, event: JobEvent) -> str | None:
        """Why an event is not for this alarm (None when it is): another prefix, or another account."""
        if not self.settings.family.name_may_belong(event.job_name):
            return "job outside the watched prefix"
        account = self.settings.account_id
        if account is not None and event.account != account:
            return "event from another account"
        return None

    def _not_family(self, job_name: str, description: Mapping[str, Any]) -> str | None:
        """Why a described job is not one of the family's (None when it is): its tags say otherwise (tag and pipeline
        families, read with ListTags), or it runs as another role. A job name is easy to copy; running as the
        execution role needs iam:PassRole on it."""
        family = self.settings.family
        tags = job_tags(self._sagemaker, description["TrainingJobArn"]) if family.needs_tags else None
        return family.refusal(job_name, tags, role_arn=description.get("RoleArn"),
                              job_arn=description.get("TrainingJobArn"))

    def _confirmed(
        self, reported: Iterable[RuleStatus], description: Mapping[str, Any], fields: Mapping[str, Any]
    ) -> list[RuleStatus]:
        """The evaluator's verdicts worth acting on, as its reports give them: an evaluator event names the rules to
        look at again; status, details and time are read from the evaluator's summary of each rule, never the event."""
        confirmed, reported = [], tuple(reported)
        for rule in dict.fromkeys(status.rule for status in reported):
            known = self.settings.known_rules
            if known is not None and rule not in known:
                self._log.warning("ignored evaluator verdict for a rule the alarm does not watch",
                                  extra={**fields, "rule": rule})
                continue
            claimed = [s.status for s in reported if s.rule == rule]
            found, where = reported_status(self._s3, description, rule) if self._s3 else (None, "no S3 client")
            if found is None or found.status not in claimed:
                self._log.warning(
                    "evaluator event and report disagree; acting on the report" if found is not None else
                    "ignored evaluator verdict its report does not confirm",
                    extra={**fields, "rule": rule, "status": claimed, "report_status": found and found.status,
                           "report": where},
                )
            if found is not None and self._wanted(found):
                confirmed.append(found)
        return confirmed

    # -- sweep ------------------------------------------------------------------------------------------------------

    def _sweep(self, invocation: _Invocation) -> dict[str, Any]:
        watched = self.ledger.watched_jobs()
        released = 0
        for job_name in watched:
            try:
                if self._sweep_job(job_name, invocation):
                    released += 1
            except Exception as error:  # one broken job must not starve the others
                self._log.exception(
                    "sweep failed for job", extra={"job": job_name, "request_id": invocation.request_id}
                )
                invocation.failures.append(f"{job_name}: {error}")
        self._log.info(
            "sweep finished",
            extra={"watched": len(watched), "released": released, "request_id": invocation.request_id},
        )
        return invocation.summary("swept", watched=len(watched), released=released)

    def _sweep_job(self, job_name: str, invocation: _Invocation) -> bool:
        """Re-check one watched job; return True when it no longer needs watching."""
        if not self.settings.family.name_may_belong(job_name):
            self.ledger.unwatch(job_name)
            return True
        description = self._describe(job_name)
        if description is None:
            self._log.warning("stopped watching a training job that no longer exists", extra={"job": job_name})
            self.ledger.unwatch(job_name)
            return True
        refusal = self._not_family(job_name, description)
        if refusal is not None:
            self._log.warning(f"stopped watching a job: {refusal}", extra={"job": job_name})
            self.ledger.unwatch(job_name)
            return True
        job = JobView.from_description(description)
        known = self.ledger.job_ledger(job_name)
        statuses = statuses_from_description(description)
        settled = self._act_on_statuses(job, statuses, invocation, known=known)
        # transitions recorded earlier whose owner crashed or gave up (including evaluator ones Describe cannot show)
        attempted = {(s.rule, s.status) for s in statuses if self._wanted(s)}
        now_ms = int(self._clock() * 1000)
        for transition, lease_expired in known.pending(now_ms):
            if (transition.rule, transition.status) in attempted:
                continue
            if not lease_expired:
                settled = False  # a live invocation is on it; look again next minute
                continue
            settled = self._process(job, transition, invocation) and settled
        rules_running = any(s.status in RULE_STATUSES_STILL_RUNNING for s in statuses)
        if job.status in JOB_STATUSES_STILL_RUNNING or rules_running or not settled:
            return False
        self.ledger.unwatch(job_name)
        self._log.info("stopped watching finished training job", extra={"job": job_name, "job_status": job.status})
        return True

    # -- acting -----------------------------------------------------------------------------------------------------

    def _wanted(self, status: RuleStatus) -> bool:
        rule_names = self.settings.rule_names
        return status.status in self.settings.statuses and (rule_names is None or status.rule in rule_names)

    def _act_on_statuses(
        self, job: JobView, statuses: Iterable[RuleStatus], invocation: _Invocation, *, known: JobLedger | None
    ) -> bool:
        """Process every wanted status; True when all of them are done."""
        settled = True
        for status in statuses:
            if not self._wanted(status):
                continue
            if known is not None and known.state_of(status.rule, status.status) == DONE:
                continue  # the sweep read the ledger already: skip a write that would be refused
            transition = Transition(
                job_name=job.name,
                rule=status.rule,
                status=status.status,
                job_arn=job.arn,
                details=status.details,
                modified_at=status.modified_at.astimezone(timezone.utc).isoformat() if status.modified_at else None,
                evaluation_job_arn=status.evaluation_job_arn,
                reported_by=status.reported_by,
            )
            settled = self._process(job, transition, invocation) and settled
        return settled

    def _process(self, job: JobView, transition: Transition, invocation: _Invocation) -> bool:
        """Claim and act on one transition; True when it is done (by this invocation or an earlier one)."""
        fields = {
            "job": transition.job_name,
            "rule": transition.rule,
            "status": transition.status,
            "request_id": invocation.request_id,
        }
        try:
            claim = self.ledger.claim(transition, owner=self._new_owner_id(), lease_seconds=invocation.lease_seconds)
        except Exception as error:
            self._log.exception("could not claim transition", extra=fields)
            invocation.failures.append(f"{transition.job_name}/{transition.rule}/{transition.status}: {error}")
            return False
        if isinstance(claim, ClaimRefused):
            invocation.refused += 1
            reason = "already handled" if claim.state == DONE else "being handled by another invocation"
            self._log.info(f"skipped transition: {reason}", extra={**fields, "ledger_state": claim.state})
            return claim.state == DONE
        if claim.taken_over:
            self._log.warning(
                "resuming transition after an earlier attempt failed", extra={**fields, "attempt": claim.attempts}
            )
        try:
            self._act(job, claim, invocation, fields)
            return True
        except LeaseLost:
            self._log.warning("lost the lease on a transition; the new owner finishes it", extra=fields)
            return False
        except Exception as error:
            self._log.exception("failed to act on transition; it will be retried", extra=fields)
            invocation.failures.append(f"{transition.job_name}/{transition.rule}/{transition.status}: {error}")
            try:
                self.ledger.release(claim)
            except Exception:  # the lease expires on its own; the original error is the one to report
                self._log.exception("could not release the lease", extra=fields)
            return False

    def _act(self, job: JobView, claim: Claim, invocation: _Invocation, fields: Mapping[str, Any]) -> None:
        transition = claim.transition
        stop_outcome = claim.stop_outcome
        # only a rule that found issues stops training; an Error or a clean verdict is worth a message, not a stop
        if self.settings.stop_prefix is not None and transition.status == STOP_ON_STATUS and stop_outcome is None:
            stop_outcome = self._stop(job, invocation, fields)
            self.ledger.record(claim, stop_outcome=stop_outcome)
        described = {"TrainingJobName": job.name, "OutputDataConfig": {"S3OutputPath": job.output_s3_uri}}
        found = findings(self._s3, described, transition.rule) if self._s3 is not None else None
        notification = compose(job, transition, stop_outcome=stop_outcome, findings=found)
        message_id = claim.message_id
        if message_id is None:
            message_id = self._notify(job, claim, notification, invocation, fields, stop_outcome)
        if not claim.announced and message_id != CAPPED:
            self._announce(job, transition, notification, stop_outcome)
        self.ledger.complete(claim, announced=message_id != CAPPED)

    def _notify(
        self,
        job: JobView,
        claim: Claim,
        notification: Notification,
        invocation: _Invocation,
        fields: Mapping[str, Any],
        stop_outcome: str | None,
    ) -> str:
        """Publish the notification unless the job reached its message cap; the message id, or CAPPED."""
        cap = self.settings.max_messages_per_job
        if not self.ledger.count_message(job.name, cap):
            self._log.warning("not notifying: the job reached its message cap", extra={**fields, "cap": cap})
            self.ledger.record(claim, message_id=CAPPED)
            return CAPPED
        response = self._sns.publish(**notification.publish_request(self.settings.topic_arn))
        self.ledger.record(claim, message_id=response["MessageId"])
        invocation.notified += 1
        self._log.info("notified", extra={**fields, "message_id": response["MessageId"], "stop_outcome": stop_outcome})
        return str(response["MessageId"])

    def _stop(self, job: JobView, invocation: _Invocation, fields: Mapping[str, Any]) -> str:
        stop_prefix = self.settings.stop_prefix or ""
        if not (job.name.lower().startswith(stop_prefix.lower()) and self.settings.family.name_may_belong(job.name)):
            self._log.warning(
                "not stopping a job outside the stop prefix", extra={**fields, "stop_prefix": stop_prefix}
            )
            return "outside-prefix"
        if job.status != "InProgress" or job.name in invocation.stopped_jobs:
            return "not-running"
        self._log.info("calling StopTrainingJob", extra=dict(fields))
        invocation.stop_calls += 1
        try:
            self._sagemaker.stop_training_job(TrainingJobName=job.name)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ValidationException":
                raise
            # SageMaker refuses to stop a job that is already stopping, stopped or finished: nothing left to do
            self._log.info("training job was already ending", extra={**fields, "reason": str(error)})
            return "already-ending"
        invocation.stopped_jobs.add(job.name)
        return "requested"

    def _announce(
        self, job: JobView, transition: Transition, notification: Notification, stop_outcome: str | None
    ) -> None:
        """Emit one "Rule Alarm Transition" event per transition, for targets added with ``RuleAlarm.on_transition``."""
        detail = {
            "AlarmId": self.settings.alarm_id,
            "TrainingJobName": job.name,
            "TrainingJobArn": job.arn,
            "TrainingJobStatus": job.status,
            "RuleConfigurationName": transition.rule,
            "RuleEvaluationStatus": transition.status,
            "StatusDetails": transition.details,
            "LastModifiedTime": transition.modified_at,
            "ReportedBy": transition.reported_by,
            "ConsoleUrl": notification.console_url,
            "RuleReportS3Uri": notification.report_location,
            "StopOutcome": stop_outcome,
        }
        response = self._events.put_events(
            Entries=[
                {
                    "Source": EVALUATOR_SOURCE,
                    "DetailType": TRANSITION_DETAIL_TYPE,
                    "Detail": json.dumps(detail),
                    "Resources": [job.arn],
                    "EventBusName": self.settings.event_bus_name,
                }
            ]
        )
        if response.get("FailedEntryCount"):
            entry = (response.get("Entries") or [{}])[0]
            raise RuntimeError(
                f"EventBridge rejected the transition event: {entry.get('ErrorCode')}: {entry.get('ErrorMessage')}"
            )

    # -- helpers ----------------------------------------------------------------------------------------------------

    def _describe(self, job_name: str) -> dict[str, Any] | None:
        try:
            return self._sagemaker.describe_training_job(TrainingJobName=job_name)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in _NOT_FOUND_CODES:
                return None
            raise

    def _lease_seconds(self, context: Any) -> float:
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        if callable(remaining):
            return remaining() / 1000 + self.settings.lease_margin_seconds
        return float(self.settings.default_lease_seconds)


def _merge(described: list[RuleStatus], reported: Iterable[RuleStatus]) -> list[RuleStatus]:
    """Describe's statuses, then the evaluator's for (rule, status) pairs Describe does not show."""
    seen = {(s.rule, s.status) for s in described}
    merged = list(described)
    for status in reported:
        if (status.rule, status.status) not in seen:
            seen.add((status.rule, status.status))
            merged.append(status)
    return merged


def _request_id(context: Any) -> str | None:
    value = getattr(context, "aws_request_id", None)
    return value if isinstance(value, str) else None


def _size(event: Any) -> int:
    try:
        return len(json.dumps(event, default=str))
    except (TypeError, ValueError, RecursionError):
        return -1
