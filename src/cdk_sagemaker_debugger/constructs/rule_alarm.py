"""RuleAlarm: one e-mail/SMS notification, and optionally one StopTrainingJob, per rule verdict of a training job."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any, cast

import aws_cdk as cdk
import jsii
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from ..model.actions import SMS, Action, ActionList, Email, StopTraining
from ..model.contract import EVENT_SOURCE, TRANSITION_DETAIL_TYPE, AlarmEnvironment
from ..model.contract import STATUS_CHANGE_DETAIL_TYPE as EVALUATOR_DETAIL_TYPE
from ..model.errors import ConfigurationError, ConfigurationTypeError, did_you_mean
from ..model.parameters import is_token
from ._alarm_actions import AlarmActions, own_ops_topic
from ._cdk.checks import check_kind, check_log_retention, check_reserved_concurrency, whole_seconds
from ._cdk.compliance import acknowledge_compliance
from ._cdk.lambda_function import runtime_function
from ._cdk.layout import EVALUATOR_REPORT_FOLDER, EVALUATOR_SUMMARY_FILE
from ._cdk.nag import acknowledge, acknowledge_wildcards
from ._removed_props import names_removed_props
from ._verdict_listening import listening_bus, require_heard_evaluators
from .alarm_coverage import check_coverage
from .event_bus import allow_verdict_publisher, verdict_bus
from .family import JobOrigin, TrainingJobs, check_training_jobs

__all__ = ["RuleAlarm", "ALARM_STATUSES"]

#: Verdicts a RuleAlarm can report. StopTraining acts on IssuesFound only.
ALARM_STATUSES = ("IssuesFound", "Error", "NoIssuesFound", "Stopped")
_HANDLER_TIMEOUT = cdk.Duration.minutes(2)
#: Notifications per training job at most: a bound on what a stream of verdicts can send.
DEFAULT_MAX_MESSAGES_PER_JOB = 25
#: Concurrent handler runs at most (the ledger keeps them from acting twice; throttled events are retried).
DEFAULT_RESERVED_CONCURRENCY = 5


@names_removed_props
class RuleAlarm(Construct):
    """Notifies by e-mail and SMS, and optionally stops training, when a rule of a training job reaches a verdict.

    Every ``(job, rule, status)`` transition is acted on exactly once: SageMaker's repeated and duplicated state-change
    events, replays and concurrent invocations are filtered by a conditional write in a DynamoDB ledger. The handler
    reads rule statuses with DescribeTrainingJob (state-change events are not guaranteed to carry them) and a sweep
    every minute re-checks the watched jobs, so a verdict that arrives after the job ended, or without an event, is
    reported within two minutes. Verdicts of the :class:`cdk_sagemaker_debugger.RuleEvaluator` come from the stack's verdict bus, where only
    evaluator functions may publish, and are acted on only when the evaluator's report says the same.

    Before it stops or notifies, the handler checks that the job belongs to the family (:class:`cdk_sagemaker_debugger.TrainingJobs`: its name,
    and for tag and pipeline families its tags) and runs as the family's execution role (the training job's role, or
    the factory's ``execution_role=``), so a job that only borrows the name is ignored; and it
    sends at most ``max_messages_per_job`` notifications per job. See docs/rule-alarm.md, "Trust model".

    Example::

        alarm = RuleAlarm(stack, "Alarm", training_jobs=job.training_jobs,
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
        training_jobs: TrainingJobs,
        actions: Sequence[Action] | ActionList = (),
        statuses: Sequence[str] = ("IssuesFound",),
        rule_names: Sequence[str] | None = None,
        topic_key: kms.IKey | None = None,
        transition_retention: cdk.Duration | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.THREE_MONTHS,
        max_messages_per_job: int = DEFAULT_MAX_MESSAGES_PER_JOB,
        reserved_concurrency: int | None = DEFAULT_RESERVED_CONCURRENCY,
        ops_topic: sns.ITopic | None = None,
    ) -> None:
        """
        Args:
            training_jobs: the jobs watched (``job.training_jobs``, or ``TrainingJobs.from_job_name_prefix / from_tag /
                from_pipeline``); their ``execution_role``, when known, must be the role a job runs as. Required.
            actions: ``Email(...)``, ``SMS(...)`` and at most one ``StopTraining(...)``. Default: none (events only).
            statuses: the verdicts acted on, of ``ALARM_STATUSES``. Default: ``("IssuesFound",)``.
            rule_names: only these rule configuration names. Default: None, every rule.
            topic_key: the KMS key of the notification topic. Default: a new key with rotation.
            transition_retention: how long the ledger remembers a transition (at least a day). Default: 90 days.
            log_retention: retention of the handler's log group. Default: three months.
            max_messages_per_job: notifications per training job at most (1-1000). Default: 25.
            reserved_concurrency: concurrent handler runs at most (None: no reservation). Default: 5.
            ops_topic: where the alarm's two CloudWatch alarms notify on ALARM and OK. Default: a topic of its own
                (``ops_topic``, no subscriber yet), encrypted with the topic key (its own key when ``topic_key`` is given).
        """
        super().__init__(scope, id)
        where = self.node.path
        AlarmActions.checked(ops_topic, where=where)
        self._use_family(training_jobs, rule_names, where)
        self.statuses: tuple[str, ...] = _check_statuses(statuses, where=where)
        self._use_actions(actions, where)
        #: How long the ledger remembers a transition (whole days).
        self.transition_retention_days: int = _retention_days(transition_retention, where=where)
        #: At most this many notifications per training job; later verdicts of the job are recorded but not sent.
        self.max_messages_per_job: int = _check_message_cap(max_messages_per_job, where=where)
        reserved_concurrency = check_reserved_concurrency(reserved_concurrency, where=where)
        check_kind(topic_key, "key_arn", where=where, field="topic_key", expected="a kms.IKey")
        check_log_retention(log_retention, where=where)
        #: Identifies this alarm in its "Rule Alarm Transition" events.
        self.alarm_id: str = self.node.path
        self._warn_about_weaker_trust()
        self._create_topic(topic_key)
        self._create_table()
        self._create_handler(log_retention, reserved_concurrency)
        self._grant_handler_permissions()
        self._create_rules()
        require_heard_evaluators(self)
        self._create_alarms()
        self._notify_ops_topic(ops_topic, topic_key)
        acknowledge_compliance(self, "RuleAlarm")

    def _notify_ops_topic(self, ops_topic: sns.ITopic | None, topic_key: kms.IKey | None) -> None:
        #: True when the alarm created its ops topic (no ``ops_topic=``); a TrainingDashboard then adds its actions.
        self.ops_topic_created: bool = ops_topic is None
        #: Where the two alarms notify on ALARM and OK: the ``ops_topic`` given, or the alarm's own.
        self.ops_topic: sns.ITopic = ops_topic or own_ops_topic(self, None if topic_key else self.topic_key)
        AlarmActions(self.ops_topic).apply(self.dead_letter_alarm, self.errors_alarm)  # admitted there, no others

    def _use_family(self, training_jobs: TrainingJobs, rule_names: Sequence[str] | None, where: str) -> None:
        #: The jobs watched, and where they write.
        self.training_jobs = check_training_jobs(training_jobs, where=where)
        self.training_jobs.check_region(self, what="The RuleAlarm")
        check_coverage(self)
        #: The ProfiledTrainingJob of the family, when it is one's (its rules are the known rule names).
        #: What the ProfiledTrainingJob of the family tells about its runs (``job.training_jobs.origin``), or None.
        self.origin: JobOrigin | None = self.training_jobs.origin
        self.job_name_prefix: str = self.training_jobs.job_name_prefix
        #: The role the watched jobs must run as, when the family has exactly one; None otherwise (see
        #: ``training_jobs.execution_roles``, which the function checks through the family).
        self.execution_role: iam.IRole | None = self.training_jobs.execution_role
        #: Where RuleAlarm re-reads RuleEvaluator reports.
        self.output_bucket: s3.IBucket = self.training_jobs.output_bucket
        self.rule_names: tuple[str, ...] | None = _check_rule_names(rule_names, self.origin, where=where)

    def _use_actions(self, actions: Sequence[Action] | ActionList, where: str) -> None:
        self._emails: list[Email] = []
        self._phone_numbers: list[SMS] = []
        stop = _split_actions(actions, where=where, emails=self._emails, phone_numbers=self._phone_numbers)
        #: The prefix StopTraining may stop (None without StopTraining; "" for any job of a tag family): the narrower
        #: of its prefix and the family's.
        self.stop_prefix: str | None = None
        if stop is not None:
            self.stop_prefix = _stop_prefix(stop, self.job_name_prefix, where=where)

    def _warn_about_weaker_trust(self) -> None:
        if self.origin is None and not self.training_jobs.execution_roles:
            cdk.Annotations.of(self).add_warning_v2(
                "cdk-sagemaker-debugger:ruleAlarmTrustsPrefix",
                f"The alarm acts on every one of the {self.training_jobs.label}: anyone who can create such a job can "
                "make it notify (and StopTraining stops any such job). Pass execution_role= to the TrainingJobs "
                "factory (the role the jobs run as) so that only jobs running as that role are acted on.",
            )

    def _create_topic(self, topic_key: kms.IKey | None) -> None:
        self.topic_key: kms.IKey = topic_key or kms.Key(
            self,
            "TopicKey",
            enable_key_rotation=True,
            description=f"Encrypts the rule alarm notifications for {self.training_jobs.label}",
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
        #: Notifications SNS could not deliver to a subscriber (a redrive policy on every subscription).
        self._sms_redrive_allowed = False
        self.subscription_dead_letter_queue = sqs.Queue(
            self, "SubscriptionDeadLetterQueue", encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True,
            retention_period=cdk.Duration.days(14))
        acknowledge(self.subscription_dead_letter_queue, {"AwsSolutions::AwsSolutions-SQS3": (
            "This queue is the dead-letter queue of the topic's subscriptions (their SNS redrive policy), which the "
            "rule recognises only for SQS redrive; a dead-letter queue needs no dead-letter queue of its own.")})
        for email in self._emails:
            self._subscribe(subscriptions.EmailSubscription, email.endpoint)
        for sms in self._phone_numbers:
            self._subscribe(subscriptions.SmsSubscription, sms.endpoint)

    def _subscribe(self, kind: Any, endpoint: str) -> sns.Subscription:
        queue = self.subscription_dead_letter_queue
        subscription = self.topic.add_subscription(kind(endpoint, dead_letter_queue=queue))
        cfn = cast(sns.CfnSubscription, subscription.node.default_child)
        if cfn.redrive_policy is None:  # SmsSubscription drops dead_letter_queue: set it as CDK does for the others
            cfn.redrive_policy = {"deadLetterTargetArn": queue.queue_arn}
            if not self._sms_redrive_allowed:
                self._sms_redrive_allowed = True
                queue.add_to_resource_policy(iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("sns.amazonaws.com")], actions=["sqs:SendMessage"],
                    resources=[queue.queue_arn], conditions={"ArnEquals": {"aws:SourceArn": self.topic.topic_arn}}))
        return subscription

    def _create_table(self) -> None:
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

    def _environment(self) -> dict[str, str]:
        env = AlarmEnvironment
        environment = {
            env.TABLE_NAME: self.table.table_name,
            env.TOPIC_ARN: self.topic.topic_arn,
            **self.training_jobs.environment,
            env.ALARM_ID: self.alarm_id,
            env.STATUSES: json.dumps(list(self.statuses)),
            env.EVENT_BUS_NAME: verdict_bus(self).event_bus_name,  # "Rule Alarm Transition" events
            env.TRANSITION_TTL_DAYS: str(self.transition_retention_days),
            env.ACCOUNT_ID: cdk.Aws.ACCOUNT_ID,
            env.MAX_MESSAGES_PER_JOB: str(self.max_messages_per_job),
        }
        if self.rule_names is not None:
            environment[env.RULE_NAMES] = json.dumps(list(self.rule_names))
        elif self.origin is not None:
            # rules added to the job's rule set later count too: the list is written when the template is
            environment[env.KNOWN_RULES] = cdk.Lazy.string(_JobRuleNames(self.origin))
        if self.stop_prefix is not None:
            environment[env.STOP] = "true"
            environment[env.STOP_PREFIX] = self.stop_prefix
        return environment

    def _create_handler(self, log_retention: logs.RetentionDays, reserved_concurrency: int | None) -> None:
        runtime = runtime_function(
            self,
            "Handler",
            package="rule_alarm",
            handler="handler.handler",
            description=f"Notifies (and stops) {self.training_jobs.label} once per rule verdict",
            role_description=f"Rule alarm handler for {self.training_jobs.label}",
            environment=self._environment(),
            memory_size=256,
            timeout=_HANDLER_TIMEOUT,
            log_retention=log_retention,
            max_event_age=cdk.Duration.hours(6),
            reserved_concurrency=reserved_concurrency,
        )
        #: Events the handler could not take after its retries, and failed deliveries of the EventBridge rules.
        self.dead_letter_queue = runtime.dead_letter_queue
        self.log_group = runtime.log_group
        self.role = runtime.role
        self.handler = runtime.function
        #: The same function as :attr:`handler`, under the name RuleEvaluator and TrainingDashboard use.
        self.function = runtime.function

    def _create_rules(self) -> None:
        target = targets.LambdaFunction(self.handler, dead_letter_queue=self.dead_letter_queue)
        #: SageMaker's state changes for jobs under the prefix (default event bus, this account only).
        jobs = self.training_jobs
        self.rule = events.Rule(self, "Rule", description=f"Rule verdicts of {jobs.label}",
                                event_pattern=jobs.event_pattern(account=cdk.Aws.ACCOUNT_ID), targets=[target])
        #: The verdict bus listened on: the one of the family's evaluator's stack (see docs/rule-alarm.md).
        self.verdict_bus: events.IEventBus = listening_bus(self, jobs)
        #: The RuleEvaluator's verdicts for the family's jobs, from :attr:`verdict_bus`.
        self.verdict_rule = events.Rule(
            self,
            "Verdicts",
            event_bus=self.verdict_bus,
            description=f"RuleEvaluator verdicts of {jobs.label}",
            event_pattern=events.EventPattern(source=[EVENT_SOURCE], detail_type=[EVALUATOR_DETAIL_TYPE],
                                              account=[cdk.Aws.ACCOUNT_ID], detail=jobs.name_filter() or None),
            targets=[target],
        )
        #: Every minute: re-checks the watched jobs (verdicts without an event, and recovery after failures).
        self.sweep_rule = events.Rule(
            self,
            "Sweep",
            description=f"Re-check rule verdicts of running {self.training_jobs.label}",
            schedule=events.Schedule.rate(cdk.Duration.minutes(1)),
            targets=[target],
        )

    def _create_alarms(self) -> None:
        #: In alarm when any event is waiting in the dead-letter queue (a verdict may not have been reported).
        self.dead_letter_alarm = cloudwatch.Alarm(
            self,
            "DeadLetterAlarm",
            alarm_description=f"Rule alarm events for {self.training_jobs.label} failed after retries; inspect and "
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
            alarm_description=f"The rule alarm handler for {self.training_jobs.label} is failing; see its log group.",
            metric=self.handler.metric_errors(period=cdk.Duration.minutes(5), statistic="Sum"),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    # ------------------------------------------------------------------------------------------------------------------
    def add_email_subscriber(self, address: str) -> sns.Subscription:
        """Send the notifications to one more e-mail address (the recipient must confirm the subscription); returns
        the subscription."""
        email = Email(address)
        _add_unique(self._emails, email, where=self.node.path, field="actions")
        return self._subscribe(subscriptions.EmailSubscription, email.endpoint)

    def add_sms_subscriber(self, phone_number: str) -> sns.Subscription:
        """Send the short notification to one more phone number (E.164, for example ``+15555550100``); returns the
        subscription."""
        sms = SMS(phone_number)
        _add_unique(self._phone_numbers, sms, where=self.node.path, field="actions")
        return self._subscribe(subscriptions.SmsSubscription, sms.endpoint)

    def on_transition(
        self, id: str, *, target: events.IRuleTarget | None = None, description: str | None = None
    ) -> events.Rule:
        """An EventBridge rule on the stack's verdict bus receiving one "Rule Alarm Transition" event per transition
        this alarm reports (only the library's functions may publish on that bus, so the events cannot be forged).

        Same filtering as the notifications (job prefix, statuses, rule names), already de-duplicated. The detail
        carries TrainingJobName, TrainingJobArn, TrainingJobStatus, RuleConfigurationName, RuleEvaluationStatus,
        StatusDetails, LastModifiedTime, ConsoleUrl, RuleReportS3Uri and StopOutcome.
        """
        detail: dict[str, Any] = {
            "AlarmId": [self.alarm_id],
            **self.training_jobs.name_filter(),
            "RuleEvaluationStatus": list(self.statuses),
        }
        if self.rule_names is not None:
            detail["RuleConfigurationName"] = list(self.rule_names)
        rule = events.Rule(
            self,
            id,
            event_bus=verdict_bus(self),
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
    def _grant_handler_permissions(self) -> None:
        role, jobs = self.role, self.training_jobs
        statements = jobs.describe_statements()
        if self.stop_prefix is not None:
            statements.append(jobs.statement("sagemaker:StopTrainingJob", prefix=self.stop_prefix))
        for statement in statements:
            role.add_to_policy(statement)
        what = "the jobs of the alarm's family only; job names end in a run-specific suffix, so the pattern is as "\
            "narrow as the names allow (tag and pipeline families add their tag condition; the handler checks too)."
        wildcard_reasons = {f"Resource::{arn}": f"{', '.join(a.split(':')[1] for a in s.actions)} on {what}"
                            for s in statements for arn in s.resources}
        wildcard_reasons.update(self._grant_report_reads())
        self.table.grant(
            role, "dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Query"
        )
        self.topic.grant_publish(role)
        allow_verdict_publisher(self, role)  # its transitions go on the stack's verdict bus, where only we publish
        self.log_group.grant_write(role)
        wildcard_reasons["Action::kms:GenerateDataKey*"] = (
            "Publishing to the KMS-encrypted topic needs data keys from the topic key (the grant CDK makes for "
            "SNS publishers)."
        )
        # on the role's default policy alone: a statement a user adds to the role later is still reported
        acknowledge_wildcards(role.node.find_child("DefaultPolicy"), wildcard_reasons)

    def _grant_report_reads(self) -> dict[str, str]:
        """Read the evaluator's summary objects, to check a verdict against what the evaluator wrote."""
        bucket = self.output_bucket
        summaries = bucket.arn_for_objects(self.training_jobs.output_key_pattern(
            f"rule-output/*/{EVALUATOR_REPORT_FOLDER}/{EVALUATOR_SUMMARY_FILE}"))
        self.role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[summaries]))
        if bucket.encryption_key is not None:
            bucket.encryption_key.grant_decrypt(self.role)
        return {f"Resource::{summaries}": "Reads only the RuleEvaluator's evaluation-summary.json of the watched jobs, "
                "whose names are known at run time, to confirm each verdict before acting on it."}


