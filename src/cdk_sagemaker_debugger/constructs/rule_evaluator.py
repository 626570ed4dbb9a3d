"""RuleEvaluator: evaluate the profiler rules in a Lambda function, with or without SageMaker Debugger."""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda_event_sources as lambda_events
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from ..model.contract import CONTINUATION_DETAIL_TYPE as CONTINUATION
from ..model.contract import DEFAULT_NAMESPACE, EVENT_SOURCE, EvaluatorEnvironment
from ..model.contract import RULE_ISSUES_FOUND_METRIC as METRIC_NAME
from ..model.contract import STATUS_CHANGE_DETAIL_TYPE as STATUS_CHANGE
from ..model.errors import ConfigurationError, ConfigurationTypeError
from ..model.evaluator_tensor_rules import is_evaluator_tensor_rule
from ..model.health_rules import is_health_rule
from ..model.metric_rules import is_metric_rule
from ..model.parameters import is_token
from ..model.profiler_catalog import PROFILER_REPORT, PROFILER_RULE_SPECS
from ..model.profiler_rules import ProfilerReport, ProfilerRule
from ._cdk.checks import check_kind, check_log_retention, check_reserved_concurrency, whole_seconds
from ._cdk.compliance import acknowledge_compliance
from ._cdk.lambda_function import runtime_function
from ._cdk.layout import EVALUATOR_REPORT_FOLDER, EVALUATOR_STATE_FILE, EVALUATOR_STATE_TAG
from ._cdk.lazy import LazyPath, lazy_string, remember_path
from ._cdk.nag import KMS_KEY_FINDINGS, acknowledge_wildcards
from ._removed_props import names_removed_props
from .evaluator_mlflow import EvaluatorMlflow
from .event_bus import allow_verdict_publisher, verdict_bus
from .family import JobOrigin, TrainingJobs, check_training_jobs
from .output_locations import claim_output_location, guard_evaluator_keys
from .rule_set import ProfilerRuleSet

# Chosen from benchmarks/evaluator.py: 1,769 MB is one full vCPU (a 60-minute, 8-GPU node evaluates well inside the
# timeout and peaks far below the memory); longer catch-up runs continue through continuation events.
DEFAULT_MEMORY_MB = 1769
DEFAULT_TIMEOUT = cdk.Duration.minutes(5)
#: Lambda's limit; and at least a minute, of which the evaluator keeps 30 s to commit its state.
MAX_TIMEOUT_SECONDS = 900
MIN_TIMEOUT_SECONDS = 60
#: Concurrent runs at most: the schedule's run, final runs of jobs that just ended, and continuations.
DEFAULT_RESERVED_CONCURRENCY = 5
#: How long superseded versions of the evaluator's state and lease objects are kept in a versioned bucket (each job
#: writes them several times a minute; only the current version is ever read).
STATE_NONCURRENT_DAYS = 1


class MetricsSource(enum.Enum):
    """Where the evaluator reads the job's metrics."""

    #: Profiler output in S3 when the job writes it, otherwise CloudWatch (after five minutes without profiler output).
    AUTO = "AUTO"
    #: Only the profiler output (system metrics and framework traces in S3): every rule, same verdicts as Debugger.
    PROFILER = "PROFILER"
    #: Only SageMaker's CloudWatch instance metrics: works without Debugger, for the rules CloudWatch can support.
    CLOUDWATCH = "CLOUDWATCH"


def _configs(rules: Sequence[ProfilerRule], where: str) -> list[dict[str, Any]]:
    configs = []
    for rule in rules:
        if not isinstance(rule, ProfilerRule):
            raise ConfigurationTypeError(f"expected profiler rules, got {type(rule).__name__}.", where=where,
                                         field="rules", value=rule)
        builtin = rule.rule_to_invoke == PROFILER_REPORT or rule.rule_to_invoke in PROFILER_RULE_SPECS \
            or is_health_rule(rule)
        if not builtin and not is_metric_rule(rule) and not is_evaluator_tensor_rule(rule):  # model/metric_rules.py,
            # model/evaluator_tensor_rules.py
            raise ConfigurationError(
                f"rule {rule.name!r} runs {rule.rule_to_invoke!r}, which is not a built-in profiler rule; the evaluator "
                "implements the built-in rules only. Run custom rules on Debugger (rule_engine=RuleEngine.DEBUGGER) "
                "or pass rules= without them.",
                where=where, field="rules", value=rule.name)
        configs.append({"configuration_name": rule.name, "rule_to_invoke": rule.rule_to_invoke,
                        "parameters": {k: v for k, v in rule.parameters.items()}})
    return configs


