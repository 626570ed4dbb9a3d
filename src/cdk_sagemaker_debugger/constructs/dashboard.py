"""TrainingDashboard: one CloudWatch dashboard per training-job family, and alarms that act."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from ..model.contract import DEFAULT_NAMESPACE, GPU_WATCH_DIMENSION, LOWEST_GPU_UTILIZATION_METRIC, GpuWatchEnvironment
from ..model.errors import ConfigurationError, ConfigurationTypeError
from ..model.health_rules import HEALTH_RULE_SPECS
from ..model.host_devices import resolve_gpus_per_host
from ..model.parameters import is_token
from ..model.profiler_catalog import OVERRIDABLE_BY_PROFILER_REPORT, PROFILER_REPORT, PROFILER_RULE_SPECS
from ..runtime.evaluator.cloudwatch import instance_devices, known_without_gpu
from ._alarm_actions import AlarmActions
from ._cdk.checks import check_reserved_concurrency
from ._cdk.compliance import acknowledge_compliance
from ._cdk.images import concrete_region
from ._cdk.lambda_function import RuntimeFunction, runtime_function
from ._cdk.nag import acknowledge_wildcards
from ._health_widgets import health_rule_rows
from ._removed_props import names_removed_props
from .family import JobOrigin, TrainingJobs, check_training_jobs
from .rule_alarm import RuleAlarm
from .rule_evaluator import METRIC_NAME as RULE_METRIC_NAME
from .rule_evaluator import RuleEvaluator

__all__ = ["TrainingDashboard", "rule_thresholds"]

DEFAULT_LOW_GPU_THRESHOLD = 10.0
DEFAULT_LOW_GPU_MINUTES = 30
#: CloudWatch limits an alarm's evaluation range to one day.
MAX_LOW_GPU_MINUTES = 1440
_TRAINING_PERIOD = cdk.Duration.minutes(1)  # SageMaker publishes one value per host and minute
_HEALTH_PERIOD = cdk.Duration.minutes(5)
_DASHBOARD_NAME = re.compile(r"^[A-Za-z0-9_-]{1,255}$")
_HOST_LABEL = "${PROP('Dim.Host')}"
#: Rule parameters drawn as horizontal lines, per chart: (rule, parameter) in the rule set's units (percent).
CHART_THRESHOLDS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "GPUUtilization": (("LowGPUUtilization", "threshold_p95"), ("LowGPUUtilization", "threshold_p5")),
    "GPUMemoryUtilization": (("BatchSize", "gpu_memory_threshold_p95"),),
    "CPUUtilization": (("CPUBottleneck", "cpu_threshold"), ("BatchSize", "cpu_threshold_p95")),
}


def rule_thresholds(configurations: Iterable[Mapping[str, Any]], rule: str, parameter: str) -> dict[float, list[str]]:
    """``{value: [rule configuration names]}`` of ``rule``'s ``parameter`` in a rule set, standalone or inside
    ProfilerReport (its ``<rule>_<parameter>`` override, else the default). Tokens and custom rules are skipped."""
    spec = PROFILER_RULE_SPECS.get(rule) or HEALTH_RULE_SPECS[rule]
    default = next(p.default for p in spec.parameters if p.name == parameter)
    found: dict[float, list[str]] = {}
    for config in configurations:
        parameters = config.get("parameters", {})
        if config.get("rule_to_invoke") == rule:
            value = parameters.get(parameter, default)
        elif config.get("rule_to_invoke") == PROFILER_REPORT and rule in OVERRIDABLE_BY_PROFILER_REPORT:
            value = parameters.get(f"{rule}_{parameter}", default)
        else:
            continue
        if isinstance(value, str) and not is_token(value):
            try:
                value = float(value)
            except ValueError:
                continue
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not is_token(value):
            found.setdefault(float(value), []).append(str(config.get("configuration_name", rule)))
    return found


@names_removed_props
class TrainingDashboard(Construct):
    """A CloudWatch dashboard for the training jobs of a family, and alarms on them that notify an operations topic.

    The dashboard shows, per host (``<job>/algo-<n>``) of every job of the family: GPU utilisation and GPU memory per
    GPU, CPU per vCPU, host memory and disk (``/aws/sagemaker/TrainingJobs``, SEARCH expressions over the job-name
    prefix, divided by the device counts of the instance type as the evaluator does); the evaluator's verdict per job
    and rule; the state machine's executions; the health of the evaluator, the RuleAlarm handler and the low-GPU
    watch; and where the HTML profiler reports are. Rule thresholds of the rule set are drawn on the charts.

    The low-GPU alarm needs no rules: a small function (``gpu_watch``) reads the GPU utilisation of the family's
    hosts in secondary status ``Training`` every minute and publishes the lowest per-GPU value
    (``CdkSageMakerDebugger/LowestGPUUtilization``, dimension ``JobNamePrefix``), because CloudWatch alarms can
    neither use SEARCH nor match a job-name prefix. The alarm fires when that value stays below ``low_gpu_threshold``
    for ``low_gpu_minutes`` consecutive minutes.

    Args:
        training_jobs: the jobs shown: ``job.training_jobs`` (a ProfiledTrainingJob's runs) or
            ``TrainingJobs.from_job_name_prefix(...)`` for jobs started elsewhere (which needs ``instance_type`` or
            ``gpus_per_host``). Tag and pipeline families cannot be shown (the metrics carry only host names).
            Required.
        evaluator: the ``RuleEvaluator`` whose verdicts and health are shown and alarmed. Default: the training job's
            ``evaluator`` (none for jobs started elsewhere).
        alarm: a ``RuleAlarm`` whose handler health and alarms are shown. When it was created without ``ops_topic``
            (its two alarms notify its own operations topic), they get this dashboard's actions too. Default: none.
        ops_topic: the SNS topic every alarm notifies on ALARM and OK; CloudWatch is allowed to publish to it (and to
            use its KMS key) when the topic is defined in the app. Default: none (alarms without actions).
        alarm_actions: more actions run on ALARM by every alarm (``cloudwatch.IAlarmAction``). Default: none.
        instance_type: the family's instance type, for per-GPU and per-vCPU figures. Default: the training job's
            ``instance_type``; required with ``job_name_prefix`` unless ``gpus_per_host`` is given.
        gpus_per_host: GPUs of one instance, for instance types the library's table does not know (0: no GPU).
            Default: from ``instance_type``.
        low_gpu_threshold: percent per GPU below which a training host counts as low. Default: 10.
        low_gpu_minutes: consecutive minutes below the threshold before the alarm fires (1-1440), or ``None`` for no
            low-GPU alarm and no watch function. Default: 30. A family without GPUs gets neither.
        dashboard_name: the dashboard's name (letters, digits, ``-`` and ``_``). Default: generated by CloudFormation.
        log_retention: retention of the watch function's log group. Default: three months.
        reserved_concurrency: concurrent runs of the watch function at most (None: no reservation, for accounts whose
            Lambda concurrency quota is still 10). Default: 1 (it runs once a minute).

    Attributes: ``dashboard``, ``alarms`` (every alarm this construct created), ``low_gpu_alarm``, ``watch_wildcard_policy``,
    ``watch_function``, ``evaluator_errors_alarm``, ``evaluator_dead_letter_alarm`` (``None`` when not created).

    Example::

        dash = TrainingDashboard(stack, "Dashboard", training_jobs=job.training_jobs, alarm=rule_alarm,
                                 ops_topic=ops_topic)
        dash.dashboard, dash.alarms
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        training_jobs: TrainingJobs,
        evaluator: RuleEvaluator | None = None,
        alarm: RuleAlarm | None = None,
        ops_topic: sns.ITopic | None = None,
        alarm_actions: Sequence[cloudwatch.IAlarmAction] = (),
        instance_type: str | None = None,
        gpus_per_host: int | None = None,
        low_gpu_threshold: float = DEFAULT_LOW_GPU_THRESHOLD,
        low_gpu_minutes: int | None = DEFAULT_LOW_GPU_MINUTES,
        dashboard_name: str | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.THREE_MONTHS,
        reserved_concurrency: int | None = 1,
    ) -> None:
        super().__init__(scope, id)
        where = self.node.path
        reserved_concurrency = check_reserved_concurrency(reserved_concurrency, where=where)
        self._actions = AlarmActions.checked(ops_topic, alarm_actions, where=where)
        #: The jobs shown.
        self.training_jobs = self._family(training_jobs, where)
        #: What the ProfiledTrainingJob of the family tells about its runs (``job.training_jobs.origin``), or None.
        self.origin: JobOrigin | None = self.training_jobs.origin
        #: Jobs whose name starts with this are shown (``<job_name_prefix>-`` for a ProfiledTrainingJob's family).
        self.job_name_prefix: str = self.training_jobs.job_name_prefix
        self.evaluator: RuleEvaluator | None = self._check_evaluator(evaluator, where)
        self.alarm: RuleAlarm | None = self._check_alarm(alarm, where)
        #: (GPUs, vCPUs) of one instance; vCPUs None when unknown (CPU is then shown summed over the cores).
        self.devices: tuple[int, int | None] = self._devices(instance_type, gpus_per_host, where)
        self.low_gpu_threshold, self.low_gpu_minutes = _check_low_gpu(low_gpu_threshold, low_gpu_minutes, where)
        _check_dashboard_name(dashboard_name, where)
        self.ops_topic = ops_topic
        self.alarms: list[cloudwatch.Alarm] = []
        self.watch_function: lambda_.Function | None = None
        self.watch_wildcard_policy: iam.Policy | None = None
        self.low_gpu_alarm: cloudwatch.Alarm | None = None
        self.evaluator_errors_alarm: cloudwatch.Alarm | None = None
        self.evaluator_dead_letter_alarm: cloudwatch.Alarm | None = None
        self._watch: RuntimeFunction | None = None
        if self.devices[0] > 0 and self.low_gpu_minutes is not None:
            self._create_watch(log_retention, reserved_concurrency)
        if self.evaluator is not None:
            self._create_evaluator_alarms(self.evaluator)
        self._apply_actions()
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=dashboard_name, start="-PT12H")
        for row in self._rows():
            self.dashboard.add_widgets(*row)
        acknowledge_compliance(self, "TrainingDashboard")

    # -- props ---------------------------------------------------------------------------------------------------------
    @staticmethod
    def _family(training_jobs: Any, where: str) -> TrainingJobs:
        jobs = check_training_jobs(training_jobs, where=where)
        if jobs.family.needs_tags:
            raise ConfigurationError(
                f"cannot show the {jobs.label}: SageMaker's /aws/sagemaker/TrainingJobs metrics carry only the host "
                "name (<job>/algo-<n>), so a dashboard selects jobs by name prefix. Use "
                "TrainingJobs.from_job_name_prefix(...) or job.training_jobs.", where=where, field="training_jobs")
        return jobs

    def _check_evaluator(self, evaluator: Any, where: str) -> RuleEvaluator | None:
        if evaluator is None:
            return self.origin.evaluator if self.origin is not None else None
        if not isinstance(evaluator, RuleEvaluator):
            raise ConfigurationTypeError(f"expected a RuleEvaluator (for example job.evaluator), got "
                                         f"{type(evaluator).__name__}.", where=where, field="evaluator", value=evaluator)
        if self.origin is not None:
            evaluator.check_covers(self.training_jobs, where=where)
        return evaluator

    @staticmethod
    def _check_alarm(alarm: Any, where: str) -> RuleAlarm | None:
        if alarm is not None and not isinstance(alarm, RuleAlarm):
            raise ConfigurationTypeError(f"expected a RuleAlarm, got {type(alarm).__name__}.", where=where,
                                         field="alarm", value=alarm)
        return alarm

    def _devices(self, instance_type: Any, gpus_per_host_prop: Any, where: str) -> tuple[int, int | None]:
        if instance_type is None and self.origin is not None:
            instance_type = self.origin.instance_type
        if instance_type is not None and not isinstance(instance_type, str):
            raise ConfigurationTypeError(f"expected an instance type such as 'ml.g5.2xlarge', got {instance_type!r}.",
                                         where=where, field="instance_type", value=instance_type)
        literal_type = None if instance_type is None or is_token(instance_type) else instance_type
        gpus, vcpus = instance_devices(literal_type)
        if gpus is None and known_without_gpu(literal_type):
            gpus = 0
        return resolve_gpus_per_host(instance_type, gpus_per_host_prop, gpus, where=where), vcpus

    # -- alarms --------------------------------------------------------------------------------------------------------
    def _create_watch(self, log_retention: logs.RetentionDays, reserved_concurrency: int | None) -> None:
        scope = Construct(self, "GpuWatch")
        prefix = self.job_name_prefix
        environment = {GpuWatchEnvironment.JOB_NAME_PREFIX: prefix, GpuWatchEnvironment.GPUS_PER_HOST: str(self.devices[0]),
                       GpuWatchEnvironment.METRIC_NAMESPACE: self._namespace}
        roles = self.training_jobs.execution_roles
        if roles:  # a job that only borrows the prefix does not count
            environment[GpuWatchEnvironment.EXECUTION_ROLE_ARNS] = cdk.Stack.of(self).to_json_string(
                [role.role_arn for role in roles])
        watch = runtime_function(
            scope, "Function", package="gpu_watch", handler="handler.handler",
            description=f"Publishes the lowest per-GPU utilisation of training jobs {prefix}* every minute",
            role_description=f"Low-GPU watch for training jobs {prefix}*",
            environment=environment, memory_size=256, timeout=cdk.Duration.seconds(50), log_retention=log_retention,
            max_event_age=cdk.Duration.minutes(2), reserved_concurrency=reserved_concurrency)
        self._watch, self.watch_function = watch, watch.function
        events.Rule(scope, "Schedule", schedule=events.Schedule.rate(cdk.Duration.minutes(1)),
                    description=f"Measure the GPU utilisation of training jobs {prefix}* every minute",
                    targets=[targets.LambdaFunction(watch.function, dead_letter_queue=watch.dead_letter_queue,
                                                    retry_attempts=0)])
        self._grant_watch(watch)
        self.low_gpu_alarm = self._alarm(
            "LowGpuAlarm", self.metric_lowest_gpu_utilization(),
            f"A training job {prefix}* has run with GPU utilisation below {self.low_gpu_threshold:g} % per GPU for "
            f"{self.low_gpu_minutes} minutes: the GPUs are paid for and idle. Check the job's input pipeline and "
            "batch size (see the dashboard and the profiler report), or stop it.",
            threshold=self.low_gpu_threshold, periods=self.low_gpu_minutes,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD)
        self._alarm("GpuWatchErrorsAlarm", watch.function.metric_errors(period=_HEALTH_PERIOD, statistic="Sum"),
                    f"The low-GPU watch for {prefix}* failed in two consecutive 5-minute periods, so the low-GPU alarm "
                    "sees no data; see its log group.", threshold=1, periods=2)

    def _grant_watch(self, watch: RuntimeFunction) -> None:
        role = watch.role
        jobs = self.training_jobs.arn_pattern
        role.add_to_policy(self.training_jobs.statement("sagemaker:DescribeTrainingJob"))
        # the two actions without resource-level permissions, in a policy of their own: the acknowledgement below
        # covers exactly them, and a statement added to the role later lands in its default policy and is reported
        #: The watch's statements on "*" (ListTrainingJobs, GetMetricData), apart from its default policy.
        self.watch_wildcard_policy = iam.Policy(watch.function.node.scope, "UnscopedActions", roles=[role], statements=[
            iam.PolicyStatement(actions=["sagemaker:ListTrainingJobs", "cloudwatch:GetMetricData"], resources=["*"])])
        watch.log_group.grant_write(role)
        acknowledge_wildcards(self.watch_wildcard_policy, {
            "Resource::*": "ListTrainingJobs and GetMetricData support no resource-level permissions; the function "
            "keeps the jobs under its prefix (and of the family's execution role) and reads only "
            "/aws/sagemaker/TrainingJobs GPUUtilization."})
        acknowledge_wildcards(role.node.find_child("DefaultPolicy"), {
            f"Resource::{jobs}": "Training job names end in a run-specific suffix; DescribeTrainingJob is scoped to "
            "the family's job-name prefix.",
        })

    def _create_evaluator_alarms(self, evaluator: RuleEvaluator) -> None:
        where = f"{evaluator.job_name_prefix}*"
        self.evaluator_errors_alarm = self._alarm(
            "EvaluatorErrorsAlarm", evaluator.function.metric_errors(period=_HEALTH_PERIOD, statistic="Sum"),
            f"The rule evaluator for {where} failed in two consecutive 5-minute periods: verdicts and reports may be "
            "late or missing. See its log group.", threshold=1, periods=2)
        self.evaluator_dead_letter_alarm = self._alarm(
            "EvaluatorDeadLetterAlarm", evaluator.dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=cdk.Duration.minutes(1), statistic="Maximum"),
            f"Rule evaluator invocations for {where} failed after retries; a job's final evaluation may be missing. "
            "Inspect the dead-letter queue, fix the cause and redrive it.", threshold=1, periods=1)

    def _alarm(self, id: str, metric: cloudwatch.IMetric, description: str, *, threshold: float, periods: int,
               comparison: cloudwatch.ComparisonOperator = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
               ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(self, id, metric=metric, alarm_description=description, threshold=threshold,
                                 evaluation_periods=periods, datapoints_to_alarm=periods, comparison_operator=comparison,
                                 treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)
        self.alarms.append(alarm)
        return alarm

    def _apply_actions(self) -> None:
        if not self._actions:
            return
        adopted = [] if self.alarm is None or not self.alarm.ops_topic_created or (
            self._actions.ops_topic is self.alarm.ops_topic) else [self.alarm.dead_letter_alarm, self.alarm.errors_alarm]
        self._actions.apply(*self.alarms, *adopted)

    # -- metrics -------------------------------------------------------------------------------------------------------
    @property
    def _namespace(self) -> str:
        return self.evaluator.metric_namespace if self.evaluator is not None else DEFAULT_NAMESPACE

    def metric_lowest_gpu_utilization(self, **options: Any) -> cloudwatch.Metric:
        """The low-GPU watch's metric: lowest per-GPU utilisation of the family's training hosts (Minimum, 1 minute)."""
        options.setdefault("statistic", "Minimum")
        options.setdefault("period", _TRAINING_PERIOD)
        return cloudwatch.Metric(namespace=self._namespace, metric_name=LOWEST_GPU_UTILIZATION_METRIC,
                                 dimensions_map={GPU_WATCH_DIMENSION: self.job_name_prefix}, **options)

    def metric_per_device(self, metric_name: str, devices: int | None, *, statistic: str = "Average") -> cloudwatch.IMetric:
        """One line per host of the family: SageMaker's ``metric_name`` divided by ``devices`` (GPUs or vCPUs)."""
        options = {"statistic": statistic, "period": _TRAINING_PERIOD, "label": _HOST_LABEL}
        search = self.training_jobs.metric(metric_name, **options)
        if not devices or devices == 1:
            return search
        key = re.sub(r"[^a-z0-9]", "", metric_name.lower())
        # No label (CDK omits an empty one): each result keeps the label of its host's series.
        return cloudwatch.MathExpression(expression=f"{key} / {devices}", using_metrics={key: search},
                                         period=_TRAINING_PERIOD, label="")

    def metric_rule_verdicts(self) -> cloudwatch.IMetric:
        """The evaluator's RuleIssuesFound (1 issues found, 0 none) per job and rule of the family (SEARCH)."""
        namespace = self._namespace
        schema = namespace if re.fullmatch(r"[A-Za-z0-9_]+", namespace) else f'"{namespace}"'
        term = self.job_name_prefix.rstrip("-")
        return cloudwatch.SearchExpression(
            expression=f"SEARCH('{{{schema},Rule,TrainingJobName}} MetricName=\"{RULE_METRIC_NAME}\" "
            f"TrainingJobName={term}', 'Maximum', {int(_TRAINING_PERIOD.to_seconds())})",
            label="${PROP('Dim.TrainingJobName')} ${PROP('Dim.Rule')}", period=_TRAINING_PERIOD)

    # -- widgets -------------------------------------------------------------------------------------------------------
    def _rows(self) -> list[list[cloudwatch.IWidget]]:
        gpus, vcpus = self.devices
        rows: list[list[cloudwatch.IWidget]] = [self._header_row()]
        if gpus > 0:
            rows.append([self._usage("GPUUtilization", "GPU utilisation per GPU", gpus, 12),
                         self._usage("GPUMemoryUtilization", "GPU memory per GPU", gpus, 12)])
        cpu_title = "CPU utilisation per vCPU" if vcpus else "CPU utilisation (sum over the vCPUs)"
        rows.append([self._usage("CPUUtilization", cpu_title, vcpus, 8),
                     self._usage("MemoryUtilization", "Host memory", None, 8),
                     self._usage("DiskUtilization", "Disk (training volume)", None, 8)])
        verdicts, executions = self.evaluator is not None, self.origin is not None
        if verdicts or executions:
            width = 24 // (verdicts + executions)
            rows.append([*([self._verdicts(width)] if verdicts else []), *([self._executions(width)] if executions else [])])
        rows += health_rule_rows(self._rule_configurations(), self._namespace, self.job_name_prefix,
                                 rule_thresholds, _TRAINING_PERIOD)
        components = self._components()
        if components:
            rows.append([self._health(title, part, 24 // len(components)) for title, part in components])
        rows.append([cloudwatch.TextWidget(markdown=self._report_markdown(), width=24, height=6)])
        return rows

    def _header_row(self) -> list[cloudwatch.IWidget]:
        gpus, vcpus = self.devices
        devices = f"{gpus} GPU{'' if gpus == 1 else 's'}" + (f" and {vcpus} vCPUs" if vcpus else "")
        watched = ("" if self.low_gpu_alarm is None else f" The low-GPU alarm fires when a training host stays below "
                   f"{self.low_gpu_threshold:g} % per GPU for {self.low_gpu_minutes} minutes.")
        lines = " Horizontal lines are the thresholds of the rule set." if self._rule_configurations() else ""
        markdown = (f"# Training jobs `{self.job_name_prefix}*`\n"
                    f"One line per host (`<job>/algo-<n>`); GPU and CPU figures are SageMaker's sums over the host's "
                    f"devices divided by their number ({devices} per instance).{lines}{watched}")
        alarms = [*self.alarms, *([] if self.alarm is None else [self.alarm.dead_letter_alarm, self.alarm.errors_alarm])]
        if not alarms:
            return [cloudwatch.TextWidget(markdown=markdown, width=24, height=4)]
        return [cloudwatch.TextWidget(markdown=markdown, width=16, height=4),
                cloudwatch.AlarmStatusWidget(alarms=alarms, title="Alarms", width=8, height=4)]

    def _usage(self, metric_name: str, title: str, devices: int | None, width: int) -> cloudwatch.GraphWidget:
        lines: list[cloudwatch.IMetric] = [self.metric_per_device(metric_name, devices)]
        annotations = self._threshold_annotations(metric_name)
        if metric_name == "GPUUtilization" and self.low_gpu_alarm is not None:
            lines.append(self.metric_lowest_gpu_utilization(label="lowest, all training hosts (alarm input)",
                                                            color=cloudwatch.Color.RED))
            annotations.append(cloudwatch.HorizontalAnnotation(
                value=self.low_gpu_threshold, color=cloudwatch.Color.RED,
                label=f"low-GPU alarm: below {self.low_gpu_threshold:g} % for {self.low_gpu_minutes} min"))
        percent = devices is not None or metric_name in ("MemoryUtilization", "DiskUtilization")
        axis = cloudwatch.YAxisProps(min=0, max=100 if percent else None, label="%", show_units=False)
        return cloudwatch.GraphWidget(title=title, left=lines, left_y_axis=axis, left_annotations=annotations,
                                      period=_TRAINING_PERIOD, width=width, height=6,
                                      legend_position=cloudwatch.LegendPosition.BOTTOM)

    def _threshold_annotations(self, metric_name: str) -> list[cloudwatch.HorizontalAnnotation]:
        configurations = self._rule_configurations()
        annotations = []
        for rule, parameter in CHART_THRESHOLDS.get(metric_name, ()):
            for value, names in sorted(rule_thresholds(configurations, rule, parameter).items()):
                annotations.append(cloudwatch.HorizontalAnnotation(
                    value=value, color=cloudwatch.Color.ORANGE, label=f"{rule} {parameter} ({', '.join(names)})"))
        return annotations

    def _rule_configurations(self) -> list[Mapping[str, Any]]:
        if self.evaluator is not None:
            return self.evaluator.rule_configurations
        rule_set = self.origin.rule_set if self.origin is not None else None
        return [] if rule_set is None else [
            {"configuration_name": r.name, "rule_to_invoke": r.rule_to_invoke, "parameters": dict(r.parameters)}
            for r in rule_set.rules]

    def _verdicts(self, width: int) -> cloudwatch.GraphWidget:
        return cloudwatch.GraphWidget(
            title="Rule verdicts (1 = issues found)", left=[self.metric_rule_verdicts()], width=width, height=6,
            left_y_axis=cloudwatch.YAxisProps(min=0, max=1, label="RuleIssuesFound", show_units=False),
            period=_TRAINING_PERIOD, legend_position=cloudwatch.LegendPosition.BOTTOM)

    def _executions(self, width: int) -> cloudwatch.GraphWidget:
        machine = self.origin.state_machine  # type: ignore[union-attr]
        options = {"period": _HEALTH_PERIOD, "statistic": "Sum"}
        return cloudwatch.GraphWidget(
            title="Training runs (state machine executions)", width=width, height=6, period=_HEALTH_PERIOD,
            left=[machine.metric_started(label="started", **options),
                  machine.metric_succeeded(label="succeeded", color=cloudwatch.Color.GREEN, **options),
                  machine.metric_failed(label="failed", color=cloudwatch.Color.RED, **options),
                  machine.metric_timed_out(label="timed out", color=cloudwatch.Color.ORANGE, **options)],
            left_y_axis=cloudwatch.YAxisProps(min=0, label="executions per 5 minutes", show_units=False))

    def _components(self) -> list[tuple[str, tuple[lambda_.IFunction, sqs.IQueue, cdk.Duration | None]]]:
        parts = []
        if self.evaluator is not None:
            parts.append(("Rule evaluator", (self.evaluator.function, self.evaluator.dead_letter_queue,
                                             self.evaluator.function.timeout)))
        if self.alarm is not None:
            parts.append(("RuleAlarm handler", (self.alarm.handler, self.alarm.dead_letter_queue,
                                                self.alarm.handler.timeout)))
        if self._watch is not None:
            parts.append(("Low-GPU watch", (self._watch.function, self._watch.dead_letter_queue,
                                            self._watch.function.timeout)))
        return parts

    @staticmethod
    def _health(title: str, part: tuple[lambda_.IFunction, sqs.IQueue, cdk.Duration | None], width: int
                ) -> cloudwatch.GraphWidget:
        function, queue, timeout = part
        options = {"period": _HEALTH_PERIOD, "statistic": "Sum"}
        limit = [] if timeout is None else [cloudwatch.HorizontalAnnotation(
            value=timeout.to_milliseconds(), label="timeout", color=cloudwatch.Color.RED)]
        return cloudwatch.GraphWidget(
            title=f"{title}: errors, throttles, dead letters, duration", width=width, height=6, period=_HEALTH_PERIOD,
            left=[function.metric_errors(label="errors", color=cloudwatch.Color.RED, **options),
                  function.metric_throttles(label="throttles", color=cloudwatch.Color.ORANGE, **options),
                  queue.metric_approximate_number_of_messages_visible(label="dead letters", period=_HEALTH_PERIOD,
                                                                      statistic="Maximum", color=cloudwatch.Color.PURPLE)],
            right=[function.metric_duration(label="duration (max)", period=_HEALTH_PERIOD, statistic="Maximum",
                                            color=cloudwatch.Color.GREY)],
            left_y_axis=cloudwatch.YAxisProps(min=0, label="count", show_units=False),
            right_y_axis=cloudwatch.YAxisProps(min=0, label="ms", show_units=False),
            right_annotations=limit, legend_position=cloudwatch.LegendPosition.BOTTOM)

    def _report_markdown(self) -> str:
        names = [c["configuration_name"] for c in self._rule_configurations()] or ["<RuleConfigurationName>"]
        evaluator = self.evaluator
        if evaluator is not None:
            bucket = evaluator.output_bucket.bucket_name
            prefix = f"{evaluator.output_prefix}/" if evaluator.output_prefix else ""
            where = f"s3://{bucket}/{prefix}<job>/rule-output/<Rule>/evaluator-output/profiler-report.html"
            region = concrete_region(self)
            host = "console.amazonaws.cn" if region and region.startswith("cn-") else "console.aws.amazon.com"
            console = (f"[Open the output folder in the S3 console](https://{host}/s3/buckets/{bucket}"
                       f"?prefix={prefix}&region={region or cdk.Aws.REGION})")
        elif self.origin is not None and self.origin.rule_report_location is not None:
            where = self.origin.rule_report_location
            console = "SageMaker Debugger writes it there (RuleEngine.DEBUGGER)"
        else:
            where = "<OutputDataConfig.S3OutputPath>/<job>/rule-output/<Rule>/evaluator-output/profiler-report.html"
            console = "Give the dashboard the RuleEvaluator of these jobs (evaluator=) to see its verdicts here"
        return (
            "## Profiler reports\n"
            f"The evaluator writes one HTML report per job and rule, refreshed every minute while the job runs and "
            f"once more when it ends:\n\n`{where}`\n\n"
            f"`<Rule>` is one of: {', '.join(f'`{n}`' for n in names)}. {console}, or "
            "`aws s3 cp <report URI> .` and open the file (one file, no scripts, works offline).\n\n"
            "**How to read it:** the table at the top gives each rule's verdict (IssuesFound, NoIssuesFound, "
            "NotApplicable with its reason) and what triggered it; below, the GPU, GPU memory and CPU charts per node "
            "show when. `profiler-reports/<Rule>.json` beside it holds the same figures for tooling. A rule that "
            "found issues is also 1 in the *Rule verdicts* chart above.")


def _check_low_gpu(threshold: Any, minutes: Any, where: str) -> tuple[float, int | None]:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 100:
        raise ConfigurationError(f"must be a percentage per GPU above 0 and at most 100, got {threshold!r}.",
                                 where=where, field="low_gpu_threshold", value=threshold)
    if minutes is not None and (isinstance(minutes, bool) or not isinstance(minutes, int)
                                or not 1 <= minutes <= MAX_LOW_GPU_MINUTES):
        raise ConfigurationError(
            f"must be whole minutes from 1 to {MAX_LOW_GPU_MINUTES} (CloudWatch evaluates an alarm over at most one "
            f"day), or None for no low-GPU alarm; got {minutes!r}.", where=where, field="low_gpu_minutes", value=minutes)
    return float(threshold), minutes


def _check_dashboard_name(name: Any, where: str) -> None:
    if name is None or (isinstance(name, str) and is_token(name)):
        return
    if not isinstance(name, str) or not _DASHBOARD_NAME.fullmatch(name):
        fixed = re.sub(r"[^A-Za-z0-9_-]", "-", str(name))[:255]
        raise ConfigurationError(
            f"dashboard names are 1-255 letters, digits, '-' and '_', got {name!r}. Try {fixed!r}.",
            where=where, field="dashboard_name", value=name)
