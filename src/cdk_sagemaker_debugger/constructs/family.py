"""TrainingJobs: which training jobs a RuleAlarm, RuleEvaluator or TrainingDashboard watches, and where they write.

One object owns, for every construct, what "the jobs" means: the job-name prefix check, the ARN pattern (lower case,
see ``model/job_family.py``), the IAM scoping, the EventBridge pattern of SageMaker's state-change events, the
environment the functions read the family from, and the output, profiler and rule-output locations.

How each kind of family is enforced (the functions always apply :class:`~cdk_sagemaker_debugger.model.contract.JobFamily`
before they act, after DescribeTrainingJob and, where tags decide, ListTags):

================  =============================================  =================================================
family            IAM (Service Authorization Reference)          EventBridge (SageMaker Training Job State Change)
================  =============================================  =================================================
name prefix       resource ``training-job/<prefix>*``            ``detail.TrainingJobName`` prefix
tag               ``training-job/*`` with ``aws:ResourceTag/<k>``  ``detail.Tags.<key>`` equals the value (the event's
                  (a condition key of the training-job resource)  detail carries the job's ``Tags`` map)
SageMaker         ``training-job/pipelines-*`` with               ``detail.TrainingJobName`` prefix ``pipelines-``;
Pipeline          ``aws:ResourceTag/sagemaker:pipeline-           the pipeline is read from the job's
                  execution-arn`` like ``...:pipeline/<name>/      ``sagemaker:pipeline-execution-arn`` tag at run
                  execution/*``                                   time
================  =============================================  =================================================

Sources: the Service Authorization Reference for SageMaker lists ``aws:ResourceTag/${TagKey}`` among the condition
keys of the ``training-job`` resource type
(https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemaker.html); the SageMaker
developer guide's sample "SageMaker Training Job State Change" event carries ``detail.Tags`` as a map
(https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html); the pipeline tag: see
``model/contract.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import IConstruct

from ..model.contract import (
    JOB_FAMILY_ENV,
    PIPELINE_EXECUTION_TAG,
    PIPELINE_JOB_NAME_PREFIX,
    SAGEMAKER_SOURCE,
    TRAINING_JOB_STATE_CHANGE,
    JobFamily,
)
from ..model.errors import ConfigurationError, ConfigurationTypeError
from ..model.job_family import check_job_name_prefix, check_pipeline_name, check_tag, family_label, job_name_pattern
from ._cdk.checks import check_kind, key_prefix
from ._cdk.images import concrete_region
from ._cdk.lazy import path_of

if TYPE_CHECKING:  # pragma: no cover
    from aws_cdk import aws_stepfunctions as sfn

    from ..model.debugger_rules import Rule
    from .rule_set import ProfilerRuleSet

__all__ = ["TrainingJobs", "JobOrigin", "family_metric", "TRAINING_NAMESPACE"]

#: The CloudWatch namespace of SageMaker's training-job metrics.
TRAINING_NAMESPACE = "/aws/sagemaker/TrainingJobs"

_BUCKET = "an s3.IBucket such as s3.Bucket.from_bucket_name(stack, 'Out', 'my-bucket')"


@dataclass
class JobOrigin:
    """What the ProfiledTrainingJob that starts a family's runs tells the constructs watching them: plain data, no
    reference to the job (``job.training_jobs.origin``; None for the factories' families)."""

    #: The job's construct path, for messages.
    path: str
    #: The job's concrete region, or None in an environment-agnostic stack.
    region: str | None
    #: ARN pattern of the job's runs (``...:training-job/<prefix>-*``).
    arn_pattern: str
    #: The instance type of every run.
    instance_type: str
    #: The job's profiler rules, or None.
    rule_set: ProfilerRuleSet | None
    #: The job's debugger (tensor) rules; the job's own list, so rules added later are in it.
    debugger_rules: Sequence[Rule]
    #: Each execution starts one run.
    state_machine: sfn.IStateMachine
    #: Where the job's rule engine writes its profiler reports, when not the RuleEvaluator.
    rule_report_location: str | None
    #: The RuleEvaluator of the job's rules, once the job has one.
    evaluator: Any = None

    def rule_names(self) -> set[str]:
        """The names of the job's rules (profiler and debugger rules) as they are now."""
        names = {rule.name for rule in self.rule_set.rules} if self.rule_set is not None else set()
        names |= {rule.name for rule in self.debugger_rules}
        return {name for name in names if isinstance(name, str)}


class TrainingJobs:
    """A family of SageMaker training jobs and where they write: what RuleAlarm, RuleEvaluator and TrainingDashboard
    take as ``training_jobs=``.

    Build one with a factory (``from_job_name_prefix``, ``from_tag``, ``from_pipeline``) or take a
    ProfiledTrainingJob's own (``job.training_jobs``). Every factory takes:

    Args:
        output_bucket: the jobs' ``OutputDataConfig`` bucket, where the evaluator keeps its state and reports under
            ``<output_prefix>/<job>/rule-output/``. Required.
        output_prefix: the key prefix of the jobs' output in that bucket. Default: none (the bucket's root).
        profiler_bucket: where the jobs' profiler files are. Default: ``output_bucket``.
        profiler_prefix: their key prefix there. Default: ``output_prefix`` when ``profiler_bucket`` is not given,
            otherwise none.
        execution_role: the role the jobs run as; when given, the functions act only on jobs running as this role.
            Default: none (a name-prefix family's name decides alone; a tag or pipeline family needs a role).
        execution_roles: several roles the jobs run as (the steps of a pipeline, or jobs of several teams sharing a
            tag), instead of ``execution_role``; the functions act only on jobs running as one of them. Default: none.

    A tag or pipeline family needs ``execution_role`` or ``execution_roles``: anyone allowed ``sagemaker:AddTags``
    can tag a job into it, while running a job as a role needs ``iam:PassRole`` on that role.

    Example::

        jobs = TrainingJobs.from_tag("team", "vision", output_bucket=bucket)
        RuleAlarm(stack, "Alarm", training_jobs=jobs, actions=[Email("ml-team@example.com")])
    """

    def __init__(self, family: JobFamily, *, output_bucket: s3.IBucket, output_prefix: str | None = None,
                 profiler_bucket: s3.IBucket | None = None, profiler_prefix: str | None = None,
                 execution_role: iam.IRole | None = None, origin: JobOrigin | None = None,
                 label: str, execution_roles: Sequence[iam.IRole] | None = None) -> None:
        where = origin.path if origin is not None else "TrainingJobs"
        check_kind(output_bucket, "arn_for_objects", where=where, field="output_bucket", expected=_BUCKET)
        if output_bucket is None:
            raise ConfigurationError(f"needs output_bucket= ({_BUCKET}): the jobs' OutputDataConfig bucket.",
                                     where=where, field="output_bucket")
        check_kind(profiler_bucket, "arn_for_objects", where=where, field="profiler_bucket", expected=_BUCKET)
        roles = _check_roles(execution_role, execution_roles, where=where)
        if family.needs_tags and not roles:
            kind = "tag" if family.tag_key is not None else "SageMaker Pipeline"
            raise ConfigurationError(
                f"a {kind} family needs the role its jobs run as: anyone allowed sagemaker:AddTags can tag a job into "
                "it, while running a job as a role needs iam:PassRole on that role. Pass execution_role=iam.Role."
                "from_role_arn(stack, 'JobRole', 'arn:aws:iam::<account>:role/<role>'), or execution_roles=[...] for "
                "jobs running as several roles" + (" (TrainingPipeline(...).training_jobs knows its steps' roles)."
                                                   if family.pipeline_name is not None else "."),
                where=where, field="execution_role")
        if roles and not family.execution_role_arns:
            family = dataclasses.replace(family, execution_role_arns=tuple(role.role_arn for role in roles))
        #: Which jobs, as the functions apply it.
        self.family = family
        #: Human-readable description, for descriptions and messages (for example ``training jobs resnet-*``).
        self.label = family_label(label)
        self.output_bucket = output_bucket
        self.output_prefix: str = key_prefix(output_prefix, where=where, field="output_prefix") or ""
        self.profiler_bucket: s3.IBucket = profiler_bucket or output_bucket
        if profiler_prefix is None and profiler_bucket is None:
            profiler_prefix = self.output_prefix
        self.profiler_prefix: str = key_prefix(profiler_prefix, where=where, field="profiler_prefix") or ""
        #: The roles the jobs run as (empty: the name decides alone); the functions check each job's ``RoleArn``.
        self.execution_roles: tuple[iam.IRole, ...] = roles
        #: The one role the jobs run as, when the family has exactly one (None otherwise).
        self.execution_role: iam.IRole | None = roles[0] if len(roles) == 1 else None
        #: What the ProfiledTrainingJob whose runs these are tells about them (``job.training_jobs``), else None.
        self.origin = origin

    # -- factories -----------------------------------------------------------------------------------------------------
    @classmethod
    def from_job_name_prefix(cls, prefix: str, *, output_bucket: s3.IBucket, output_prefix: str | None = None,
                             profiler_bucket: s3.IBucket | None = None, profiler_prefix: str | None = None,
                             execution_role: iam.IRole | None = None,
                             execution_roles: Sequence[iam.IRole] | None = None) -> TrainingJobs:
        """Jobs whose name starts with ``prefix``.

        :param prefix: the start of the jobs' names, at least 3 characters (a deploy-time token is allowed).
        """
        prefix = check_job_name_prefix(prefix, where="TrainingJobs.from_job_name_prefix", field="prefix")
        return cls(JobFamily(job_name_prefix=prefix), output_bucket=output_bucket, output_prefix=output_prefix,
                   profiler_bucket=profiler_bucket, profiler_prefix=profiler_prefix, execution_role=execution_role,
                   execution_roles=execution_roles, label=f"training jobs {prefix}*")

    @classmethod
    def from_tag(cls, key: str, value: str, *, output_bucket: s3.IBucket, output_prefix: str | None = None,
                 profiler_bucket: s3.IBucket | None = None, profiler_prefix: str | None = None,
                 execution_role: iam.IRole | None = None,
                 execution_roles: Sequence[iam.IRole] | None = None) -> TrainingJobs:
        """Jobs tagged ``key=value`` and running as ``execution_role`` (or one of ``execution_roles``), wherever they
        were started (the tag must be set when the job is created). A role is required.

        :param key: the tag key (compared exactly, as IAM's ``aws:ResourceTag`` compares it).
        :param value: the tag value the jobs carry (compared exactly).
        """
        key, value = check_tag(key, value, where="TrainingJobs.from_tag")
        return cls(JobFamily(tag_key=key, tag_value=value), output_bucket=output_bucket, output_prefix=output_prefix,
                   profiler_bucket=profiler_bucket, profiler_prefix=profiler_prefix, execution_role=execution_role,
                   execution_roles=execution_roles, label=f"training jobs tagged {key}={value}")

    @classmethod
    def from_pipeline(cls, pipeline_name: str, *, output_bucket: s3.IBucket, output_prefix: str | None = None,
                      profiler_bucket: s3.IBucket | None = None, profiler_prefix: str | None = None,
                      execution_role: iam.IRole | None = None,
                      execution_roles: Sequence[iam.IRole] | None = None) -> TrainingJobs:
        """The training jobs of a SageMaker Pipeline's executions in this account and region (named
        ``pipelines-...`` and tagged with the execution by SageMaker), running as ``execution_role`` (or one of
        ``execution_roles``, one per step role). A role is required. For a ``TrainingPipeline`` of this app use
        its ``training_jobs``, which knows the steps' bucket, prefix and roles. SageMaker writes each job's output
        under ``<S3OutputPath of the step>/pipelines-.../``: ``output_prefix`` is the key part of that path (a
        ProfiledTrainingJob's step writes under its ``output_prefix``, ``"training"`` by default).

        :param pipeline_name: the pipeline's ``PipelineName`` (compared case-insensitively).
        """
        name = check_pipeline_name(pipeline_name, where="TrainingJobs.from_pipeline")
        return cls(JobFamily(job_name_prefix=PIPELINE_JOB_NAME_PREFIX, pipeline_name=name),
                   output_bucket=output_bucket, output_prefix=output_prefix, profiler_bucket=profiler_bucket,
                   profiler_prefix=profiler_prefix, execution_role=execution_role, execution_roles=execution_roles,
                   label=f"training jobs of the SageMaker Pipeline {name}")

    @classmethod
    def of_training_job(cls, job: Any) -> TrainingJobs:
        """A ProfiledTrainingJob's runs (``<prefix>-<suffix>``: the hyphen keeps a sibling ``<prefix>2`` out), with
        its output bucket and prefix, its profiler location and its execution role. Use ``job.training_jobs``.

        :param job: the ProfiledTrainingJob whose runs these are (read, not kept).
        """
        prefix = check_job_name_prefix(f"{job.job_name_prefix}-", where=path_of(job), from_job=job.job_name_prefix)
        profiler_bucket, profiler_prefix = _profiler_location(job)
        origin = JobOrigin(path=path_of(job), region=concrete_region(job), arn_pattern=job.training_job_arn_pattern,
                           instance_type=job.instance_type, rule_set=job.rule_set,
                           debugger_rules=job._engine.debugger_rule_list, state_machine=job.state_machine,
                           rule_report_location=job._engine.rule_report_location(),
                           evaluator=getattr(job, "evaluator", None))
        return cls(JobFamily(job_name_prefix=prefix), output_bucket=job.output_bucket, output_prefix=job.output_prefix,
                   profiler_bucket=profiler_bucket, profiler_prefix=profiler_prefix, execution_role=job.role,
                   origin=origin, label=f"training jobs {prefix}*")

    # -- what the constructs use -----------------------------------------------------------------------------------------
    @property
    def job_name_prefix(self) -> str:
        """The start of every job name of the family ("" for a tag family)."""
        return self.family.job_name_prefix

    @property
    def arn_pattern(self) -> str:
        """ARN pattern of the family's jobs, in lower case (``...:training-job/<prefix>*``; ``/*`` for tags)."""
        return self._arn_pattern(self.job_name_prefix)

    def _arn_pattern(self, prefix: str) -> str:
        if self.origin is not None and prefix == self.job_name_prefix:
            return self.origin.arn_pattern
        return cdk.Stack.of(self.output_bucket).format_arn(
            service="sagemaker", resource="training-job", resource_name=job_name_pattern(prefix))

    @property
    def iam_conditions(self) -> dict[str, Any] | None:
        """The IAM condition that narrows :attr:`arn_pattern` to the family (None for a name-prefix family)."""
        family = self.family
        if family.tag_key is not None:
            return {"StringEquals": {f"aws:ResourceTag/{family.tag_key}": family.tag_value}}
        if family.pipeline_name is not None:
            stack = cdk.Stack.of(self.output_bucket)
            names = dict.fromkeys((family.pipeline_name, family.pipeline_name.lower()))
            executions = [stack.format_arn(service="sagemaker", resource="pipeline", resource_name=f"{n}/execution/*")
                          for n in names]
            return {"StringLike": {f"aws:ResourceTag/{PIPELINE_EXECUTION_TAG}": executions}}
        return None

    def statement(self, *actions: str, prefix: str | None = None) -> iam.PolicyStatement:
        """A policy statement allowing the SageMaker ``actions`` on the family's jobs only (those whose name starts
        with ``prefix``, a longer prefix than the family's, when given)."""
        return iam.PolicyStatement(actions=list(actions), resources=[self._arn_pattern(prefix or self.job_name_prefix)],
                                   conditions=self.iam_conditions)

    def describe_statements(self) -> list[iam.PolicyStatement]:
        """DescribeTrainingJob on the family's jobs, and ListTags on the jobs its name pattern covers where tags
        decide: what a function needs to tell whether a job belongs."""
        statements = [self.statement("sagemaker:DescribeTrainingJob")]
        if self.family.needs_tags:
            statements.append(iam.PolicyStatement(actions=["sagemaker:ListTags"], resources=[self.arn_pattern]))
        return statements

    def grant(self, grantee: iam.IGrantable, *actions: str) -> iam.Grant:
        """Allow ``grantee`` the SageMaker ``actions`` (``sagemaker:...``) on the family's jobs only."""
        return iam.Grant.add_to_principal(grantee=grantee, actions=list(actions), resource_arns=[self.arn_pattern],
                                          conditions=self.iam_conditions)

    def grant_describe(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow ``grantee`` DescribeTrainingJob on the family's jobs (and ListTags where tags decide)."""
        grant = self.grant(grantee, "sagemaker:DescribeTrainingJob")
        if self.family.needs_tags:
            grant = grant.combine(self.grant_list_tags(grantee))
        return grant

    def grant_list_tags(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow ``grantee`` to read the tags of jobs the family's name pattern covers (to tell which belong)."""
        return iam.Grant.add_to_principal(grantee=grantee, actions=["sagemaker:ListTags"],
                                          resource_arns=[self.arn_pattern])

    def grant_stop(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow ``grantee`` to describe and stop the family's jobs."""
        return self.grant_describe(grantee).combine(self.grant(grantee, "sagemaker:StopTrainingJob"))

    def event_pattern(self, *, statuses: Sequence[str] | None = None, account: str | None = None
                      ) -> events.EventPattern:
        """EventBridge pattern of SageMaker's state-change events for the family's jobs (optionally some statuses, or
        one account's)."""
        detail: dict[str, Any] = dict(self.name_filter())
        if self.family.tag_key is not None:
            detail["Tags"] = {self.family.tag_key: [self.family.tag_value]}
        if statuses:
            detail["TrainingJobStatus"] = list(statuses)
        return events.EventPattern(source=[SAGEMAKER_SOURCE], detail_type=[TRAINING_JOB_STATE_CHANGE],
                                   account=[account] if account is not None else None, detail=detail)

    def name_filter(self) -> dict[str, Any]:
        """The ``detail`` filter on ``TrainingJobName`` for this library's own events (empty without a prefix)."""
        return {"TrainingJobName": [{"prefix": self.job_name_prefix}]} if self.job_name_prefix else {}

    def metric(self, metric_name: str, *, job_name: str | None = None, host: str = "algo-1",
               statistic: str = "Average", period: cdk.Duration | None = None,
               label: str | None = None) -> cloudwatch.IMetric:
        """A metric of ``/aws/sagemaker/TrainingJobs`` for one job's host, or for every job of the family's prefix.

        With ``job_name`` the metric has the ``Host=<job_name>/<host>`` dimension (alarm-ready). Without it, a SEARCH
        expression collects the metric of every job whose name starts with the prefix (for dashboards).

        :param metric_name: SageMaker's metric, such as ``GPUUtilization``.
        :param job_name: one job's name. Default: None (every job of the family).
        :param host: the host of ``job_name``. Default: ``"algo-1"``.
        :param statistic: Default: ``"Average"``.
        :param period: Default: one minute.
        :param label: Default: None (the metric's name and the prefix).
        """
        return family_metric(self.job_name_prefix, metric_name, job_name=job_name, host=host, statistic=statistic,
                             period=period, label=label)

    @property
    def environment(self) -> dict[str, str]:
        """What a function needs to apply the family at run time."""
        return {JOB_FAMILY_ENV: self.family.to_json()}

    def output_key_pattern(self, below: str) -> str:
        """Key pattern of ``below`` (for example ``rule-output/*``) under each job's output folder."""
        out = f"{self.output_prefix}/" if self.output_prefix else ""
        return f"{out}{self.job_name_prefix}*/{below}"

    def profiler_key_pattern(self, below: str) -> str:
        """Key pattern of ``below`` under each job's profiler folder."""
        prof = f"{self.profiler_prefix}/" if self.profiler_prefix else ""
        return f"{prof}{self.job_name_prefix}*/{below}"

    @property
    def profiler_s3_uri(self) -> str:
        """Where the jobs' profiler files are (``s3://bucket/prefix``)."""
        return f"s3://{self.profiler_bucket.bucket_name}/{self.profiler_prefix}".rstrip("/")

    def check_region(self, scope: IConstruct, *, what: str) -> None:
        """Fail when ``scope`` and the ProfiledTrainingJob of the family sit in two different concrete regions:
        EventBridge delivers SageMaker's events, and ListTrainingJobs lists jobs, only in the job's region."""
        if self.origin is None:
            return
        here, there = concrete_region(scope), self.origin.region
        if here is not None and there is not None and here != there:
            raise ConfigurationError(
                f"{what} is in {here}, but the training job {self.origin.path} runs in {there}; it would "
                f"never hear of the job's runs (SageMaker's events and job listings stay in the job's region). Create "
                f"it in a stack in {there}.", where=scope.node.path, field="training_jobs", value=there)


def family_metric(
    job_name_prefix: str,
    metric_name: str,
    *,
    job_name: str | None = None,
    host: str = "algo-1",
    statistic: str = "Average",
    period: cdk.Duration | None = None,
    label: str | None = None,
) -> cloudwatch.IMetric:
    """A metric of ``/aws/sagemaker/TrainingJobs`` for one job's host, or for every job whose name starts with
    ``job_name_prefix`` (see :meth:`TrainingJobs.metric`)."""
    period = period or cdk.Duration.minutes(1)
    if job_name is not None:
        return cloudwatch.Metric(
            namespace=TRAINING_NAMESPACE,
            metric_name=metric_name,
            dimensions_map={"Host": f"{job_name}/{host}"},
            statistic=statistic,
            period=period,
            label=label,
        )
    # An unquoted value is a partial (token) match in CloudWatch search; a quoted one would have to equal the whole
    # Host value "<job>/algo-<n>" and would match nothing.
    search = (
        f"SEARCH('{{{TRAINING_NAMESPACE},Host}} MetricName=\"{metric_name}\" "
        f"Host={job_name_prefix.rstrip('-')}', '{statistic}', {int(period.to_seconds())})"
    )
    return cloudwatch.SearchExpression(expression=search, label=label or f"{metric_name} {job_name_prefix}*",
                                       period=period)


def check_training_jobs(value: object, *, where: str) -> TrainingJobs:
    """``training_jobs=`` of a construct: a TrainingJobs (a ProfiledTrainingJob is taken as its own family)."""
    if isinstance(value, TrainingJobs):
        return value
    # a ProfiledTrainingJob (known by what it does: this module does not import the construct)
    own = getattr(value, "training_jobs", None) if callable(getattr(value, "render_request", None)) else None
    if isinstance(own, TrainingJobs):
        return own
    raise ConfigurationTypeError(
        f"expected TrainingJobs, got {type(value).__name__} {value!r}. Pass job.training_jobs for a "
        "ProfiledTrainingJob, or TrainingJobs.from_job_name_prefix(...), .from_tag(...) or .from_pipeline(...) "
        "for jobs started elsewhere.", where=where, field="training_jobs", value=value)


_ROLE = "an iam.IRole such as iam.Role.from_role_arn(stack, 'Role', 'arn:aws:iam::...:role/...')"


def _check_roles(role: object, roles: object, *, where: str) -> tuple[iam.IRole, ...]:
    """``execution_role=`` and ``execution_roles=`` of a family as one tuple (at most one of the two given)."""
    check_kind(role, "role_arn", where=where, field="execution_role", expected=_ROLE)
    if roles is None:
        return (role,) if role is not None else ()  # type: ignore[return-value]
    if role is not None:
        raise ConfigurationError("give execution_role= or execution_roles=, not both (put every role in "
                                 "execution_roles).", where=where, field="execution_roles")
    if isinstance(roles, (str, bytes)) or not isinstance(roles, Sequence) or not roles:
        raise ConfigurationTypeError(f"expected a non-empty list of iam.IRole, got {type(roles).__name__} {roles!r}.",
                                     where=where, field="execution_roles", value=roles)
    for index, each in enumerate(roles):
        check_kind(each, "role_arn", where=where, field=f"execution_roles[{index}]", expected=_ROLE)
        if each is None:
            raise ConfigurationTypeError(f"expected {_ROLE}, got None.", where=where,
                                         field=f"execution_roles[{index}]")
    return tuple(dict.fromkeys(roles))


def _bucket_and_prefix(uri: str) -> tuple[str, str] | None:
    """Bucket and key prefix of ``s3://bucket/prefix``; either may hold deploy-time tokens (a token has no ``/``). None
    when the URI is a token as a whole, so its bucket is unknown at synth."""
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        return None
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    return (bucket, prefix.strip("/")) if bucket else None


def _profiler_location(job: Any) -> tuple[s3.IBucket | None, str | None]:
    """The bucket and key prefix the job's profiler writes to (None, None: the job's output location)."""
    uri = job.profiler_s3_uri
    if uri == job.output_s3_uri:
        return None, None
    parsed = _bucket_and_prefix(uri)
    if parsed is None:
        raise ConfigurationError(
            f"the training job's profiler output path {uri!r} is known only at deploy time, so a family of its jobs "
            "cannot tell which bucket to read. Use TrainingJobs.from_job_name_prefix(..., profiler_bucket=...) for "
            "the bucket the profiler writes to.", where=job.node.path, field="profiler_s3_uri", value=uri)
    name, prefix = parsed
    existing = job.node.try_find_child("ProfilerBucket")
    bucket = existing if existing is not None else s3.Bucket.from_bucket_name(job, "ProfilerBucket", name)
    return bucket, prefix  # type: ignore[return-value]
