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
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from ..model.errors import ConfigurationError, ConfigurationTypeError
from ..model.parameters import is_token
from ..model.profiler_catalog import PROFILER_REPORT, PROFILER_RULE_SPECS
from ..model.profiler_rules import ProfilerReport, ProfilerRule
from ._common import LazyPath, acknowledge_wildcards, lazy_string, runtime_function
from .rule_set import ProfilerRuleSet
from .training_job import ProfiledTrainingJob

EVENT_SOURCE = "cdk-sagemaker-debugger"
STATUS_CHANGE = "Profiler Rule Evaluation Status Change"
CONTINUATION = "Profiler Rule Evaluation Continuation"
METRIC_NAME = "RuleIssuesFound"
DEFAULT_NAMESPACE = "CdkSageMakerDebugger"
# Chosen from benchmarks/evaluator.py: 1,769 MB is one full vCPU (a 60-minute, 8-GPU node evaluates well inside the
# timeout and peaks far below the memory); longer catch-up runs continue through continuation events.
DEFAULT_MEMORY_MB = 1769
DEFAULT_TIMEOUT = cdk.Duration.minutes(5)


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
        if rule.rule_to_invoke != PROFILER_REPORT and rule.rule_to_invoke not in PROFILER_RULE_SPECS:
            raise ConfigurationError(
                f"rule {rule.name!r} runs {rule.rule_to_invoke!r}, which is not a built-in profiler rule; the evaluator "
                "implements the built-in rules only. Run custom rules on Debugger (rule_engine=RuleEngine.DEBUGGER) "
                "or pass rules= without them.",
                where=where, field="rules", value=rule.name)
        configs.append({"configuration_name": rule.name, "rule_to_invoke": rule.rule_to_invoke,
                        "parameters": {k: v for k, v in rule.parameters.items()}})
    return configs


def _bucket_and_prefix(uri: str) -> tuple[str, str]:
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    return bucket, prefix.strip("/")


