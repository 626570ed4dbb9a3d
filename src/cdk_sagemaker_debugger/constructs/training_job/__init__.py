"""ProfiledTrainingJob: a validated CreateTrainingJob request with profiler and debugger rules, launched by Step Functions
(.sync).

The job is a package, one part per concept: ``.steps`` (the constructor's steps), ``.channels`` (input channels),
``.props`` (prop checks that need the construct), ``.execution_role`` (the role's statements and their cdk-nag
findings), ``.state_machine`` (naming, launching, run on deploy), ``.pipeline`` (the Pipelines step) and
``.engines`` (what each rule engine adds). The request's members are rendered in ``model/request/``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct

from ...model.api_model import validate_request
from ...model.debug_hook import DebugHookConfig, TensorBoardOutputConfig
from ...model.debugger_request import resolve_debug_hook
from ...model.debugger_rules import Rule
from ...model.distribution import Distribution
from ...model.errors import ConfigurationError
from ...model.frameworks import FrameworkInfo
from ...model.images import partition_of
from ...model.job_family import job_name_pattern
from ...model.profiler_config import ProfilerConfig
from ...model.request.members import (
    ExperimentConfig,
    InstanceGroup,
    MlflowConfig,
    RequestMembers,
    TrainingImageConfig,
    request_members,
)
from ...model.rule_engine import RuleEngine
from ..family import TrainingJobs, family_metric
from ..rule_set import ProfilerRuleSet
from ..sampler import DEFAULT_SAMPLER, Sampler
from . import props, steps
from ._shared import PSEUDO, WARNING_PREFIX
from .channels import InputChannel
from .pipeline import pipeline_step as _pipeline_step
from .request import render_job_request

__all__ = ["ProfiledTrainingJob", "InputChannel", "family_metric"]


@jsii.implements(iam.IGrantable, ec2.IConnectable)
class ProfiledTrainingJob(Construct):
    """A SageMaker training job with profiler rules, synthesized as a complete CreateTrainingJob request.

    Each execution of :attr:`state_machine` starts one job named ``<job_name_prefix>-<20 hex characters>`` through the
    Step Functions ``createTrainingJob.sync`` integration and waits for it to finish. The request is validated against
    botocore's SageMaker model (types, lengths, ranges, patterns and enums) when the app synthesizes.

    Who evaluates the rules (``rule_engine``):

    * ``RuleEngine.EVALUATOR`` (default): works in every account, without SageMaker Debugger. The request carries no
      Debugger member. ``sampler`` (default ``Sampler(interval_millis=500)``) is delivered to every container as an
      input channel and started through ``PYTHONPATH``; it writes Debugger's profiler layout to
      ``<output>/<job>/profiler-output/``. With a ``rule_set`` the job creates :attr:`evaluator`, a
      :class:`cdk_sagemaker_debugger.RuleEvaluator` that evaluates the rules from those files (CloudWatch for runs without them), or uses the
      one passed as ``evaluator=``. ``sampler=None``: no sampler, CloudWatch-only rules.
    * ``RuleEngine.DEBUGGER``: the request the SageMaker Python SDK sends, byte for byte: ``profiler`` (ProfilerConfig)
      and the rule set's ProfilerRuleConfigurations, plus debugger (tensor) rules with their hook, collections and
      actions; the execution role this construct creates gets what the rule containers need (rule images, uploaded
      rule sources, the ``SMDebugRules`` topic and StopTrainingJob on this job's prefix). Combinations Debugger cannot
      run (``distribution`` with checkpointing, model parallel, Trainium with the profiler, regions without Debugger)
      fail when the construct is created, or at synth for rules added later.

    A role you pass is used unchanged (no grants). The execution role this construct creates may not write the
    RuleEvaluator's state and reports of its runs (``<output>/<prefix>-*/rule-output/evaluator-state/*`` and
    ``.../rule-output/*/evaluator-output/*``).

    Every prop but ``job_name_prefix`` and one of ``training_image`` / ``algorithm_name`` is optional. docs/request.md
    names the prop that sets each CreateTrainingJob member; a prop documented "Default: None" leaves its member out of
    the request.

    Args:
        job_name_prefix: each run's job is ``<job_name_prefix>-<20 hex characters>``; letters, digits and ``-``
            with a letter or digit at each end, at most 42 characters. Choose one no other job's prefix starts (the IAM
            grants and alarms cover ``<prefix>-*``). Required.
        training_image: the training container image URI (``AlgorithmSpecification.TrainingImage``). Exactly one of
            ``training_image`` and ``algorithm_name``. Default: None.
        algorithm_name: a SageMaker algorithm (``AlgorithmSpecification.AlgorithmName``); it runs no sampler.
            Default: None.
        training_image_repository: the ECR repository of ``training_image``, granted pull as a CDK object (needed for
            a repository of another account or a token URI). Default: None (ECR images are granted from the URI).
        training_input_mode: ``File``, ``Pipe`` or ``FastFile``. Default: ``"File"``.
        instance_type: Default: ``"ml.m5.xlarge"``.
        instance_count: Default: 1.
        volume_size_in_gb: the training volume of each instance. Default: 30.
        volume_kms_key: encrypts the training volumes (``ResourceConfig.VolumeKmsKeyId``); the created role may use
            it. Default: None (SageMaker's key).
        role: the execution role, used unchanged. Default: a new role with least privilege for this job's prefix.
        inputs: :class:`InputChannel` s the job reads; the created role may read each. Default: none.
        output_bucket: where artifacts, profiler data and rule output land. Default: a new versioned bucket, SSL only,
            encrypted with ``output_kms_key`` or else the AWS managed key ``aws/s3``.
        output_prefix: the key prefix under the bucket, ``""`` for its root. Default: ``"training"``.
        output_kms_key: encrypts the output (``OutputDataConfig.KmsKeyId``); the created role may use it.
            Default: None.
        max_runtime: ``StoppingCondition.MaxRuntimeInSeconds``, whole seconds. Default: one day.
        use_spot_instances: managed spot training. Default: False.
        max_wait: ``StoppingCondition.MaxWaitTimeInSeconds`` (spot), whole seconds. Default: None.
        checkpoint_s3_uri: where SageMaker copies checkpoints; the created role may write there. Default: None.
        checkpoint_local_path: the checkpoint folder in the container; needs ``checkpoint_s3_uri``. Default: None
            (SageMaker's ``/opt/ml/checkpoints``).
        hyperparameters: values become strings. Default: None.
        environment: container environment variables (the sampler's own names are refused). Default: None.
        vpc: run the job in this VPC (the job is then an ``ec2.IConnectable``). Default: None.
        vpc_subnets: needs ``vpc``. Default: the VPC's private subnets with egress.
        security_groups: needs ``vpc``. Default: a new security group when ``vpc`` is given.
        enable_network_isolation: no network access from the container (no sampler either). Default: False.
        encrypt_inter_container_traffic: Default: False.
        tags: tags of every run's job. Default: none.
        profiler: Debugger's ProfilerConfig, RuleEngine.DEBUGGER only. Default: system monitoring on, switched off
            with a note where SageMaker cannot run it (regions without Debugger, Trainium).
        rule_set: the profiler rules evaluated for every run. Default: None (no rules).
        rule_engine: who evaluates the rules (see above). Default: ``RuleEngine.EVALUATOR``.
        sampler: the in-container sampler of RuleEngine.EVALUATOR, or None for none. Default:
            ``Sampler(interval_millis=500)``, left out with a note where it cannot run (algorithms, network isolation).
        evaluator: a :class:`cdk_sagemaker_debugger.RuleEvaluator` to use instead of creating one; it must cover this job's family.
            Default: None (a new one with RuleEngine.EVALUATOR and a ``rule_set``).
        debugger_rules: debugger (tensor) rules; add more with :meth:`add_debugger_rule`. With RuleEngine.EVALUATOR the
            RuleEvaluator runs 13 of them from the tensor collector's files (docs/tensor-rules.md). Default: none.
        debug_hook: a DebugHookConfig, True (the default hook) or False (none; an error with debugger rules).
            Default: None (the default hook when there are debugger rules).
        tensorboard: Debugger's TensorBoardOutputConfig, RuleEngine.DEBUGGER only. Default: None.
        distribution: the training's distribution (``Distribution.mpi()``, ...), checked against what Debugger can
            profile. Default: None.
        run_on_deploy: start a run when the stack is deployed and whenever the request changes. Default: False.
        metric_definitions: ``{"train:loss": r"loss=([0-9.]+)"}``, metric name -> regex whose first group captures
            the value (``AlgorithmSpecification.MetricDefinitions``, at most 40). Default: None.
        enable_sagemaker_metrics_time_series: Default: None.
        retry_attempts: ``RetryStrategy.MaximumRetryAttempts``, 1-30. Default: None (no retries).
        training_image_config: a :class:`cdk_sagemaker_debugger.TrainingImageConfig` for a private registry. Default: None.
        instance_groups: :class:`cdk_sagemaker_debugger.InstanceGroup` s of a heterogeneous cluster, instead of ``instance_type`` and
            ``instance_count`` (leave those at their defaults). Default: None.
        keep_alive: warm pool, ``cdk.Duration`` in whole seconds (``KeepAlivePeriodInSeconds``, range from botocore's
            model). Default: None.
        infra_check: ``EnableInfraCheck``. Default: None.
        remote_debug: ``EnableRemoteDebug``. Default: None.
        container_entrypoint: a list of strings. Default: None (the image's own).
        container_arguments: a list of strings. Default: None (the image's own).
        experiment_config: an :class:`cdk_sagemaker_debugger.ExperimentConfig`. Default: None.
        mlflow: an :class:`cdk_sagemaker_debugger.MlflowConfig`. Default: None.
        session_tag_chaining: ``EnableSessionTagChaining``. Default: None.
        request_overrides: any member no prop sets, deep-merged into AlgorithmSpecification, OutputDataConfig,
            ResourceConfig and StoppingCondition or set whole; members a prop sets are refused. Default: None.
        code: a :class:`cdk_sagemaker_debugger.TrainingCode` (``from_asset`` / ``from_bucket`` / ``from_s3_uri``): the
            SDK's ``sagemaker_program``, ``sagemaker_submit_directory`` and ``distribution`` launcher hyperparameters
            for a framework image; the created role may read the archive. Default: None (the image's own code).
        checkpoints: a :class:`cdk_sagemaker_debugger.Checkpoints` instead of ``checkpoint_s3_uri`` /
            ``checkpoint_local_path``, granted read/write on exactly its prefix (and its bucket's key). Default: None.
        enable_inter_container_traffic_encryption: encrypts the traffic between the instances of a run (the API's
            name; ``encrypt_inter_container_traffic`` still works). Costs training time: every collective operation
            between hosts goes through encryption. Default: None (``encrypt_inter_container_traffic``).
    """

    #: The prefix of every run's job name (``<job_name_prefix>-<20 hex characters>``).
    job_name_prefix: str
    #: The training container image URI, or None with ``algorithm_name``.
    training_image: str | None
    #: The SageMaker algorithm, or None with ``training_image``.
    algorithm_name: str | None
    #: The ECR repository granted pull as a CDK object, or None.
    training_image_repository: ecr.IRepository | None
    #: ``File``, ``Pipe`` or ``FastFile``.
    training_input_mode: str
    #: The instance type of every run (ignored with ``instance_groups``).
    instance_type: str
    #: Instances per run.
    instance_count: int
    #: The training volume of each instance, in GB.
    volume_size_in_gb: int
    #: The key of the training volumes, or None for SageMaker's.
    volume_kms_key: kms.IKey | None
    #: The input channels, in request order (the sampler's channel is added when the request is rendered).
    inputs: tuple[InputChannel, ...]
    #: Who evaluates the rules.
    rule_engine: RuleEngine
    #: Debugger's profiler settings (always disabled with RuleEngine.EVALUATOR, which never sends them).
    profiler: ProfilerConfig
    #: The profiler rules, or None.
    rule_set: ProfilerRuleSet | None
    #: The run time limit as given (None: one day).
    max_runtime: cdk.Duration | None
    #: The spot wait limit as given, or None.
    max_wait: cdk.Duration | None
    #: Managed spot training.
    use_spot_instances: bool
    #: Where SageMaker copies checkpoints, or None.
    checkpoint_s3_uri: str | None
    #: The checkpoint folder in the container, or None.
    checkpoint_local_path: str | None
    #: No network access from the container.
    enable_network_isolation: bool
    #: Encrypted traffic between the instances of a run.
    encrypt_inter_container_traffic: bool
    #: Tags of every run's job.
    tags: dict[str, str]
    #: The request members beyond the basics (docs/request.md), checked against botocore's model and rendered.
    request_members: RequestMembers
    #: The framework and version read from ``training_image`` (None for other images and algorithms).
    framework: FrameworkInfo | None
    #: The sampler the job's containers run (RuleEngine.EVALUATOR), or None.
    sampler: Sampler | None
    #: Where the runs write: the given bucket or the one this construct created.
    output_bucket: s3.IBucket
    #: The key of the output, or None.
    output_kms_key: kms.IKey | None
    #: The key prefix under :attr:`output_bucket`, without surrounding slashes (``""``: the bucket root).
    output_prefix: str
    #: OutputDataConfig.S3OutputPath. Model artifacts land in ``<output_s3_uri>/<job>/output/``.
    output_s3_uri: str
    #: Where profiler data lands: ``<profiler_s3_uri>/<job>/profiler-output/`` (ProfilerConfig.S3OutputPath with
    #: Debugger; the output location for the sampler).
    profiler_s3_uri: str
    #: The sampler bundle (an S3 asset, one per stack) delivered as an input channel, or None without a sampler.
    sampler_bundle: s3_assets.Asset | None
    #: Rule outputs land in ``<rule_output_s3_uri>/<job>/rule-output/<RuleConfigurationName>/``.
    rule_output_s3_uri: str
    #: The hook setting as given; :attr:`debug_hook` is the hook the job runs.
    debug_hook_setting: DebugHookConfig | bool | None
    #: Debugger's TensorBoard output, or None.
    tensorboard: TensorBoardOutputConfig | None
    #: The training's distribution, or None.
    distribution: Distribution | None
    #: The execution role every run uses: the given one or the one this construct created.
    role: iam.IRole
    #: The VPC the runs join, or None.
    vpc: ec2.IVpc | None
    #: The runs' security groups (given, or one created with ``vpc``; empty without a VPC).
    security_groups: list[ec2.ISecurityGroup]
    #: Names the run ``<prefix>-<20 hex characters>`` into ``$.trainingRun.TrainingJobName``; the job and the
    #: Debugger rules that act on it (StopTraining, StalledTrainingRule) read the name from there.
    naming_state: sfn.CustomState
    #: The ``createTrainingJob.sync`` task that starts the run's job and waits for it.
    launch_state: sfn.CustomState
    #: The state machine's execution log (one year).
    log_group: logs.LogGroup
    #: Each execution starts and waits for one training job.
    state_machine: sfn.StateMachine
    #: The RuleEvaluator that evaluates this job's rules (RuleEngine.EVALUATOR with a rule set, or the one passed
    #: as ``evaluator=``); None when Debugger evaluates them or there are no rules.
    evaluator: Any
    #: The custom resource that starts a run on deploy (``run_on_deploy=True``), or None.
    deploy_trigger: cr.AwsCustomResource | None
    #: The training code (``code=``), or None.
    training_code: Any
    #: Where the training code is once bound (its S3 URI, entry point, asset), or None.
    training_code_location: Any
    #: The checkpoint location (``checkpoints=`` or ``checkpoint_s3_uri=``), or None.
    checkpoints: Any

    def __init__(
        self, scope: Construct, id: str, *,
        job_name_prefix: str, training_image: str | None = None, algorithm_name: str | None = None,
        training_image_repository: ecr.IRepository | None = None, training_input_mode: str = "File",
        instance_type: str = "ml.m5.xlarge", instance_count: int = 1, volume_size_in_gb: int = 30,
        volume_kms_key: kms.IKey | None = None, role: iam.IRole | None = None, inputs: Sequence[InputChannel] | None = None,
        output_bucket: s3.IBucket | None = None, output_prefix: str = "training", output_kms_key: kms.IKey | None = None,
        max_runtime: cdk.Duration | None = None, use_spot_instances: bool = False, max_wait: cdk.Duration | None = None,
        checkpoint_s3_uri: str | None = None, checkpoint_local_path: str | None = None, run_on_deploy: bool = False,
        hyperparameters: Mapping[str, Any] | None = None, environment: Mapping[str, Any] | None = None,
        vpc: ec2.IVpc | None = None, vpc_subnets: ec2.SubnetSelection | None = None,
        security_groups: Sequence[ec2.ISecurityGroup] | None = None, enable_network_isolation: bool = False,
        encrypt_inter_container_traffic: bool = False, tags: Mapping[str, str] | None = None,
        profiler: ProfilerConfig | None = None, rule_set: ProfilerRuleSet | None = None,
        rule_engine: RuleEngine = RuleEngine.EVALUATOR, sampler: Sampler | None = DEFAULT_SAMPLER, evaluator: Any = None,
        debugger_rules: Sequence[Rule] | None = None, debug_hook: DebugHookConfig | bool | None = None,
        tensorboard: TensorBoardOutputConfig | None = None, distribution: Distribution | None = None,
        metric_definitions: Mapping[str, str] | None = None, enable_sagemaker_metrics_time_series: bool | None = None,
        retry_attempts: int | None = None, training_image_config: TrainingImageConfig | None = None,
        instance_groups: Sequence[InstanceGroup] | None = None, keep_alive: cdk.Duration | None = None,
        infra_check: bool | None = None, remote_debug: bool | None = None, session_tag_chaining: bool | None = None,
        container_entrypoint: Sequence[str] | None = None, container_arguments: Sequence[str] | None = None,
        experiment_config: ExperimentConfig | None = None, mlflow: MlflowConfig | None = None,
        request_overrides: Mapping[str, Any] | None = None, code: Any = None, checkpoints: Any = None,
        enable_inter_container_traffic_encryption: bool | None = None,
    ) -> None:
        """Every prop is checked before the first resource exists; the props are documented on the class."""
        super().__init__(scope, id)
        steps.start(self, scope, id)
        props.check_identity(
            self, job_name_prefix=job_name_prefix, training_image=training_image, algorithm_name=algorithm_name,
            output_prefix=output_prefix, training_input_mode=training_input_mode, instance_type=instance_type,
            instance_count=instance_count, volume_size_in_gb=volume_size_in_gb)
        steps.record_identity(self, job_name_prefix, training_image, algorithm_name, training_input_mode, instance_type,
                              instance_count, volume_size_in_gb)
        steps.record_engine(self, rule_engine, profiler, rule_set, distribution, instance_type)
        steps.record_stopping(self, max_runtime, max_wait, use_spot_instances)
        encrypt_inter_container_traffic = steps.record_checkpoints(self,
            checkpoints, checkpoint_s3_uri, checkpoint_local_path, encrypt_inter_container_traffic,
            enable_inter_container_traffic_encryption, vpc=vpc, vpc_subnets=vpc_subnets, security_groups=security_groups)
        steps.record_container_props(self,
            hyperparameters=hyperparameters, environment=environment, inputs=inputs, tags=tags, volume_kms_key=volume_kms_key,
            training_image_repository=training_image_repository, enable_network_isolation=enable_network_isolation,
            encrypt_inter_container_traffic=encrypt_inter_container_traffic)
        self.request_members = request_members(
            where=self._where, instance_type=instance_type, instance_count=instance_count,
            metric_definitions=metric_definitions, enable_sagemaker_metrics_time_series=enable_sagemaker_metrics_time_series,
            retry_attempts=retry_attempts, training_image_config=training_image_config, instance_groups=instance_groups,
            keep_alive_seconds=None if keep_alive is None else keep_alive.to_milliseconds() / 1000,
            infra_check=infra_check, remote_debug=remote_debug, container_entrypoint=container_entrypoint,
            container_arguments=container_arguments, experiment_config=experiment_config, mlflow=mlflow,
            session_tag_chaining=session_tag_chaining, request_overrides=request_overrides)
        steps.create_outputs(self, sampler, output_bucket, output_kms_key, output_prefix, debugger_rules, debug_hook,
                             tensorboard, code)
        steps.create_role_and_network(self, role, vpc, vpc_subnets, security_groups)
        steps.launch(self, evaluator, run_on_deploy)

    # ------------------------------------------------------------------------------------------------------------------
    @functools.cached_property
    def training_jobs(self) -> TrainingJobs:
        """This construct's runs as a job family (``<prefix>-*``, its output and profiler locations, its role): what
        RuleAlarm, RuleEvaluator and TrainingDashboard take as ``training_jobs=``."""
        return TrainingJobs.of_training_job(self)

    @property
    def grant_principal(self) -> iam.IPrincipal:
        """The execution role: ``bucket.grant_read(job)`` lets the training jobs read the bucket (iam.IGrantable)."""
        return self.role.grant_principal

    @property
    def connections(self) -> ec2.Connections:
        """The jobs' security groups (ec2.IConnectable), for ``database.connections.allow_default_port_from(job)``.
        Only for a job in a VPC."""
        if self.vpc is None:
            raise ConfigurationError("has no network connections without vpc=; create the job in a VPC to use it as "
                                     "an ec2.IConnectable.", where=self._where, field="vpc")
        return ec2.Connections(security_groups=self.security_groups)

    @functools.cached_property
    def training_job_arn_pattern(self) -> str:
        """ARN pattern of every job this construct starts (``...:training-job/<prefix>-*``; lower case, see
        ``model/job_family.py``)."""
        return self._arn("sagemaker", f"training-job/{job_name_pattern(self.job_name_prefix + '-')}")

    def grant_sampler(self, grantee: iam.IGrantable) -> iam.Grant:
        """Give a role you pass (``role=``) what the sampler needs: the bundle object, the profiler-output prefix."""
        from ..sampler_grants import grant_sampler

        return grant_sampler(self, grantee)

    def grant_start_execution(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow ``grantee`` to start training runs (executions of the state machine)."""
        return self.state_machine.grant_start_execution(grantee)

    def grant_stop_training_job(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow ``grantee`` to describe and stop the jobs of this construct (and only those)."""
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob"],
            resource_arns=[self.training_job_arn_pattern],
        )

    # -- Debugger ----------------------------------------------------------------------------------------------------
    @property
    def debugger_rules(self) -> tuple[Rule, ...]:
        """The debugger (tensor) rules, in the order they are sent."""
        return self._engine.debugger_rules

    @property
    def debug_hook(self) -> DebugHookConfig | None:
        """The hook the job runs: the given DebugHookConfig, the default one (with debugger rules or
        ``debug_hook=True``), or None."""
        return resolve_debug_hook(self.debug_hook_setting, bool(self.debugger_rules), self._where)

    @property
    def debugger_rule_source_assets(self) -> tuple[s3_assets.Asset, ...]:
        """S3 assets made from the custom debugger rules' local source files."""
        return self._engine.debugger_rule_source_assets

    @property
    def rule_actions_policy(self) -> iam.Policy | None:
        """The execution role's permissions for debugger rule actions (created with the first rule that has actions),
        or None."""
        return self._engine.rule_actions_policy

    def add_debugger_rule(self, rule: Rule) -> Rule:
        """Add a debugger rule and return it. Raises at once, leaving the job unchanged, when the rule breaks an API
        limit, a collection agreement or a guard rail; otherwise uploads its local source and grants what it needs."""
        return self._engine.add_debugger_rule(rule)

    # -- metrics -------------------------------------------------------------------------------------------------------
    def metric(
        self,
        metric_name: str,
        *,
        job_name: str | None = None,
        host: str = "algo-1",
        statistic: str = "Average",
        period: cdk.Duration | None = None,
        label: str | None = None,
    ) -> cloudwatch.IMetric:
        """A metric of ``/aws/sagemaker/TrainingJobs`` for one job's host, or for every job of this prefix.

        With ``job_name`` the metric has the ``Host=<job_name>/<host>`` dimension (alarm-ready). Without it, a SEARCH
        expression collects the metric of every job whose name starts with the prefix (for dashboards).
        """
        return family_metric(f"{self.job_name_prefix}-", metric_name, job_name=job_name, host=host, statistic=statistic,
                             period=period, label=label)

    def metric_gpu_utilization(self, **options: Any) -> cloudwatch.IMetric:
        """GPU utilization in percent, summed over the host's GPUs (0-100 x GPUs)."""
        return self.metric("GPUUtilization", **options)

    def metric_gpu_memory_utilization(self, **options: Any) -> cloudwatch.IMetric:
        """GPU memory utilization in percent, summed over the host's GPUs."""
        return self.metric("GPUMemoryUtilization", **options)

    def metric_cpu_utilization(self, **options: Any) -> cloudwatch.IMetric:
        """CPU utilization in percent, summed over the host's cores (0-100 x cores)."""
        return self.metric("CPUUtilization", **options)

    def metric_memory_utilization(self, **options: Any) -> cloudwatch.IMetric:
        """Memory utilization of the host in percent."""
        return self.metric("MemoryUtilization", **options)

    def metric_disk_utilization(self, **options: Any) -> cloudwatch.IMetric:
        """Disk utilization of the host's training volume in percent."""
        return self.metric("DiskUtilization", **options)

    # -- the request ---------------------------------------------------------------------------------------------------
    def render_request(self, *, job_name: str | None = None) -> dict[str, Any]:
        """The CreateTrainingJob request (CDK tokens unresolved). ``job_name`` defaults to an example generated name."""
        return render_job_request(self, job_name=job_name)

    def validate_request(self) -> list[str]:
        """Every problem of the rendered request (empty when it is valid). Runs automatically at synth."""
        problems = self._engine.problems()
        try:
            validate_request(self.render_request())  # unresolved tokens are skipped by the validator
        except ConfigurationError as error:
            problems.append(str(error))
        return problems

    # -- SageMaker Pipelines -------------------------------------------------------------------------------------------
    def pipeline_step(
        self,
        name: str,
        *,
        depends_on: Sequence[str] | None = None,
        display_name: str | None = None,
        description: str | None = None,
        cache_expire_after: str | None = None,
    ) -> dict[str, Any]:
        """A SageMaker Pipelines Training step running this job's request, for :class:`cdk_sagemaker_debugger.TrainingPipeline`.

        The step's ``Arguments`` are :meth:`render_request` without ``TrainingJobName`` (Pipelines names each job
        ``pipelines-<execution id>-<step name>-<random>``), checked against CreateTrainingJob in botocore's model with a
        placeholder name. It is a snapshot: call it after ``add_debugger_rule``. With RuleEngine.EVALUATOR the sampler
        channel and environment come along (the bundle is an S3 asset referenced by URL) and, when this construct
        created the execution role, the role may upload the profiler files of ``pipelines-*`` runs too. This
        construct's evaluator, RuleAlarm and metric searches select jobs by ``job_name_prefix``, so they do not see
        pipeline runs.

        :param name: the step's name: letters, digits, ``-`` and ``_``, up to 64 characters.
        :param depends_on: names of steps of the same pipeline that must finish first. Default: None.
        :param display_name: shown in SageMaker Studio. Default: None.
        :param description: Default: None.
        :param cache_expire_after: turn step caching on, reusing a successful run with the same arguments for this
            ISO 8601 duration (e.g. ``"P30D"``). Default: None (no caching).
        """
        return _pipeline_step(self, name, depends_on=depends_on, display_name=display_name, description=description,
                              cache_expire_after=cache_expire_after)

    # -- what the parts of the job share -------------------------------------------------------------------------------
    @functools.cached_property
    def _partition(self) -> str:
        region = self._region
        return PSEUDO["partition"] if region is None else partition_of(region)

    def _arn(self, service: str, resource: str) -> str:
        """An ARN in this stack's partition, region and account (built locally: format_arn costs a jsii call)."""
        region = self._region or PSEUDO["region"]
        return f"arn:{self._partition}:{service}:{region}:{PSEUDO['account']}:{resource}"

    def _warn(self, kind: str, message: str) -> None:
        if message not in self._warnings:
            self._warnings.add(message)
            cdk.Annotations.of(self).add_warning_v2(f"{WARNING_PREFIX}:{kind}", message)
