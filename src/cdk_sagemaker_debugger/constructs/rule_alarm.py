"""RuleAlarm: one e-mail/SMS notification, and optionally one StopTrainingJob, per rule verdict of a training job."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from ..model.actions import SMS, Action, ActionList, Email, StopTraining
from ..model.errors import ConfigurationError, ConfigurationTypeError, did_you_mean
from ..model.parameters import is_token
from ._alarm_actions import AlarmActions
from ._common import acknowledge_wildcards, runtime_function
from .training_job import ProfiledTrainingJob

__all__ = ["RuleAlarm", "ALARM_STATUSES"]

EVENT_SOURCE = "cdk-sagemaker-debugger"
EVALUATOR_DETAIL_TYPE = "Profiler Rule Evaluation Status Change"
TRANSITION_DETAIL_TYPE = "Rule Alarm Transition"
SAGEMAKER_SOURCE = "aws.sagemaker"
SAGEMAKER_DETAIL_TYPE = "SageMaker Training Job State Change"
#: Verdicts a RuleAlarm can report. StopTraining acts on IssuesFound only.
ALARM_STATUSES = ("IssuesFound", "Error", "NoIssuesFound", "Stopped")
_JOB_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_MAX_JOB_NAME = 63
_HANDLER_TIMEOUT = cdk.Duration.minutes(2)


class RuleAlarm(Construct):
    """Notifies by e-mail and SMS, and optionally stops training, when a rule of a training job reaches a verdict.

    Every ``(job, rule, status)`` transition is acted on exactly once: SageMaker's repeated and duplicated state-change
    events, replays and concurrent invocations are filtered by a conditional write in a DynamoDB ledger. The handler
    reads rule statuses with DescribeTrainingJob (state-change events are not guaranteed to carry them) and a sweep
    every minute re-checks the watched jobs, so a verdict that arrives after the job ended, or without an event, is
    reported within two minutes. Verdicts of the :class:`RuleEvaluator` are handled the same way.

    Example::

        alarm = RuleAlarm(stack, "Alarm", training_job=job,
                          actions=[Email("ml-team@example.com"), SMS("+15555550100"), StopTraining()])
        alarm.on_transition("Slack", target=targets.LambdaFunction(slack_notifier))

    E-mail subscribers must confirm the subscription; SMS needs an SNS account out of the SMS sandbox (or a verified
    number). StopTraining stops only jobs whose rule found issues (``IssuesFound``), only while they are InProgress,
    and only under its prefix; the other statuses notify.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        training_job: ProfiledTrainingJob | None = None,
        job_name_prefix: str | None = None,
        actions: Sequence[Action] | ActionList = (),
        statuses: Sequence[str] = ("IssuesFound",),
        rule_names: Sequence[str] | None = None,
        topic_key: kms.IKey | None = None,
        transition_retention: cdk.Duration | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.THREE_MONTHS,
        ops_topic: sns.ITopic | None = None,
    ) -> None:
        super().__init__(scope, id)
        where = self.node.path
        ops_actions = AlarmActions.checked(ops_topic, where=where)
        if (training_job is None) == (job_name_prefix is None):
            raise ConfigurationError(
                "give exactly one of training_job= (a ProfiledTrainingJob) or job_name_prefix= (for jobs started "
                "elsewhere).",
                where=where,
                field="training_job",
            )
        if training_job is not None:
            if not isinstance(training_job, ProfiledTrainingJob):
                raise ConfigurationTypeError(
                    f"expected a ProfiledTrainingJob, got {type(training_job).__name__}. For jobs started elsewhere "
                    "pass job_name_prefix= instead.",
                    where=where,
                    field="training_job",
                    value=training_job,
                )
            # ProfiledTrainingJob names its jobs "<prefix>-<suffix>"; the dash keeps "<prefix>2-..." jobs out
            job_name_prefix = f"{training_job.job_name_prefix}-"
        self.job_name_prefix: str = _check_prefix(job_name_prefix, where=where, field="job_name_prefix")
        self.training_job = training_job
        self.statuses: tuple[str, ...] = _check_statuses(statuses, where=where)
        self.rule_names: tuple[str, ...] | None = _check_rule_names(rule_names, training_job, where=where)
        self._emails: list[str] = []
        self._phone_numbers: list[str] = []
        stop = _split_actions(actions, where=where, emails=self._emails, phone_numbers=self._phone_numbers)
        #: The prefix StopTraining may stop (None without StopTraining): the narrower of its prefix and the watched one.
        self.stop_prefix: str | None = None
        if stop is not None:
            self.stop_prefix = _stop_prefix(stop, self.job_name_prefix, where=where)
        retention = transition_retention or cdk.Duration.days(90)
        retention_seconds = retention.to_seconds()
        if retention_seconds < 86400:
            raise ConfigurationError(
                "must be at least one day: a transition is remembered that long, and a verdict reported again after "
                f"it is forgotten is notified again. Got {retention.to_human_string()}.",
                where=where,
                field="transition_retention",
            )
        #: How long the ledger remembers a transition (whole days).
        self.transition_retention_days: int = math.ceil(retention_seconds / 86400)
        #: Identifies this alarm in its "Rule Alarm Transition" events.
        self.alarm_id: str = self.node.path

        # -- topic -------------------------------------------------------------------------------------------------
        self.topic_key: kms.IKey = topic_key or kms.Key(
            self,
            "TopicKey",
            enable_key_rotation=True,
            description=f"Encrypts the rule alarm notifications for training jobs {self.job_name_prefix}*",
        )
        # Only the handler publishes (its role gets kms:GenerateDataKey* on this key through topic.grant_publish).
        # To route your own EventBridge rules to this topic, admit events.amazonaws.com on the key yourself.
        self.topic = sns.Topic(
            self,
            "Topic",
            master_key=self.topic_key,
            enforce_ssl=True,
            display_name="SageMaker rule alarm",
        )
        for address in self._emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(address))
        for number in self._phone_numbers:
            self.topic.add_subscription(subscriptions.SmsSubscription(number))

        # -- ledger and dead letters -------------------------------------------------------------------------------
        self.table = dynamodb.Table(
            self,
            "Ledger",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute="expires_at",
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        environment = {
            "TABLE_NAME": self.table.table_name,
            "TOPIC_ARN": self.topic.topic_arn,
            "JOB_NAME_PREFIX": self.job_name_prefix,
            "ALARM_ID": self.alarm_id,
            "STATUSES": json.dumps(list(self.statuses)),
            "EVENT_BUS_NAME": "default",
            "TRANSITION_TTL_DAYS": str(self.transition_retention_days),
        }
        if self.rule_names is not None:
            environment["RULE_NAMES"] = json.dumps(list(self.rule_names))
        if self.stop_prefix is not None:
            environment["STOP_PREFIX"] = self.stop_prefix
        # -- handler -----------------------------------------------------------------------------------------------
        runtime = runtime_function(
            self,
            "Handler",
            package="rule_alarm",
            handler="handler.handler",
            description=f"Notifies (and stops) training jobs {self.job_name_prefix}* once per rule verdict",
            role_description=f"Rule alarm handler for training jobs {self.job_name_prefix}*",
            environment=environment,
            memory_size=256,
            timeout=_HANDLER_TIMEOUT,
            log_retention=log_retention,
            max_event_age=cdk.Duration.hours(6),
        )
        #: Events the handler could not take after its retries, and failed deliveries of the EventBridge rules.
        self.dead_letter_queue = runtime.dead_letter_queue
        self.log_group = runtime.log_group
        self.role = runtime.role
        self.handler = runtime.function
        self._grant_handler_permissions()

        # -- triggers ----------------------------------------------------------------------------------------------
        target = targets.LambdaFunction(self.handler, dead_letter_queue=self.dead_letter_queue)
        #: SageMaker's state changes and the RuleEvaluator's verdicts for jobs under the prefix.
        self.rule = events.Rule(
            self,
            "Rule",
            description=f"Rule verdicts of training jobs {self.job_name_prefix}*",
            event_pattern=events.EventPattern(
                source=[SAGEMAKER_SOURCE, EVENT_SOURCE],
                detail_type=[SAGEMAKER_DETAIL_TYPE, EVALUATOR_DETAIL_TYPE],
                detail={"TrainingJobName": [{"prefix": self.job_name_prefix}]},
            ),
            targets=[target],
        )
        #: Every minute: re-checks the watched jobs (verdicts without an event, and recovery after failures).
        self.sweep_rule = events.Rule(
            self,
            "Sweep",
            description=f"Re-check rule verdicts of running training jobs {self.job_name_prefix}*",
            schedule=events.Schedule.rate(cdk.Duration.minutes(1)),
            targets=[target],
        )

        # -- alarms ------------------------------------------------------------------------------------------------
        #: In alarm when any event is waiting in the dead-letter queue (a verdict may not have been reported).
        self.dead_letter_alarm = cloudwatch.Alarm(
            self,
            "DeadLetterAlarm",
            alarm_description=f"Rule alarm events for {self.job_name_prefix}* failed after retries; inspect and "
            "redrive the dead-letter queue.",
            metric=self.dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=cdk.Duration.minutes(1), statistic="Maximum"
            ),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        #: In alarm when the handler failed in the last five minutes (it is retried; persistent failures dead-letter).
        self.errors_alarm = cloudwatch.Alarm(
            self,
            "ErrorsAlarm",
            alarm_description=f"The rule alarm handler for {self.job_name_prefix}* is failing; see its log group.",
            metric=self.handler.metric_errors(period=cdk.Duration.minutes(5), statistic="Sum"),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        #: Where the two alarms above notify on ALARM and OK (None: no actions, unless a TrainingDashboard adds its own).
        self.ops_topic = ops_topic
        self._add_ops_actions(ops_actions)

    # ------------------------------------------------------------------------------------------------------------------
    def add_email_subscriber(self, address: str) -> RuleAlarm:
        """Send the notifications to one more e-mail address (the recipient must confirm the subscription)."""
        endpoint = Email(address).endpoint
        _add_unique(self._emails, endpoint, where=self.node.path, field="actions")
        self.topic.add_subscription(subscriptions.EmailSubscription(endpoint))
        return self

    def add_sms_subscriber(self, phone_number: str) -> RuleAlarm:
        """Send the short notification to one more phone number (E.164, for example ``+15555550100``)."""
        endpoint = SMS(phone_number).endpoint
        _add_unique(self._phone_numbers, endpoint, where=self.node.path, field="actions")
        self.topic.add_subscription(subscriptions.SmsSubscription(endpoint))
        return self

    def on_transition(
        self, id: str, *, target: events.IRuleTarget | None = None, description: str | None = None
    ) -> events.Rule:
        """An EventBridge rule receiving one "Rule Alarm Transition" event per transition this alarm reports.

        Same filtering as the notifications (job prefix, statuses, rule names), already de-duplicated. The detail
        carries TrainingJobName, TrainingJobArn, TrainingJobStatus, RuleConfigurationName, RuleEvaluationStatus,
        StatusDetails, LastModifiedTime, ConsoleUrl, RuleReportS3Uri and StopOutcome.
        """
        detail: dict[str, Any] = {
            "AlarmId": [self.alarm_id],
            "TrainingJobName": [{"prefix": self.job_name_prefix}],
            "RuleEvaluationStatus": list(self.statuses),
        }
        if self.rule_names is not None:
            detail["RuleConfigurationName"] = list(self.rule_names)
        rule = events.Rule(
            self,
            id,
            description=description or f"Rule verdicts reported by {self.alarm_id}",
            event_pattern=events.EventPattern(
                source=[EVENT_SOURCE], detail_type=[TRANSITION_DETAIL_TYPE], detail=detail
            ),
        )
        if target is not None:
            rule.add_target(target)
        return rule

    def metric_errors(self, **options: Any) -> cloudwatch.Metric:
        """Failed handler invocations."""
        return self.handler.metric_errors(**options)

    def metric_dead_letters(self, **options: Any) -> cloudwatch.Metric:
        """Events waiting in the dead-letter queue."""
        return self.dead_letter_queue.metric_approximate_number_of_messages_visible(**options)

    def grant_publish(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow ``grantee`` to publish to the alarm's topic (and use its key)."""
        return self.topic.grant_publish(grantee)

    # ------------------------------------------------------------------------------------------------------------------
    def _add_ops_actions(self, actions: AlarmActions) -> None:
        if actions:
            actions.allow_publishing(self)  # the topic's policy (and its key's) must admit this account's alarms
            actions.apply(self.dead_letter_alarm)
            actions.apply(self.errors_alarm)

    def _grant_handler_permissions(self) -> None:
        stack = cdk.Stack.of(self)
        role = self.role

        def job_arns(prefix: str) -> list[str]:
            # SageMaker writes job ARNs in lower case; both spellings keep a mixed-case prefix working
            spellings = [prefix] if cdk.Token.is_unresolved(prefix) else [prefix, prefix.lower()]
            names = list(dict.fromkeys(f"{spelling}*" for spelling in spellings))
            return [stack.format_arn(service="sagemaker", resource="training-job", resource_name=n) for n in names]

        scoped: dict[str, list[str]] = {}  # job ARN pattern -> the SageMaker actions allowed on it
        describe_arns = job_arns(self.job_name_prefix)
        role.add_to_policy(iam.PolicyStatement(actions=["sagemaker:DescribeTrainingJob"], resources=describe_arns))
        for arn in describe_arns:
            scoped.setdefault(arn, []).append("DescribeTrainingJob")
        if self.stop_prefix is not None:
            stop_arns = job_arns(self.stop_prefix)
            role.add_to_policy(iam.PolicyStatement(actions=["sagemaker:StopTrainingJob"], resources=stop_arns))
            for arn in stop_arns:
                scoped.setdefault(arn, []).append("StopTrainingJob")
        wildcard_reasons = {
            f"Resource::{arn}": f"{' and '.join(actions)} on the jobs under the alarm's job-name prefix only; job "
            "names end in a run-specific suffix, so the prefix is as narrow as the names allow (the handler checks "
            "the prefix too)."
            for arn, actions in scoped.items()
        }
        self.table.grant(
            role, "dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Query"
        )
        self.topic.grant_publish(role)
        events.EventBus.from_event_bus_name(self, "DefaultBus", "default").grant_put_events_to(role)
        self.log_group.grant_write(role)
        wildcard_reasons["Action::kms:GenerateDataKey*"] = (
            "Publishing to the KMS-encrypted topic needs data keys from the topic key (the grant CDK makes for "
            "SNS publishers)."
        )
        acknowledge_wildcards(role, wildcard_reasons)


def _check_prefix(prefix: object, *, where: str, field: str) -> str:
    if not isinstance(prefix, str):
        raise ConfigurationTypeError(
            f"expected a job-name prefix string such as 'resnet-exp-', got {type(prefix).__name__} {prefix!r}.",
            where=where,
            field=field,
            value=prefix,
        )
    if is_token(prefix) or cdk.Token.is_unresolved(prefix):
        return prefix
    bad = sorted(set(prefix) - _JOB_NAME_CHARACTERS)
    if not prefix or bad or not prefix[0].isalnum() or len(prefix) > _MAX_JOB_NAME:
        raise ConfigurationError(
            f"must be 1-{_MAX_JOB_NAME} letters, digits and hyphens starting with a letter or digit (training job "
            f"names allow nothing else), got {prefix!r}" + (f" with {''.join(bad)!r}" if bad else "") + ".",
            where=where,
            field=field,
            value=prefix,
        )
    return prefix


def _check_statuses(statuses: object, *, where: str) -> tuple[str, ...]:
    if isinstance(statuses, str) or not isinstance(statuses, Iterable):
        raise ConfigurationTypeError(
            f"expected a list of statuses such as ['IssuesFound', 'Error'], got {statuses!r}.",
            where=where,
            field="statuses",
            value=statuses,
        )
    result: list[str] = []
    for status in statuses:
        if status not in ALARM_STATUSES:
            raise ConfigurationError(
                f"{status!r} is not a rule verdict; use one of {', '.join(ALARM_STATUSES)}."
                + did_you_mean(str(status), ALARM_STATUSES),
                where=where,
                field="statuses",
                value=status,
            )
        if status not in result:
            result.append(status)
    if not result:
        raise ConfigurationError(
            "must name at least one status, for example ['IssuesFound'].", where=where, field="statuses"
        )
    return tuple(result)


def _check_rule_names(
    rule_names: object, training_job: ProfiledTrainingJob | None, *, where: str
) -> tuple[str, ...] | None:
    if rule_names is None:
        return None
    if isinstance(rule_names, str) or not isinstance(rule_names, Iterable):
        raise ConfigurationTypeError(
            f"expected a list of rule configuration names, or None for every rule, got {rule_names!r}.",
            where=where,
            field="rule_names",
            value=rule_names,
        )
    names = list(rule_names)
    if not names:
        raise ConfigurationError(
            "is empty, which would match no rule; pass None for every rule of the job.", where=where, field="rule_names"
        )
    known = _job_rule_names(training_job) if training_job is not None else None
    for name in names:
        if not isinstance(name, str) or not 1 <= len(name) <= 256:
            raise ConfigurationTypeError(
                f"rule names are 1-256 character strings, got {name!r}.", where=where, field="rule_names", value=name
            )
        if known is not None and not is_token(name) and name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise ConfigurationError(
                f"{name!r} is not a rule of the training job (its rules: {listed})." + did_you_mean(name, known),
                where=where,
                field="rule_names",
                value=name,
            )
    return tuple(dict.fromkeys(names))


def _job_rule_names(training_job: ProfiledTrainingJob) -> set[str]:
    names = {rule.name for rule in training_job.rule_set.rules} if training_job.rule_set is not None else set()
    names |= {rule.name for rule in training_job.debugger_rules}
    return {name for name in names if isinstance(name, str)}


def _split_actions(
    actions: object, *, where: str, emails: list[str], phone_numbers: list[str]
) -> StopTraining | None:
    if isinstance(actions, Action):
        actions = [actions]
    if isinstance(actions, str) or not isinstance(actions, Iterable):
        raise ConfigurationTypeError(
            f"expected a list of Email(...), SMS(...) and StopTraining(...), got {actions!r}.",
            where=where,
            field="actions",
            value=actions,
        )
    stop: StopTraining | None = None
    for position, action in enumerate(actions):
        if isinstance(action, Email):
            _add_unique(emails, action.endpoint, where=where, field="actions")
        elif isinstance(action, SMS):
            _add_unique(phone_numbers, action.endpoint, where=where, field="actions")
        elif isinstance(action, StopTraining):
            if stop is not None:
                raise ConfigurationError(
                    "has more than one StopTraining; give one (its prefix, or none for the watched prefix).",
                    where=where,
                    field="actions",
                )
            stop = action
        else:
            hint = " Build it with Email('team@example.com')." if isinstance(action, str) and "@" in action else ""
            raise ConfigurationTypeError(
                f"item {position} is {type(action).__name__} {action!r}; expected Email(...), SMS(...) or "
                f"StopTraining(...).{hint}",
                where=where,
                field="actions",
                value=action,
            )
    return stop


def _add_unique(values: list[str], value: str, *, where: str, field: str) -> None:
    if value in values:
        raise ConfigurationError(f"{value!r} is given twice.", where=where, field=field, value=value)
    values.append(value)


def _stop_prefix(stop: StopTraining, watched: str, *, where: str) -> str:
    """StopTraining acts only where both prefixes agree: the longer one, if one extends the other."""
    own = stop.training_job_prefix
    if own is None or own == watched:
        return watched
    if is_token(own) or is_token(watched):
        raise ConfigurationError(
            "StopTraining(training_job_prefix=...) cannot be combined with a prefix known only at deploy time; use "
            "StopTraining() to stop under the watched prefix.",
            where=where,
            field="actions",
        )
    if own.startswith(watched):
        return own
    if watched.startswith(own):
        return watched
    raise ConfigurationError(
        f"StopTraining prefix {own!r} and the watched prefix {watched!r} share no job; StopTraining could never "
        "act. Use StopTraining() or a prefix that starts with the watched one.",
        where=where,
        field="actions",
        value=own,
    )