class RuleEvaluator(Construct):
    """Evaluates profiler rules for the training jobs of a :class:`ProfiledTrainingJob` (or a job-name prefix).

    A Python Lambda function (arm64) runs every minute while jobs are InProgress and once more when each job ends. It
    reads only the profiler files it has not read yet (or SageMaker's CloudWatch metrics), keeps rule state in the job's
    output bucket with conditional writes, writes ``profiler-reports/<Rule>.json`` and ``profiler-report.html`` to
    ``<output>/<job>/rule-output/<RuleConfigurationName>/evaluator-output/`` (beside where the managed rule writes
    ``profiler-output/``), publishes every status change to EventBridge (source ``cdk-sagemaker-debugger``,
    detail-type ``Profiler Rule Evaluation Status Change``) and one embedded-format metric per rule.

    Example::

        RuleEvaluator(stack, "Evaluator", training_job=job, rules=rule_set, source=MetricsSource.AUTO)
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        training_job: ProfiledTrainingJob | None = None,
        job_name_prefix: str | None = None,
        rules: ProfilerRuleSet | Sequence[ProfilerRule] | None = None,
        source: MetricsSource = MetricsSource.AUTO,
        output_bucket: s3.IBucket | None = None,
        output_prefix: str | None = None,
        profiler_bucket: s3.IBucket | None = None,
        profiler_prefix: str | None = None,
        event_bus: events.IEventBus | None = None,
        metric_namespace: str = DEFAULT_NAMESPACE,
        memory_size: int = DEFAULT_MEMORY_MB,
        timeout: cdk.Duration | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.THREE_MONTHS,
    ) -> None:
        super().__init__(scope, id)
        where = self.node.path
        if (training_job is None) == (job_name_prefix is None):
            raise ConfigurationError("give exactly one of training_job= or job_name_prefix=.", where=where,
                                     field="training_job")
        if not isinstance(source, MetricsSource):
            raise ConfigurationTypeError(f"expected a MetricsSource such as MetricsSource.AUTO, got {source!r}.",
                                         where=where, field="source", value=source)
        if training_job is not None:
            # The job's runs are named <prefix>-<suffix>: the hyphen keeps sibling prefixes ("resnet50") out.
            job_name_prefix = f"{training_job.job_name_prefix}-"
            output_bucket = output_bucket or training_job.output_bucket
            output_prefix = training_job.output_prefix if output_prefix is None else output_prefix
            if profiler_bucket is None:
                profiler_uri = training_job.profiler_s3_uri
                if profiler_uri == training_job.output_s3_uri:
                    profiler_bucket, profiler_prefix = training_job.output_bucket, training_job.output_prefix
                elif not is_token(profiler_uri):
                    name, profiler_prefix = _bucket_and_prefix(profiler_uri)
                    profiler_bucket = s3.Bucket.from_bucket_name(self, "ProfilerBucket", name)
        if output_bucket is None:
            raise ConfigurationError("job_name_prefix= needs output_bucket= (the jobs' OutputDataConfig bucket).",
                                     where=where, field="output_bucket")
        if profiler_bucket is None:
            profiler_bucket = output_bucket
            profiler_prefix = output_prefix if profiler_prefix is None else profiler_prefix
        if not job_name_prefix or (not is_token(job_name_prefix) and "*" in job_name_prefix):
            raise ConfigurationError(f"must be a non-empty job-name prefix without wildcards, got {job_name_prefix!r}.",
                                     where=where, field="job_name_prefix", value=job_name_prefix)
        if not 128 <= memory_size <= 10240:
            raise ConfigurationError(f"must be between 128 and 10240 MB, got {memory_size}.", where=where,
                                     field="memory_size", value=memory_size)

        if rules is None and training_job is not None and training_job.rule_set is not None:
            rules = training_job.rule_set
        #: The rule set evaluated (its rules are read at synth, so rules added later are evaluated too), or None.
        self.rule_set: ProfilerRuleSet | None = rules if isinstance(rules, ProfilerRuleSet) else None
        self._rule_list: Sequence[ProfilerRule] = [ProfilerReport()] if rules is None else (
            () if isinstance(rules, ProfilerRuleSet) else list(rules))
        self._where = where
        _configs(self._rule_list if self.rule_set is None else self.rule_set.rules, where)  # fail early on bad rules
        self.job_name_prefix: str = job_name_prefix
        self.source = source
        self.metric_namespace = metric_namespace
        self.output_bucket = output_bucket
        self.profiler_bucket = profiler_bucket
        self.output_prefix = (output_prefix or "").strip("/")
        #: Where the jobs' profiler files are, unless a job's own ProfilerConfig says otherwise (Debugger jobs).
        self.profiler_s3_uri = f"s3://{profiler_bucket.bucket_name}/{(profiler_prefix or '').strip('/')}".rstrip("/")
        self.event_bus: events.IEventBus = event_bus or events.EventBus.from_event_bus_name(self, "Bus", "default")
        if event_bus is not None:
            cdk.Annotations.of(self).add_warning_v2(
                "cdk-sagemaker-debugger:evaluatorCustomEventBus",
                "The evaluator publishes its status changes to a custom event bus; RuleAlarm listens on the default "
                "bus and will not see them. Route them with an EventBridge rule on that bus (on_status_change), or "
                "leave event_bus unset.",
            )

        runtime = runtime_function(
            self,
            "Function",
            package="evaluator",
            handler="lambda_handler.handler",
            description=f"Evaluates SageMaker profiler rules for training jobs {job_name_prefix}*",
            role_description=f"Profiler rule evaluator for training jobs {job_name_prefix}*",
            environment={
                "JOB_NAME_PREFIX": job_name_prefix,
                "RULES": lazy_string(lambda: json.dumps(self.rule_configurations, default=str)),
                "SOURCE": source.value,
                "PROFILER_S3_URI": self.profiler_s3_uri,
                "EVENT_BUS_NAME": self.event_bus.event_bus_name,
                "METRIC_NAMESPACE": metric_namespace,
            },
            memory_size=memory_size,
            timeout=timeout or DEFAULT_TIMEOUT,
            log_retention=log_retention,
            exclude=("evaluator/synthetic.py",),
        )
        #: Receives invocations that failed after the retries (EventBridge invokes the function asynchronously).
        self.dead_letter_queue = runtime.dead_letter_queue
        self.log_group = runtime.log_group
        self.role = runtime.role
        self.function = runtime.function
        self._grant_permissions(output_prefix or "", profiler_prefix or "")

        target = targets.LambdaFunction(self.function, dead_letter_queue=self.dead_letter_queue, retry_attempts=2)
        #: Every minute: evaluates the InProgress jobs.
        self.schedule_rule = events.Rule(self, "Schedule", schedule=events.Schedule.rate(cdk.Duration.minutes(1)),
                                         targets=[target],
                                         description=f"Evaluate profiler rules of InProgress jobs {job_name_prefix}*")
        #: When a job ends: the final evaluation.
        self.job_end_rule = events.Rule(self, "JobEnded", targets=[target], event_pattern=events.EventPattern(
            source=["aws.sagemaker"], detail_type=["SageMaker Training Job State Change"],
            detail={"TrainingJobStatus": ["Completed", "Failed", "Stopped"],
                    "TrainingJobName": [{"prefix": job_name_prefix}]}))
        #: A run that ran out of time asks for the next one.
        self.continuation_rule = events.Rule(self, "Continuation", event_bus=self.event_bus, targets=[target],
                                             event_pattern=events.EventPattern(
                                                 source=[EVENT_SOURCE], detail_type=[CONTINUATION],
                                                 detail={"TrainingJobName": [{"prefix": job_name_prefix}]}))

    @property
    def rule_configurations(self) -> list[dict[str, Any]]:
        """The rules evaluated, as the function receives them (ProfilerReport when there are none)."""
        rules = self.rule_set.rules if self.rule_set is not None else self._rule_list
        return _configs(rules, self._where) or _configs([ProfilerReport()], self._where)

    def check_covers(self, training_job: ProfiledTrainingJob, *, where: str | LazyPath) -> None:
        """Raise unless this evaluator watches ``training_job``'s runs and reads where they write (for a job that
        shares it through ``evaluator=``)."""
        job_prefix = f"{training_job.job_name_prefix}-"
        problems = []
        if not is_token(self.job_name_prefix) and not job_prefix.startswith(self.job_name_prefix):
            problems.append(f"its job_name_prefix {self.job_name_prefix!r} does not match the job's runs "
                            f"{job_prefix}*")
        if training_job.output_bucket is not self.output_bucket:
            problems.append("it reads another output bucket than the job's output_bucket")
        elif self.output_prefix != training_job.output_prefix:
            problems.append(f"it reads output_prefix {self.output_prefix!r}, the job writes {training_job.output_prefix!r}")
        if problems:
            raise ConfigurationError(
                f"the evaluator {self.node.path} cannot evaluate this job: {'; '.join(problems)}. Create the evaluator "
                "with a job_name_prefix shared by its jobs and their output_bucket/output_prefix.",
                where=where, field="evaluator")

    def _grant_permissions(self, output_prefix: str, profiler_prefix: str) -> None:
        role = self.role
        stack = cdk.Stack.of(self)
        prefix = self.job_name_prefix
        out = f"{output_prefix}/" if output_prefix else ""
        prof = f"{profiler_prefix}/" if profiler_prefix else ""
        self._reports_pattern = f"{out}{prefix}*/rule-output/*"
        job_arn = stack.format_arn(service="sagemaker", resource="training-job",
                                   resource_name=f"{prefix if cdk.Token.is_unresolved(prefix) else prefix.lower()}*")
        role.add_to_policy(iam.PolicyStatement(actions=["sagemaker:DescribeTrainingJob"], resources=[job_arn]))
        role.add_to_policy(iam.PolicyStatement(actions=["sagemaker:ListTrainingJobs", "cloudwatch:GetMetricData"],
                                               resources=["*"]))
        reports = self.output_bucket.arn_for_objects(f"{out}{prefix}*/rule-output/*")
        profiler_objects = self.profiler_bucket.arn_for_objects(f"{prof}{prefix}*/profiler-output/*")
        role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"], resources=[reports]))
        role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[profiler_objects]))
        # ListBucket also makes a missing state object a 404 rather than a 403 on the first run
        listed: dict[int, tuple[s3.IBucket, list[str]]] = {}
        for bucket, pattern in ((self.profiler_bucket, f"{prof}{prefix}*/profiler-output/*"),
                                (self.output_bucket, f"{out}{prefix}*/rule-output/*")):
            listed.setdefault(id(bucket), (bucket, []))[1].append(pattern)
        for bucket, patterns in listed.values():
            role.add_to_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
                                                   conditions={"StringLike": {"s3:prefix": patterns}}))
        for bucket in {id(b): b for b in (self.output_bucket, self.profiler_bucket)}.values():
            if bucket.encryption_key is not None:
                bucket.encryption_key.grant_encrypt_decrypt(role)
        self.event_bus.grant_put_events_to(role)
        self.log_group.grant_write(role)
        acknowledge_wildcards(self.role, {
            "Resource::*": "ListTrainingJobs and GetMetricData do not support resource-level permissions; the function "
            "filters jobs by the configured prefix and reads only the /aws/sagemaker/TrainingJobs metrics.",
            f"Resource::{job_arn}": "Training job names end in a generated suffix; the statement is scoped to the "
            "configured job-name prefix.",
            f"Resource::{reports}": "Reports and evaluator state are written per job under rule-output/, whose job "
            "names are only known at run time; scoped to the prefix's jobs.",
            f"Resource::{profiler_objects}": "Profiler output is read per job and per minute file; scoped to the "
            "profiler-output/ folders of the prefix's jobs.",
        })

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
        detail: dict[str, Any] = {"TrainingJobName": [{"prefix": self.job_name_prefix}]}
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