def _check_kinds(where: str, *, event_bus: object, log_retention: object, metric_namespace: object) -> None:
    check_kind(event_bus, "event_bus_name", where=where, field="event_bus",
               expected="an events.IEventBus (or leave it unset for the stack's verdict bus)")
    check_log_retention(log_retention, where=where)
    if not is_token(metric_namespace) and (not isinstance(metric_namespace, str) or not 1 <= len(metric_namespace) <= 255
                                           or metric_namespace.startswith(("AWS/", ":"))):
        raise ConfigurationError(
            f"must be a CloudWatch namespace of 1-255 characters, not starting with 'AWS/' or ':', got "
            f"{metric_namespace!r}.", where=where, field="metric_namespace", value=metric_namespace)


def _rule_source(rules: ProfilerRuleSet | Sequence[ProfilerRule] | None, origin: JobOrigin | None
                 ) -> ProfilerRuleSet | list[ProfilerRule]:
    """A rule set (read again at synth, so rules added later count) or a fixed list of rules."""
    if rules is None and origin is not None and origin.rule_set is not None:
        return origin.rule_set
    if isinstance(rules, ProfilerRuleSet):
        return rules
    return [ProfilerReport()] if rules is None else list(rules)


@names_removed_props
class RuleEvaluator(Construct):
    """Evaluates profiler rules for a family of training jobs (:class:`cdk_sagemaker_debugger.TrainingJobs`).

    A Python Lambda function (arm64) runs every minute while jobs are InProgress and once more when each job ends. It
    reads only the profiler files it has not read yet (or SageMaker's CloudWatch metrics), keeps rule state in the job's
    output bucket with conditional writes, writes ``profiler-reports/<Rule>.json`` and ``profiler-report.html`` to
    ``<output>/<job>/rule-output/<RuleConfigurationName>/evaluator-output/`` (beside where the managed rule writes
    ``profiler-output/``), publishes every status change to the stack's verdict bus (source ``cdk-sagemaker-debugger``,
    detail-type ``Profiler Rule Evaluation Status Change``; only evaluator functions may publish there) and one
    embedded-format metric per rule. ``reserved_concurrency`` (default 5, None for none) bounds the concurrent runs.

    Example::

        RuleEvaluator(stack, "Evaluator", training_jobs=job.training_jobs, rules=rule_set, source=MetricsSource.AUTO)
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        training_jobs: TrainingJobs,
        rules: ProfilerRuleSet | Sequence[ProfilerRule] | None = None,
        source: MetricsSource = MetricsSource.AUTO,
        event_bus: events.IEventBus | None = None,
        metric_namespace: str = DEFAULT_NAMESPACE,
        memory_size: int = DEFAULT_MEMORY_MB,
        timeout: cdk.Duration | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.THREE_MONTHS,
        reserved_concurrency: int | None = DEFAULT_RESERVED_CONCURRENCY,
        mlflow: EvaluatorMlflow | None = None,
    ) -> None:
        """
        Args:
            training_jobs: the jobs to evaluate and where they write (``job.training_jobs``, or
                ``TrainingJobs.from_job_name_prefix / from_tag / from_pipeline``). Required.
            rules: the profiler rules (a ProfilerRuleSet is read again at synth, so rules added later count). Default:
                the training job's rule set, else ``[ProfilerReport()]``.
            source: where the metrics are read. Default: ``MetricsSource.AUTO``.
            event_bus: where status changes are published. Default: the stack's verdict bus (RuleAlarm listens there).
            metric_namespace: CloudWatch namespace of the ``RuleIssuesFound`` metric. Default: ``CdkSageMakerDebugger``.
            memory_size: the function's memory in MB (128-10240). Default: 1769 (one vCPU).
            timeout: the function's timeout (60-900 s). Default: 5 minutes.
            log_retention: retention of the function's log group. Default: three months.
            reserved_concurrency: concurrent runs at most (None: no reservation). Default: 5.
            mlflow: write each job's verdicts, metrics and report into the job's own MLflow run (an
                :class:`cdk_sagemaker_debugger.EvaluatorMlflow`). Default: None (no MLflow export).
        """
        super().__init__(scope, id)
        where = remember_path(self, scope, id)  # from the scope's path, asked once per scope
        timeout_seconds = self._check_props(source, memory_size, timeout, where)
        reserved_concurrency = check_reserved_concurrency(reserved_concurrency, where=where)
        _check_kinds(where, event_bus=event_bus, log_retention=log_retention, metric_namespace=metric_namespace)
        #: The jobs evaluated, and where they write.
        self.training_jobs = check_training_jobs(training_jobs, where=where)
        self.training_jobs.check_region(self, what="The RuleEvaluator")
        self._use_rules(rules, where)
        self.source = source
        self.metric_namespace = metric_namespace
        self.event_bus: events.IEventBus = self._bus(event_bus)
        #: One message per job and run (FIFO, grouped by job): each job is evaluated in an invocation of its own.
        self.job_queue = self._create_job_queue(timeout_seconds)
        self._create_function(memory_size, timeout_seconds, log_retention, reserved_concurrency, custom_bus=event_bus)
        self._consume_job_queue(reserved_concurrency)
        self._grant_permissions()
        #: The lifecycle rule that expires superseded versions of the state objects (None when the output bucket is
        #: imported: add :meth:`state_lifecycle_rule` to it yourself).
        self.state_lifecycle = self._expire_state_versions()

        #: The MLflow export's grants (empty without ``mlflow=``).
        self.mlflow_grants = self._bind_mlflow(mlflow)
        self._create_rules()
        acknowledge_compliance(self, "RuleEvaluator")

    def _bind_mlflow(self, mlflow: EvaluatorMlflow | None) -> list[iam.Grant]:
        if mlflow is None:
            return []
        if not isinstance(mlflow, EvaluatorMlflow):
            raise ConfigurationTypeError(f"expected an EvaluatorMlflow, got {type(mlflow).__name__} {mlflow!r}.",
                                         where=self.node.path, field="mlflow", value=mlflow)
        return mlflow._bind(self, self.function, self.role)

    def _use_rules(self, rules: ProfilerRuleSet | Sequence[ProfilerRule] | None, where: str) -> None:
        source_of_rules = _rule_source(rules, self.training_jobs.origin)
        #: The rule set evaluated (its rules are read at synth, so rules added later are evaluated too), or None.
        self.rule_set: ProfilerRuleSet | None = source_of_rules if isinstance(source_of_rules, ProfilerRuleSet) else None
        self._rule_list: Sequence[ProfilerRule] = () if self.rule_set is not None else source_of_rules
        self._where = where
        _ = self.rule_configurations  # refuse bad rules now, not at synth

    def _bus(self, event_bus: events.IEventBus | None) -> events.IEventBus:
        """The bus the evaluator publishes on: the stack's verdict bus, unless event_bus= was given."""
        if event_bus is None:
            return verdict_bus(self)
        cdk.Annotations.of(self).add_warning_v2(
            "cdk-sagemaker-debugger:evaluatorCustomEventBus",
            "The evaluator publishes its status changes to the event bus you passed; RuleAlarm listens on the "
            "stack's verdict bus and will not see them, and whoever that bus's policy lets publish can forge "
            "verdicts and continuation events. Route them with an EventBridge rule on that bus "
            "(on_status_change), or leave event_bus unset.",
        )
        return event_bus

    # -- the family's locations (read by TrainingDashboard and ProfiledTrainingJob) ----------------------------------
    @property
    def job_name_prefix(self) -> str:
        """The start of the evaluated jobs' names ("" for a tag family)."""
        return self.training_jobs.job_name_prefix

    @property
    def output_bucket(self) -> s3.IBucket:
        return self.training_jobs.output_bucket

    @property
    def output_prefix(self) -> str:
        return self.training_jobs.output_prefix

    @property
    def profiler_bucket(self) -> s3.IBucket:
        return self.training_jobs.profiler_bucket

    @property
    def profiler_s3_uri(self) -> str:
        """Where the jobs' profiler files are, unless a job's own ProfilerConfig says otherwise (Debugger jobs)."""
        return self.training_jobs.profiler_s3_uri

    @staticmethod
    def _check_props(source: object, memory_size: object, timeout: object, where: str) -> int:
        if not isinstance(source, MetricsSource):
            raise ConfigurationTypeError(f"expected a MetricsSource such as MetricsSource.AUTO, got {source!r}.",
                                         where=where, field="source", value=source)
        if not is_token(memory_size):
            if isinstance(memory_size, bool) or not isinstance(memory_size, int):
                raise ConfigurationTypeError(f"expected a whole number of MB, got {type(memory_size).__name__} "
                                             f"{memory_size!r}.", where=where, field="memory_size", value=memory_size)
            if not 128 <= memory_size <= 10240:
                raise ConfigurationError(f"must be between 128 and 10240 MB, got {memory_size}.", where=where,
                                         field="memory_size", value=memory_size)
        seconds = whole_seconds(timeout if timeout is not None else DEFAULT_TIMEOUT, where=where, field="timeout",
                                minimum=MIN_TIMEOUT_SECONDS, maximum=MAX_TIMEOUT_SECONDS)
        return seconds  # type: ignore[return-value]

    def _create_function(self, memory_size: int, timeout_seconds: int, log_retention: logs.RetentionDays,
                         reserved_concurrency: int | None, *, custom_bus: events.IEventBus | None) -> None:
        env = EvaluatorEnvironment
        runtime = runtime_function(
            self,
            "Function",
            package="evaluator",
            handler="lambda_handler.handler",
            description=f"Evaluates SageMaker profiler rules for {self.training_jobs.label}",
            role_description=f"Profiler rule evaluator for {self.training_jobs.label}",
            environment={
                **self.training_jobs.environment,
                env.RULES: lazy_string(lambda: json.dumps(self.rule_configurations, default=str)),
                env.SOURCE: self.source.value,
                env.PROFILER_S3_URI: self.profiler_s3_uri,
                env.EVENT_BUS_NAME: self.event_bus.event_bus_name,
                env.METRIC_NAMESPACE: self.metric_namespace,
                env.JOB_QUEUE_URL: self.job_queue.queue_url,
            },
            memory_size=memory_size,
            timeout=cdk.Duration.seconds(timeout_seconds),
            log_retention=log_retention,
            exclude=("evaluator/synthetic.py",),
            reserved_concurrency=reserved_concurrency,
        )
        #: Receives invocations that failed after the retries (EventBridge invokes the function asynchronously).
        self.dead_letter_queue = runtime.dead_letter_queue
        self.log_group = runtime.log_group
        self.role = runtime.role
        self.function = runtime.function
        if custom_bus is None:
            allow_verdict_publisher(self, self.role)
        else:
            custom_bus.grant_put_events_to(self.role)

    def _create_job_queue(self, timeout_seconds: int) -> sqs.Queue:
        """SQS FIFO: the message group is the job, so one job's runs follow each other while different jobs run in
        parallel, and a failing job only ever holds back its own messages (docs/evaluator.md, "One job, one unit of
        work"). Messages that failed three times go to a FIFO dead-letter queue (:attr:`job_dead_letter_queue`)."""
        #: Job messages whose evaluation failed three times (an exception, a timeout, the memory cap).
        self.job_dead_letter_queue = sqs.Queue(
            self, "JobDeadLetterQueue", fifo=True, encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True,
            retention_period=cdk.Duration.days(14))
        return sqs.Queue(
            self, "JobQueue", fifo=True, encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True,
            # AWS's advice for a Lambda event source: at least six times the function's timeout
            visibility_timeout=cdk.Duration.seconds(6 * timeout_seconds), retention_period=cdk.Duration.hours(1),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.job_dead_letter_queue, max_receive_count=3))

    def _consume_job_queue(self, reserved_concurrency: int | None) -> None:
        """One message per invocation; a failed one returns alone (partial batch response). With reserved
        concurrency, one execution stays free for the schedule's and the job-end invocations that queue the jobs."""
        maximum = reserved_concurrency - 1 if reserved_concurrency is not None and reserved_concurrency > 2 else None
        self.function.add_event_source(lambda_events.SqsEventSource(
            self.job_queue, batch_size=1, report_batch_item_failures=True, max_concurrency=maximum))
        self.job_queue.grant_send_messages(self.role)

    @property
    def rule_configurations(self) -> list[dict[str, Any]]:
        """The rules evaluated, as the function receives them (ProfilerReport when there are none)."""
        rules = self.rule_set.rules if self.rule_set is not None else self._rule_list
        return _configs(rules, self._where) or _configs([ProfilerReport()], self._where)

    def check_covers(self, training_jobs: TrainingJobs, *, where: str | LazyPath) -> None:
        """Raise unless this evaluator watches the runs of ``training_jobs`` (a job's own family,
        ``job.training_jobs``) and reads where they write (for a job that shares it through ``evaluator=``)."""
        job_prefix = training_jobs.job_name_prefix
        problems = []
        if self.training_jobs.family.needs_tags:
            problems.append(f"it evaluates {self.training_jobs.label}, which a name cannot tell")
        elif not is_token(self.job_name_prefix) and not job_prefix.startswith(self.job_name_prefix):
            problems.append(f"its job_name_prefix {self.job_name_prefix!r} does not match the job's runs "
                            f"{job_prefix}*")
        if training_jobs.output_bucket is not self.output_bucket:
            problems.append("it reads another output bucket than the job's output_bucket")
        elif self.output_prefix != training_jobs.output_prefix:
            problems.append(f"it reads output_prefix {self.output_prefix!r}, the job writes {training_jobs.output_prefix!r}")
        if problems:
            raise ConfigurationError(
                f"the evaluator {self.node.path} cannot evaluate this job: {'; '.join(problems)}. Create the evaluator "
                "with TrainingJobs.from_job_name_prefix(...) shared by its jobs and their output_bucket/output_prefix.",
                where=where, field="evaluator")

    def _create_rules(self) -> None:
        jobs = self.training_jobs
        target = targets.LambdaFunction(self.function, dead_letter_queue=self.dead_letter_queue, retry_attempts=2)
        #: Every minute: evaluates the InProgress jobs.
        self.schedule_rule = events.Rule(self, "Schedule", schedule=events.Schedule.rate(cdk.Duration.minutes(1)),
                                         targets=[target],
                                         description=f"Evaluate profiler rules of InProgress {jobs.label}")
        #: When a job ends: the final evaluation.
        self.job_end_rule = events.Rule(self, "JobEnded", targets=[target],
                                        event_pattern=jobs.event_pattern(statuses=["Completed", "Failed", "Stopped"]))
        #: A run that ran out of time asks for the next one (on the verdict bus: only evaluators can ask).
        self.continuation_rule = events.Rule(self, "Continuation", event_bus=self.event_bus, targets=[target],
                                             event_pattern=events.EventPattern(
                                                 source=[EVENT_SOURCE], detail_type=[CONTINUATION],
                                                 detail=jobs.name_filter() or None))

    def _grant_permissions(self) -> None:
        """The function's own statements live in :attr:`policy`, where their cdk-nag findings are acknowledged one by
        one; what CDK grants (logs, the dead-letter queue, the bus, KMS) goes to the role's default policy."""
        jobs = self.training_jobs
        # Only the evaluator's own keys: its state object and its report folders. ProfiledTrainingJob denies them to
        # the execution role, so a run cannot forge state or reports for another run.
        state = jobs.output_bucket.arn_for_objects(jobs.output_key_pattern(f"rule-output/{EVALUATOR_STATE_FILE}"))
        self._reports_pattern = jobs.output_key_pattern(f"rule-output/*/{EVALUATOR_REPORT_FOLDER}/*")
        reports = jobs.output_bucket.arn_for_objects(self._reports_pattern)
        profiler_objects = jobs.profiler_bucket.arn_for_objects(jobs.profiler_key_pattern("profiler-output/*"))
        statements = [
            *jobs.describe_statements(),
            iam.PolicyStatement(actions=["sagemaker:ListTrainingJobs", "cloudwatch:GetMetricData",
                                         "ec2:DescribeInstanceTypes"], resources=["*"]),
            iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"], resources=[state, reports]),
            # the state and lease objects are written with the tag the lifecycle rule expires old versions by
            iam.PolicyStatement(actions=["s3:PutObjectTagging"], resources=[state]),
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[profiler_objects]),
            *self._list_bucket_statements(),
        ]
        #: The function's own permissions (the role's default policy holds what CDK grants).
        self.policy = iam.Policy(self, "Permissions", roles=[self.role], statements=statements)
        self.function.node.add_dependency(self.policy)
        for bucket in {id(b): b for b in (jobs.output_bucket, jobs.profiler_bucket)}.values():
            if bucket.encryption_key is not None:
                bucket.encryption_key.grant_encrypt_decrypt(self.role)
                acknowledge_wildcards(self.role.node.find_child("DefaultPolicy"), KMS_KEY_FINDINGS)
        self.log_group.grant_write(self.role)
        guard_evaluator_keys(self, jobs.output_bucket, self.role)
        claim_output_location(self, bucket=jobs.output_bucket, prefix=jobs.output_prefix, names=jobs.job_name_prefix,
                              roles=[role.role_arn for role in jobs.execution_roles],
                              what="the RuleEvaluator")
        acknowledge_wildcards(self.policy, {
            "Resource::*": "ListTrainingJobs, GetMetricData and DescribeInstanceTypes do not support resource-level "
            "permissions; the function keeps the family's jobs only, reads only the /aws/sagemaker/TrainingJobs "
            "metrics, and asks EC2 only for the GPU count of instance types newer than its table.",
            f"Resource::{jobs.arn_pattern}": "Training job names end in a generated suffix; the statement is scoped to "
            f"the {jobs.label} (and, for tag and pipeline families, to their tag).",
            f"Resource::{state}": "The evaluator's state object of each job (rule-output/"
            f"{EVALUATOR_STATE_FILE}), whose job names are only known at run time; scoped to the family's jobs.",
            f"Resource::{reports}": "The evaluator's own report folders (rule-output/<rule>/evaluator-output/) of the "
            "family's jobs, whose names are only known at run time.",
            f"Resource::{profiler_objects}": "Profiler output is read per job and per minute file; scoped to the "
            "profiler-output/ folders of the family's jobs.",
        })

    @staticmethod
    def state_lifecycle_rule() -> s3.LifecycleRule:
        """The rule that expires superseded versions of the evaluator's state and lease objects after a day (they carry
        the object tag ``cdk-sagemaker-debugger=evaluator-state``); current versions and every other object (profiler
        data, reports) stay."""
        key, value = EVALUATOR_STATE_TAG
        return s3.LifecycleRule(id="CdkSageMakerDebuggerEvaluatorState", tag_filters={key: value},
                                noncurrent_version_expiration=cdk.Duration.days(STATE_NONCURRENT_DAYS))

    def _expire_state_versions(self) -> s3.LifecycleRule | None:
        """Add :meth:`state_lifecycle_rule` to the output bucket when this app owns it (once per bucket)."""
        bucket = self.training_jobs.output_bucket
        if not isinstance(bucket, s3.Bucket):
            return None
        existing = getattr(bucket, "_cdk_sagemaker_debugger_state_rule", None)
        if existing is None:
            existing = self.state_lifecycle_rule()
            bucket.add_lifecycle_rule(**{name: getattr(existing, name) for name in ("id", "tag_filters",
                                                                                   "noncurrent_version_expiration")})
            bucket._cdk_sagemaker_debugger_state_rule = existing  # type: ignore[attr-defined]
        return existing

    def _list_bucket_statements(self) -> list[iam.PolicyStatement]:
        """ListBucket on the family's folders (it also makes a missing state object a 404 rather than a 403)."""
        jobs = self.training_jobs
        listed: dict[int, tuple[s3.IBucket, list[str]]] = {}
        for bucket, pattern in ((jobs.profiler_bucket, jobs.profiler_key_pattern("profiler-output/*")),
                                (jobs.output_bucket, jobs.output_key_pattern("rule-output/*"))):
            listed.setdefault(id(bucket), (bucket, []))[1].append(pattern)
        return [iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
                                    conditions={"StringLike": {"s3:prefix": patterns}})
                for bucket, patterns in listed.values()]

    # ------------------------------------------------------------------------------------------------------------------
    def metric_rule_issues_found(self, rule: str, *, training_job_name: str | None = None,
                                 **options: Any) -> cloudwatch.Metric:
        """1 when ``rule`` found issues in the latest evaluation, 0 when it found none (Maximum over the period)."""
        dimensions = {"Rule": rule}
        if training_job_name is not None:
            dimensions["TrainingJobName"] = training_job_name
        options.setdefault("statistic", "Maximum")
        options.setdefault("period", cdk.Duration.minutes(1))
        return cloudwatch.Metric(namespace=self.metric_namespace, metric_name=METRIC_NAME, dimensions_map=dimensions,
                                 **options)

    def metric_errors(self, **options: Any) -> cloudwatch.Metric:
        """Failed evaluator invocations."""
        return self.function.metric_errors(**options)

    def on_status_change(self, id: str, *, target: events.IRuleTarget | None = None,
                         statuses: Sequence[str] | None = None) -> events.Rule:
        """An EventBridge rule for the evaluator's status-change events (optionally only some statuses)."""
        detail: dict[str, Any] = self.training_jobs.name_filter()
        if statuses:
            detail["ProfilerRuleEvaluationStatuses"] = {"RuleEvaluationStatus": list(statuses)}
        rule = events.Rule(self, id, event_bus=self.event_bus, event_pattern=events.EventPattern(
            source=[EVENT_SOURCE], detail_type=[STATUS_CHANGE], detail=detail))
        if target is not None:
            rule.add_target(target)
        return rule

    def grant_read_reports(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow ``grantee`` to read the evaluator's reports."""
        return self.output_bucket.grant_read(grantee, self._reports_pattern)