def _retention_days(transition_retention: cdk.Duration | None, *, where: str) -> int:
    retention = transition_retention or cdk.Duration.days(90)
    seconds = whole_seconds(retention, where=where, field="transition_retention")
    if is_token(seconds):
        raise ConfigurationError("must be known at synth (the ledger's expiry is computed from it), got a "
                                 "deploy-time value.", where=where, field="transition_retention")
    if seconds < 86400:  # type: ignore[operator]
        raise ConfigurationError(
            "must be at least one day: a transition is remembered that long, and a verdict reported again after "
            f"it is forgotten is notified again. Got {retention.to_human_string()}.",
            where=where,
            field="transition_retention",
        )
    return math.ceil(seconds / 86400)  # type: ignore[operator]


def _check_message_cap(value: object, *, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationTypeError(f"expected a whole number of messages, got {type(value).__name__} {value!r}.",
                                     where=where, field="max_messages_per_job", value=value)
    if not 1 <= value <= 1000:
        raise ConfigurationError(f"must be between 1 and 1000 messages per training job, got {value}.", where=where,
                                 field="max_messages_per_job", value=value)
    return value


@jsii.implements(cdk.IStableStringProducer)
class _JobRuleNames:
    """The rule configuration names of a training job, as JSON, when the template is written (rules added later count)."""

    def __init__(self, origin: JobOrigin) -> None:
        self._origin = origin

    def produce(self) -> str:
        return json.dumps(sorted(self._origin.rule_names()))


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
    rule_names: object, origin: JobOrigin | None, *, where: str
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
    known = origin.rule_names() if origin is not None else None
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


def _split_actions(
    actions: object, *, where: str, emails: list[Email], phone_numbers: list[SMS]
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
            _add_unique(emails, action, where=where, field="actions")
        elif isinstance(action, SMS):
            _add_unique(phone_numbers, action, where=where, field="actions")
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


def _add_unique(values: list[Any], value: Email | SMS, *, where: str, field: str) -> None:
    """One subscription per subscriber, as SNS tells them apart (e-mail domains case-insensitively)."""
    for known in values:
        if known.subscriber == value.subscriber:
            same = "is given twice" if known.endpoint == value.endpoint else (
                f"is the same subscriber as {known.endpoint!r} (SNS compares e-mail domains case-insensitively, so it "
                "would get every notification twice); give it once")
            raise ConfigurationError(f"{value.endpoint!r} {same}.", where=where, field=field, value=value.endpoint)
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
