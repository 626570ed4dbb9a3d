"""ProfiledTrainingJob: a validated CreateTrainingJob request with profiler and debugger rules, launched by Step Functions
(.sync)."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
from constructs import Construct, IConstruct, IValidation

from ..model.api_model import validate_request
from ..model.debug_hook import DebugHookConfig, TensorBoardOutputConfig
from ..model.debugger_request import DebuggerRequest, render_debugger_request, resolve_debug_hook
from ..model.debugger_rules import CustomRule, Rule, RulePermissions
from ..model.distribution import DebuggerFeatures, Distribution, check_debugger_compatibility, is_trainium
from ..model.errors import ConfigurationError, ConfigurationTypeError, UnsupportedRegionError
from ..model.frameworks import FrameworkInfo, parse_training_image
from ..model.health_rules import is_health_rule
from ..model.images import DEBUGGER_UNSUPPORTED_REGIONS, partition_of
from ..model.job_family import job_name_pattern
from ..model.metric_rules import MetricRule, check_metric_names
from ..model.parameters import is_token
from ..model.pipeline_definition import PIPELINE_JOB_NAME_PREFIX, training_step
from ..model.profiler_catalog import PROFILER_REPORT, PROFILER_RULE_SPECS
from ..model.profiler_config import ProfilerConfig, framework_profiling_deprecation
from ..model.profiler_rules import ProfilerRule
from ..model.request_members import (
    ExperimentConfig,
    InstanceGroup,
    MlflowConfig,
    RequestMembers,
    TrainingImageConfig,
    request_members,
)
from ..model.rule_engine import RuleEngine
from ..model.training_request import (
    TRAINING_INPUT_MODES,
    assemble_request,
    check_instance,
    check_job_name_prefix,
    check_stopping,
    example_job_name,
    normalize_string_map,
)
from ..runtime.sampler import contract as sampler_contract
from ._common import (
    EVALUATOR_REPORT_FOLDER,
    EVALUATOR_STATE_FILE,
    LazyPath,
    acknowledge_wildcards,
    concrete_region,
    located,
    rule_image,
    rule_image_repository_arn,
    whole_seconds,
)
from .family import TrainingJobs
from .rule_set import ProfilerRuleSet
from .sampler import Sampler

__all__ = ["ProfiledTrainingJob", "InputChannel", "family_metric"]

_ECR_IMAGE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\."
    r"(?:amazonaws\.com(?:\.cn)?|amazonaws\.eu|c2s\.ic\.gov|sc2s\.sgov\.gov|cloud\.adc-e\.uk|csp\.hci\.ic\.gov)/(?P<repo>[^:@]+)"
)
_S3_URI = re.compile(r"^s3://(?P<bucket>[^/]+)/?(?P<key>.*)$")
_TRAINING_NAMESPACE = "/aws/sagemaker/TrainingJobs"
_WARNING_PREFIX = "cdk-sagemaker-debugger"
# Each execution names its job <prefix>-<first and last groups of two fresh UUIDs>: 20 hex characters, 80 random bits.
_UUID_PART = "States.ArrayGetItem(States.StringSplit(States.UUID(), '-'), {})"
# Pseudo parameters and constants, fetched once per process (each CDK attribute access is a jsii call).
_PSEUDO = {"partition": cdk.Aws.PARTITION, "region": cdk.Aws.REGION, "account": cdk.Aws.ACCOUNT_ID}
_CONSTANTS = {
    "block_all": s3.BlockPublicAccess.BLOCK_ALL,
    "log_retention": logs.RetentionDays.ONE_YEAR,
    "log_level": sfn.LogLevel.ALL,
}
_EXAMPLE_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
#: The sampler a job gets unless it says otherwise (compared by identity, so an explicit Sampler() is "asked for").
DEFAULT_SAMPLER = Sampler()
# Stands in for the S3 URI of a local rule source while a rule is checked, before its asset exists.
_PENDING_SOURCE_URI = "s3://pending-upload/rule-source.py"
# Where the naming state puts the run's job name; the CreateTrainingJob task and the Debugger rules read it there.
_RUN_PATH = "$.trainingRun"
_RUN_NAME = f"{_RUN_PATH}.TrainingJobName"
_STRING_TOKEN = re.compile(r"(\$\{Token\[[^\]]*\]\})")
# Every job of an app by lower-cased job-name prefix (ARNs are lower case), to warn about prefixes that overlap.
_PREFIXES: weakref.WeakKeyDictionary[Any, list[ProfiledTrainingJob]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class InputChannel:
    """One training input channel, read from S3. Build it with ``from_bucket`` or ``from_s3_uri``."""

    name: str
    s3_uri: str
    bucket: s3.IBucket | None = None
    key_prefix: str = ""
    content_type: str | None = None
    compression: str | None = None
    input_mode: str | None = None
    distribution: str = "FullyReplicated"
    s3_data_type: str = "S3Prefix"

    @classmethod
    def from_bucket(cls, name: str, bucket: s3.IBucket, key_prefix: str = "", **options: Any) -> InputChannel:
        """A channel reading ``s3://<bucket>/<key_prefix>``; the execution role gets read access to that prefix."""
        return cls(name=name, s3_uri=bucket.s3_url_for_object(key_prefix) if key_prefix else f"s3://{bucket.bucket_name}/",
                   bucket=bucket, key_prefix=key_prefix, **options)

    @classmethod
    def from_s3_uri(cls, name: str, s3_uri: str, **options: Any) -> InputChannel:
        """A channel reading a literal ``s3://bucket/prefix``; the execution role gets read access to it."""
        match = _S3_URI.match(s3_uri) if isinstance(s3_uri, str) and not cdk.Token.is_unresolved(s3_uri) else None
        if match is None:
            raise ConfigurationError(
                f"must be a literal S3 URI like 's3://bucket/prefix', got {s3_uri!r}. For a bucket object use "
                "InputChannel.from_bucket().",
                where=f"input channel {name!r}",
                field="s3_uri",
                value=s3_uri,
            )
        return cls(name=name, s3_uri=s3_uri, key_prefix=match["key"], **options)

    def to_request(self) -> dict[str, Any]:
        channel: dict[str, Any] = {
            "ChannelName": self.name,
            "DataSource": {
                "S3DataSource": {
                    "S3DataType": self.s3_data_type,
                    "S3Uri": self.s3_uri,
                    "S3DataDistributionType": self.distribution,
                }
            },
        }
        for key, value in (("ContentType", self.content_type), ("CompressionType", self.compression),
                           ("InputMode", self.input_mode)):
            if value is not None:
                channel[key] = value
        return channel

    def _objects_and_bucket(self, partition: str) -> tuple[str, str]:
        bucket_arn = (self.bucket.bucket_arn if self.bucket is not None
                      else f"arn:{partition}:s3:::{_S3_URI.match(self.s3_uri)['bucket']}")  # type: ignore[index]
        return f"{bucket_arn}/{self.key_prefix}*", bucket_arn

    def read_statements(self, partition: str = "aws") -> list[dict[str, Any]]:
        """IAM statements (JSON) that let SageMaker read this channel: its objects, and listing its prefix."""
        objects, bucket_arn = self._objects_and_bucket(partition)
        listing: dict[str, Any] = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn}
        if self.key_prefix:
            listing["Condition"] = {"StringLike": {"s3:prefix": [f"{self.key_prefix}*"]}}
        return [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": objects}, listing]

    def wildcard_findings(self, partition: str = "aws") -> dict[str, str]:
        """The cdk-nag wildcard finding the read grant creates, with its reason."""
        objects, _ = self._objects_and_bucket(partition)
        return {f"Resource::{objects}": f"Read-only access to the objects of input channel {self.name!r} (its S3 prefix)."}

    def grant_read(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` read this channel's objects (for roles you manage yourself)."""
        grants = [
            iam.Grant.add_to_principal(grantee=grantee, actions=[statement["Action"]], resource_arns=[statement["Resource"]],
                                       conditions=statement.get("Condition"))
            for statement in self.read_statements(cdk.Aws.PARTITION)
        ]
        return grants[0].combine(grants[1])


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
    ``job_name_prefix`` (see :meth:`ProfiledTrainingJob.metric`)."""
    period = period or cdk.Duration.minutes(1)
    if job_name is not None:
        return cloudwatch.Metric(
            namespace=_TRAINING_NAMESPACE,
            metric_name=metric_name,
            dimensions_map={"Host": f"{job_name}/{host}"},
            statistic=statistic,
            period=period,
            label=label,
        )
    # An unquoted value is a partial (token) match in CloudWatch search; a quoted one would have to equal the whole
    # Host value "<job>/algo-<n>" and would match nothing.
    search = (
        f"SEARCH('{{{_TRAINING_NAMESPACE},Host}} MetricName=\"{metric_name}\" "
        f"Host={job_name_prefix.rstrip('-')}', '{statistic}', {int(period.to_seconds())})"
    )
    return cloudwatch.SearchExpression(expression=search, label=label or f"{metric_name} {job_name_prefix}*",
                                       period=period)


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
    RuleEvaluator's state and reports of its runs (``<output>/<prefix>-*/rule-output/evaluator-state.json.gz`` and
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
        debugger_rules: debugger (tensor) rules, RuleEngine.DEBUGGER only; add more with :meth:`add_debugger_rule`.
            Default: none.
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
    #: The execution role's permissions for debugger rule actions (created with the first rule that has actions).
    rule_actions_policy: iam.Policy | None
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

    #: Why the library switched the default profiler off (Trainium, a region without Debugger), if it did.
    _profiler_off_reason: str | None = None
    #: SNS endpoints the rule container may subscribe to SMDebugRules, granted so far.
    _granted_endpoints: frozenset[tuple[str, str]] = frozenset()
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
        request_overrides: Mapping[str, Any] | None = None,
    ) -> None:
        """Every prop is checked before the first resource exists; the props are documented on the class."""
        super().__init__(scope, id)
        self._where = LazyPath(self)  # each CDK call is a jsii round trip: the path is computed only for an error
        self._findings: dict[str, str] | None = {}  # cdk-nag acknowledgements, written once at the end
        self._stack = scope if isinstance(scope, cdk.Stack) else cdk.Stack.of(self)
        self._region = concrete_region(self._stack)
        self._check_job_props(job_name_prefix, training_image, algorithm_name, output_prefix, training_input_mode,
                              instance_type, instance_count, volume_size_in_gb)
        self.rule_engine = self._check_rule_engine(rule_engine)
        self._check_profiler(profiler, instance_type)
        self._check_rule_set_and_distribution(rule_set, distribution)
        self._check_stopping_condition(max_runtime, max_wait, use_spot_instances)
        self._check_dependent_props(checkpoint_s3_uri, checkpoint_local_path, vpc, vpc_subnets, security_groups)
        self._record_container_props(
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
        self._choose_profiling(sampler)
        self._create_output_location(output_bucket, output_kms_key, output_prefix)
        checked = self._add_initial_debugger_rules(debugger_rules, debug_hook, tensorboard, distribution)
        self.role = self._create_execution_role(role, vpc is not None, checked.permissions)
        self._place_in_vpc(vpc, vpc_subnets, security_groups)
        self._create_state_machine()
        _StackValidation.register(self)
        self.evaluator = self._attach_evaluator(evaluator)
        self._flush_findings()
        self.deploy_trigger = self._start_on_deploy() if run_on_deploy else None

    # -- construction steps, in the order __init__ runs them ---------------------------------------------------------
    def _check_job_props(self, job_name_prefix: str, training_image: str | None, algorithm_name: str | None,
                         output_prefix: object, training_input_mode: str, instance_type: str, instance_count: int,
                         volume_size_in_gb: int) -> None:
        """What the job is and what it runs on: checked before anything else, recorded once valid."""
        where = self._where
        check_job_name_prefix(job_name_prefix, where=where)
        if (training_image is None) == (algorithm_name is None):
            raise ConfigurationError(
                "give exactly one of training_image= (a container image URI) or algorithm_name= (a SageMaker algorithm).",
                where=where,
                field="training_image",
            )
        self._check_identity(job_name_prefix, training_image, output_prefix)
        if training_input_mode not in TRAINING_INPUT_MODES:
            raise ConfigurationError(
                f"must be one of {', '.join(TRAINING_INPUT_MODES)}, got {training_input_mode!r}.",
                where=where,
                field="training_input_mode",
                value=training_input_mode,
            )
        check_instance(instance_type, instance_count, volume_size_in_gb, where=where)
        self.job_name_prefix = job_name_prefix
        self.training_image = training_image
        self.algorithm_name = algorithm_name
        self.training_input_mode = training_input_mode
        self.instance_type = instance_type
        self.instance_count = instance_count
        self.volume_size_in_gb = volume_size_in_gb

    def _check_profiler(self, profiler: Any, instance_type: str) -> None:
        """Debugger's profiler: defaulted for the rule engine and the region; refused with RuleEngine.EVALUATOR, whose
        sampler takes its place."""
        if profiler is None:
            profiler = self._default_profiler(instance_type)
        elif self.rule_engine is RuleEngine.EVALUATOR:
            raise ConfigurationError(
                "configures SageMaker Debugger's profiler, which RuleEngine.EVALUATOR (the default) does not use. "
                "Set the sampling with sampler=Sampler(interval_millis=...), turn profiling off with sampler=None, or "
                "pass rule_engine=RuleEngine.DEBUGGER in an account that still has Debugger.",
                where=self._where, field="profiler", value=profiler)
        if not isinstance(profiler, ProfilerConfig):
            raise ConfigurationTypeError(
                f"expected a ProfilerConfig, got {type(profiler).__name__}.", where=self._where, field="profiler",
                value=profiler
            )
        self.profiler = profiler

    def _check_rule_set_and_distribution(self, rule_set: Any, distribution: Any) -> None:
        """Both are typed objects (a dict or a list of rules gets a hint how to wrap it); Debugger's rule containers
        must exist in the region of a DEBUGGER job."""
        where = self._where
        if rule_set is not None and not isinstance(rule_set, ProfilerRuleSet):
            raise ConfigurationTypeError(
                f"expected a ProfilerRuleSet, got {type(rule_set).__name__}. Wrap the rules: "
                "ProfilerRuleSet(stack, 'Rules', rules=[...]).",
                where=where,
                field="rule_set",
                value=rule_set,
            )
        if rule_set is not None and self.rule_engine is RuleEngine.DEBUGGER:
            rule_set.require_rule_images()  # Debugger's rule containers must exist in this region
        if distribution is not None and not isinstance(distribution, Distribution):
            hint = " Convert the SageMaker SDK's dict with Distribution.from_sdk({...})." if isinstance(distribution, Mapping) else ""
            raise ConfigurationTypeError(
                f"expected a Distribution such as Distribution.mpi(), got {type(distribution).__name__}.{hint}",
                where=where,
                field="distribution",
                value=distribution,
            )
        self.rule_set = rule_set

    def _check_stopping_condition(self, max_runtime: cdk.Duration | None, max_wait: cdk.Duration | None,
                                  use_spot_instances: bool) -> None:
        """StoppingCondition in whole seconds (one day unless given), within the limits spot training sets."""
        where = self._where
        self._stopping: dict[str, Any] = {
            "MaxRuntimeInSeconds": 86400 if max_runtime is None else whole_seconds(max_runtime, where=where, field="max_runtime", minimum=0)
        }
        if max_wait is not None:
            self._stopping["MaxWaitTimeInSeconds"] = whole_seconds(max_wait, where=where, field="max_wait", minimum=0)
        check_stopping(
            self._stopping["MaxRuntimeInSeconds"], self._stopping.get("MaxWaitTimeInSeconds"), use_spot_instances, where=where
        )
        self.max_runtime = max_runtime
        self.max_wait = max_wait
        self.use_spot_instances = use_spot_instances

    def _check_dependent_props(self, checkpoint_s3_uri: str | None, checkpoint_local_path: str | None,
                               vpc: ec2.IVpc | None, vpc_subnets: ec2.SubnetSelection | None,
                               security_groups: Sequence[ec2.ISecurityGroup] | None) -> None:
        """Props that mean nothing without another: a local checkpoint path without its S3 copy, subnets and security
        groups without a VPC."""
        if checkpoint_local_path is not None and checkpoint_s3_uri is None:
            raise ConfigurationError(
                "checkpoint_local_path needs checkpoint_s3_uri (where SageMaker copies the checkpoints).",
                where=self._where,
                field="checkpoint_local_path",
            )
        if vpc is None and (vpc_subnets is not None or security_groups):
            raise ConfigurationError("vpc_subnets and security_groups need vpc=.", where=self._where, field="vpc")
        self.checkpoint_s3_uri = checkpoint_s3_uri
        self.checkpoint_local_path = checkpoint_local_path

    def _record_container_props(self, *, hyperparameters: Mapping[str, Any] | None,
                                environment: Mapping[str, Any] | None, training_image_repository: ecr.IRepository | None,
                                volume_kms_key: kms.IKey | None, inputs: Sequence[InputChannel] | None,
                                enable_network_isolation: bool, encrypt_inter_container_traffic: bool,
                                tags: Mapping[str, str] | None) -> None:
        """The container's inputs and settings; hyperparameters and environment become string maps (the API's)."""
        self._hyperparameters = normalize_string_map(hyperparameters, field="hyperparameters", where=self._where)
        self._environment = normalize_string_map(environment, field="environment", where=self._where)
        self.training_image_repository = training_image_repository
        self.volume_kms_key = volume_kms_key
        self.inputs = tuple(inputs or ())
        self.enable_network_isolation = enable_network_isolation
        self.encrypt_inter_container_traffic = encrypt_inter_container_traffic
        self.tags = dict(tags or {})

    def _choose_profiling(self, sampler: Any) -> None:
        """How the job is profiled: metric rules checked against metric_definitions as they are added (issue 13.3),
        Debugger's profiler features checked, and the sampler chosen."""
        if self.rule_set is not None:
            self.rule_set.on_rule_added(self._check_metric_rule)
        self.framework = parse_training_image(self.training_image)
        self._check_profiler_features()
        self.sampler = self._choose_sampler(sampler)

    def _create_output_location(self, output_bucket: s3.IBucket | None, output_kms_key: kms.IKey | None,
                                output_prefix: str) -> None:
        """The bucket the runs write to (a locked-down one unless given) and the S3 locations derived from it."""
        if output_bucket is None:
            output_bucket = s3.Bucket(
                self,
                "OutputBucket",
                encryption=s3.BucketEncryption.KMS_MANAGED if output_kms_key is None else s3.BucketEncryption.KMS,
                encryption_key=output_kms_key,
                bucket_key_enabled=True,
                enforce_ssl=True,
                block_public_access=_CONSTANTS["block_all"],
                versioned=True,
                minimum_tls_version=1.2,
            )
            self._acknowledge({
                "AwsSolutions::AwsSolutions-S1": "Training outputs are written only by SageMaker through the execution "
                "role; pass output_bucket= with server access logging if your audit policy requires request logs."
            }, on="OutputBucket")
        self.output_bucket = output_bucket
        self.output_kms_key = output_kms_key
        self._output_key_arn = output_kms_key.key_arn if output_kms_key is not None else None
        self._volume_key_arn = self.volume_kms_key.key_arn if self.volume_kms_key is not None else None
        self.output_prefix = output_prefix.strip("/")
        bucket_name = output_bucket.bucket_name
        self.output_s3_uri = f"s3://{bucket_name}/{self.output_prefix}" if self.output_prefix else f"s3://{bucket_name}"
        self._output_bucket_arn = f"arn:{self._partition}:s3:::{bucket_name}"
        self.profiler_s3_uri = self.profiler.s3_output_path or self.output_s3_uri
        self.sampler_bundle = self.sampler.bundle(self) if self.sampler is not None else None
        self.rule_output_s3_uri = self.output_s3_uri

    def _add_initial_debugger_rules(self, debugger_rules: Sequence[Rule] | None,
                                    debug_hook: DebugHookConfig | bool | None,
                                    tensorboard: TensorBoardOutputConfig | None,
                                    distribution: Distribution | None) -> DebuggerRequest:
        """Debugger's rules, hook and TensorBoard output through the guard rails; uploads the rules' local sources.
        Returns the checked request, whose permissions the execution role needs."""
        self.debug_hook_setting = debug_hook
        self.tensorboard = tensorboard
        self.distribution = distribution
        self._debugger_rules: list[Rule] = []
        self._debugger_rule_sources: dict[Rule, s3_assets.Asset] = {}
        self._warnings: set[str] = set()
        given_rules = () if debugger_rules is None else debugger_rules
        checked = self._check_debugger(given_rules)
        self._debugger_rules.extend(given_rules)
        for rule in self._debugger_rules:
            self._upload_rule_source(rule)
        return checked

    def _create_execution_role(self, role: iam.IRole | None, in_vpc: bool, permissions: RulePermissions) -> iam.IRole:
        """The given role unchanged, or a new one with exactly what this job's runs and rules need."""
        self._image_pull: dict[str, Any] | None = None
        self._pulled_repositories: list[str] = []
        self._pending_statements: list[dict[str, Any]] | None = None
        self._granted_topic = False
        self._granted_stop_patterns: set[str] = set()
        self.rule_actions_policy = None
        self._owned_role: iam.Role | None = None
        if role is None:
            role = self._create_owned_role(in_vpc, permissions)
        self._role_arn = role.role_arn
        return role

    def _create_owned_role(self, in_vpc: bool, permissions: RulePermissions) -> iam.Role:
        """Collects the statements first and creates the role with them as one inline policy: one call into the CDK
        instead of two per statement."""
        self._pending_statements = []
        self._grant_execution_permissions(in_vpc)
        self._grant_sampler_access()
        self._grant_debugger_rule_needs(self._debugger_rules, permissions, with_actions=False)
        role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker execution role of training jobs {self.job_name_prefix}-*",
            inline_policies={"TrainingJobs": iam.PolicyDocument.from_json(
                {"Version": "2012-10-17", "Statement": self._pending_statements})},
        )
        self._owned_role = role
        self._pending_statements = None
        self._grant_role_dependent(role)
        self._grant_rule_actions(role, permissions)
        return role

    def _place_in_vpc(self, vpc: ec2.IVpc | None, vpc_subnets: ec2.SubnetSelection | None,
                      security_groups: Sequence[ec2.ISecurityGroup] | None) -> None:
        """The subnets and security groups of VpcConfig (a new security group unless given)."""
        self.vpc = vpc
        self.security_groups = list(security_groups or ())
        self._subnet_ids: list[str] = []
        if vpc is not None:
            if not self.security_groups:
                self.security_groups.append(
                    ec2.SecurityGroup(self, "SecurityGroup", vpc=vpc, description=f"Training jobs {self.job_name_prefix}-*")
                )
            self._subnet_ids = vpc.select_subnets(**_subnet_kwargs(vpc_subnets)).subnet_ids
        self._security_group_ids = [sg.security_group_id for sg in self.security_groups]

    def _create_state_machine(self) -> None:
        """The state machine that names each run and starts its job; the request is rendered lazily, at synth, so
        rules added later are in it."""
        self.launch_state = sfn.CustomState(
            self,
            "CreateTrainingJob",
            state_json={
                "Type": "Task",
                "Comment": f"Runs one SageMaker training job {self.job_name_prefix}-* and waits for it to finish.",
                "Resource": f"arn:{self._partition}:states:::sagemaker:createTrainingJob.sync",
                "Parameters": cdk.Lazy.any(_Producer(self._state_parameters)),
                "ResultSelector": {
                    "TrainingJobName.$": "$.TrainingJobName",
                    "TrainingJobArn.$": "$.TrainingJobArn",
                    "TrainingJobStatus.$": "$.TrainingJobStatus",
                    "ModelArtifacts.$": "$.ModelArtifacts",
                },
                "ResultPath": "$.trainingJob",
                # Throttling and transient service errors of CreateTrainingJob; a failed training job is not retried.
                "Retry": [{"ErrorEquals": ["SageMaker.AmazonSageMakerException"], "IntervalSeconds": 30,
                           "MaxAttempts": 3, "BackoffRate": 2}],
            },
        )
        self.log_group = logs.LogGroup(self, "StateMachineLogs", retention=_CONSTANTS["log_retention"])
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            role=self._state_machine_role(),
            definition_body=sfn.DefinitionBody.from_chainable(self._definition()),
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=self.log_group, level=_CONSTANTS["log_level"], include_execution_data=False),
            comment=f"Starts a profiled SageMaker training job {self.job_name_prefix}-* per execution.",
        )

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
        return tuple(self._debugger_rules)

    @property
    def debug_hook(self) -> DebugHookConfig | None:
        """The hook the job runs: the given DebugHookConfig, the default one (with debugger rules or
        ``debug_hook=True``), or None."""
        return resolve_debug_hook(self.debug_hook_setting, bool(self._debugger_rules), self._where)

    @property
    def debugger_rule_source_assets(self) -> tuple[s3_assets.Asset, ...]:
        """S3 assets made from the custom debugger rules' local source files."""
        return tuple(self._debugger_rule_sources.values())

    def add_debugger_rule(self, rule: Rule) -> Rule:
        """Add a debugger rule and return it. Raises at once, leaving the job unchanged, when the rule breaks an API
        limit, a collection agreement or a guard rail; otherwise uploads its local source and grants what it needs."""
        checked = self._check_debugger([*self._debugger_rules, rule])
        self._debugger_rules.append(rule)
        self._upload_rule_source(rule)
        self._grant_debugger_rule_needs([rule], checked.permissions)
        return rule

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

    # ------------------------------------------------------------------------------------------------------------------
    def render_request(self, *, job_name: str | None = None) -> dict[str, Any]:
        """The CreateTrainingJob request (CDK tokens unresolved). ``job_name`` defaults to an example generated name."""
        spec: dict[str, Any] = {"TrainingInputMode": self.training_input_mode}
        if self.training_image is not None:
            spec = {"TrainingImage": self.training_image, **spec}
        else:
            spec = {"AlgorithmName": self.algorithm_name, **spec}
        resource: dict[str, Any] = {
            "InstanceType": self.instance_type,
            "InstanceCount": self.instance_count,
            "VolumeSizeInGB": self.volume_size_in_gb,
        }
        if self.volume_kms_key is not None:
            resource["VolumeKmsKeyId"] = self._volume_key_arn
        output: dict[str, Any] = {"S3OutputPath": self.output_s3_uri}
        if self.output_kms_key is not None:
            output["KmsKeyId"] = self._output_key_arn
        checkpoint = None
        if self.checkpoint_s3_uri is not None:
            checkpoint = {"S3Uri": self.checkpoint_s3_uri}
            if self.checkpoint_local_path is not None:
                checkpoint["LocalPath"] = self.checkpoint_local_path
        vpc_config = None
        if self.vpc is not None:
            vpc_config = {"SecurityGroupIds": list(self._security_group_ids), "Subnets": list(self._subnet_ids)}
        channels = [channel.to_request() for channel in self.inputs]
        environment = self._environment
        if self.rule_engine is RuleEngine.DEBUGGER:
            debugger = {
                **self._render_debugger(self._debugger_rules, job_name=job_name).fragment,
                "ProfilerConfig": self.profiler.to_request(self.profiler_s3_uri),
                "ProfilerRuleConfigurations": self.rule_set.render() if self.rule_set is not None else [],
            }
        else:
            debugger = {}
            if self.sampler is not None and self.sampler_bundle is not None:
                channels.append(self.sampler.channel(self.sampler_bundle))
                environment = dict(environment or {})
                environment.update(self.sampler.environment(self.sampler_bundle, self.profiler_s3_uri, environment))
        return assemble_request(self.request_members.apply(
            {
                "TrainingJobName": job_name or example_job_name(self.job_name_prefix),
                "AlgorithmSpecification": spec,
                "RoleArn": self._role_arn,
                "InputDataConfig": channels,
                "OutputDataConfig": output,
                "ResourceConfig": resource,
                "VpcConfig": vpc_config,
                "StoppingCondition": dict(self._stopping),
                "HyperParameters": self._hyperparameters,
                "Environment": environment,
                "Tags": [{"Key": k, "Value": v} for k, v in self.tags.items()],
                "EnableNetworkIsolation": self.enable_network_isolation or None,
                "EnableInterContainerTrafficEncryption": self.encrypt_inter_container_traffic or None,
                "EnableManagedSpotTraining": self.use_spot_instances or None,
                "CheckpointConfig": checkpoint,
                **debugger,
            }
        ))

    def _check_identity(self, job_name_prefix: str, training_image: object, output_prefix: object) -> None:
        """The props the rest of construction builds on: an output prefix string and a non-empty image URI. Warns
        about an image in another region than the stack's and about a prefix another job of the app covers too."""
        if not isinstance(output_prefix, str):
            raise ConfigurationTypeError(
                f"expected a key prefix string such as 'training' (the default), or '' for the bucket root, got "
                f"{type(output_prefix).__name__} {output_prefix!r}.",
                where=self._where, field="output_prefix", value=output_prefix)
        if training_image is not None:
            if not isinstance(training_image, str) or not training_image.strip():
                raise ConfigurationError(
                    f"must be a container image URI such as '{_EXAMPLE_IMAGE}', got {training_image!r}.",
                    where=self._where, field="training_image", value=training_image)
            self._warn_about_image_region(training_image)
        _warn_about_shared_prefix(self, job_name_prefix)

    def _warn_about_image_region(self, image: str) -> None:
        match = _ECR_IMAGE.match(image) if not is_token(image) else None
        if match is None or self._region is None or match["region"] == self._region:
            return
        cdk.Annotations.of(self).add_warning_v2(
            f"{_WARNING_PREFIX}:trainingImageRegion",
            f"The training image {image!r} is in {match['region']}, but this stack deploys to {self._region}; "
            "SageMaker pulls the training image in the job's own region"
            + (f" and partition ({partition_of(self._region)})" if partition_of(match["region"]) != self._partition
               else "")
            + f", so the job would not start. Use the image's copy in {self._region} (for AWS Deep Learning "
            "Containers, the registry of that region).",
        )

    def _default_profiler(self, instance_type: str) -> ProfilerConfig:
        """System monitoring on, unless SageMaker cannot run it here (the SDK's behaviour): Debugger-less regions and
        Trainium instances get the profiler switched off, with a note, instead of a request the API rejects. With
        RuleEngine.EVALUATOR Debugger's profiler is off and never sent: the sampler takes its place."""
        if self.rule_engine is RuleEngine.EVALUATOR:
            return ProfilerConfig(disable_profiler=True)
        reason = None
        if self._region in DEBUGGER_UNSUPPORTED_REGIONS:
            reason = f"SageMaker has no Debugger or profiler in {self._region}"
        elif is_trainium(instance_type):
            reason = f"the profiler does not support Trainium instances ({instance_type})"
        if reason is None:
            return ProfilerConfig()
        self._profiler_off_reason = reason
        cdk.Annotations.of(self).add_info(
            f"The profiler is switched off because {reason}. Pass profiler=ProfilerConfig(...) to decide yourself."
        )
        return ProfilerConfig(disable_profiler=True)

    def _definition(self) -> sfn.IChainable:
        """Name the run once (a Pass state), then start the job under that name and wait for it."""
        name = f"States.Format('{self.job_name_prefix}-{{}}{{}}', {_UUID_PART.format(0)}, {_UUID_PART.format(4)})"
        #: Names the run ``<prefix>-<20 hex characters>`` into ``$.trainingRun.TrainingJobName``; the job and the
        #: Debugger rules that act on it (StopTraining, StalledTrainingRule) read the name from there.
        self.naming_state = sfn.CustomState(self, "NameTrainingJob", state_json={
            "Type": "Pass",
            "Comment": "The run's job name, computed once for the job and for the Debugger rules that stop it.",
            "Parameters": {"TrainingJobName.$": name},
            "ResultPath": _RUN_PATH,
        })
        return self.naming_state.next(self.launch_state)

    def _state_parameters(self) -> dict[str, Any]:
        placeholder = example_job_name(self.job_name_prefix)
        request = self.render_request(job_name=placeholder)
        del request["TrainingJobName"]
        for configuration in request.get("DebugRuleConfigurations", ()):
            if "RuleParameters" in configuration:
                configuration["RuleParameters"] = _with_run_name(configuration["RuleParameters"], placeholder)
        return {"TrainingJobName.$": _RUN_NAME, **request}

    def validate_request(self) -> list[str]:
        """Every problem of the rendered request (empty when it is valid). Runs automatically at synth."""
        problems: list[str] = []
        profiler_off = self._profiler_rules_problem()  # rules added after construction
        if profiler_off is not None:
            problems.append(profiler_off)
        try:
            self._check_compatibility(self._debugger_rules)
        except ConfigurationError as error:
            problems.append(str(error))
        try:
            validate_request(self.render_request())  # unresolved tokens are skipped by the validator
        except ConfigurationError as error:
            problems.append(str(error))
        return problems

    # ------------------------------------------------------------------------------------------------------------------
    def _warn(self, kind: str, message: str) -> None:
        if message not in self._warnings:
            self._warnings.add(message)
            cdk.Annotations.of(self).add_warning_v2(f"{_WARNING_PREFIX}:{kind}", message)

    def _render_debugger(self, rules: Sequence[Rule], *, job_name: str | None = None) -> DebuggerRequest:
        """The Debugger members; StopTraining and StalledTrainingRule get the run's name (``job_name``, by default the
        example name :meth:`_state_parameters` replaces with the execution's)."""
        return render_debugger_request(
            rules=rules,
            debug_hook=self.debug_hook_setting,
            tensorboard=self.tensorboard,
            default_s3_output_path=self.output_s3_uri,
            job_name_prefix=self.job_name_prefix,
            job_name=job_name or example_job_name(self.job_name_prefix),
            region=self._region,
            image_for=self._debugger_rule_image,
            source_uri_for=self._debugger_rule_source_uri,
            framework=self.framework,
            where=self._where,
        )

    def _debugger_rule_image(self, rule: Rule) -> str:
        if rule.image_uri is not None:
            return rule.image_uri
        return located(self, lambda: rule_image(self._stack, custom=rule.is_custom))

    def _debugger_rule_source_uri(self, rule: Rule) -> str | None:
        asset = self._debugger_rule_sources.get(rule)
        if asset is not None:
            return asset.s3_object_url
        return _PENDING_SOURCE_URI if isinstance(rule, CustomRule) and rule.has_local_source else None

    def _upload_rule_source(self, rule: Rule) -> None:
        if isinstance(rule, CustomRule) and rule.has_local_source:
            asset_id = f"DebuggerRuleSource{len(self._debugger_rule_sources)}"
            self._debugger_rule_sources[rule] = s3_assets.Asset(self, asset_id, path=rule.source)  # type: ignore[arg-type]

    def _check_debugger(self, rules: Sequence[Rule]) -> DebuggerRequest:
        """Render the Debugger members for ``rules`` and run the guard rails. Raises before anything changes; on
        success records the warnings as annotations."""
        if self.rule_engine is RuleEngine.EVALUATOR:
            self._refuse_debugger_features(rules)
        checked = self._render_debugger(rules)
        compatibility = self._check_compatibility(rules)
        for message in checked.warnings:
            self._warn("debuggerConfiguration", message)
        for message in compatibility:
            self._warn("debuggerCompatibility", message)
        return checked

    def _check_compatibility(self, rules: Sequence[Rule]) -> list[str]:
        if self.rule_engine is RuleEngine.EVALUATOR:
            return []  # Debugger's guard rails: the sampler runs with any distribution, instance and region
        profile = self.profiler.framework_profile
        features = DebuggerFeatures(
            system_monitoring=not self.profiler.disable_profiler,
            framework_profiling=profile is not None,
            profiles_collectives=profile is not None and profile.profiles_collectives,
            profiler_rules=self.rule_set is not None and bool(self.rule_set.rules),
            tensor_debugging=resolve_debug_hook(self.debug_hook_setting, bool(rules)) is not None,
        )
        try:
            return check_debugger_compatibility(
                features=features,
                distribution=self.distribution,
                framework=self.framework,
                instance_type=self.instance_type,
                instance_count=self.instance_count,
                checkpointing=self.checkpoint_s3_uri is not None,
                region=self._region,
                where=self._where,
            )
        except UnsupportedRegionError as error:
            raise UnsupportedRegionError(
                f"{error.reason} This job uses {_features_in_use(features)}.",
                where=error.where,
                field=error.field,
                value=error.value,
            ) from None

    def _profiler_rules_problem(self) -> str | None:
        """Debugger's profiler rules with Debugger's profiler off, or None: checked when the job is created and again
        at synth, for rules added to the set later."""
        if (self.rule_engine is not RuleEngine.DEBUGGER or not self.profiler.disable_profiler or self.rule_set is None
                or not self.rule_set.rules):
            return None
        names = [r.name for r in self.rule_set.rules]
        if self._profiler_off_reason is not None:  # the library switched it off, not the user
            return (
                f"profiler rules {names} need the profiler, which is off for this job because "
                f"{self._profiler_off_reason} (SageMaker would refuse the job with it on). Use the default "
                "rule_engine=RuleEngine.EVALUATOR, whose sampler and evaluator need no Debugger, or remove rule_set."
            )
        return (
            f"profiler rules {names} need the profiler, but ProfilerConfig(disable_profiler=True) turns it off. "
            "Remove the rules or enable the profiler."
        )

    def _check_profiler_features(self) -> None:
        if self.rule_engine is RuleEngine.EVALUATOR:
            return
        profiler_off = self._profiler_rules_problem()
        if profiler_off is not None:
            raise ConfigurationError(profiler_off, where=self._where, field="profiler")
        if self.profiler.framework_profile is not None:
            message = framework_profiling_deprecation(self.framework)
            if message:
                cdk.Annotations.of(self).add_warning_v2(f"{_WARNING_PREFIX}:frameworkProfilingDeprecated", message)

    # -- rule engine, sampler and evaluator ----------------------------------------------------------------------
    def _check_rule_engine(self, rule_engine: Any) -> RuleEngine:
        if not isinstance(rule_engine, RuleEngine):
            raise ConfigurationTypeError(
                f"expected RuleEngine.EVALUATOR or RuleEngine.DEBUGGER, got {rule_engine!r}.",
                where=self._where, field="rule_engine", value=rule_engine)
        return rule_engine

    def _choose_sampler(self, sampler: Any) -> Sampler | None:
        """The sampler the job runs: RuleEngine.EVALUATOR only, and only where its containers can start and upload it.
        Where they cannot, the default sampler steps aside with a note; a sampler asked for explicitly is an error."""
        asked = sampler is not DEFAULT_SAMPLER
        if sampler is not None and not isinstance(sampler, Sampler):
            raise ConfigurationTypeError(f"expected a Sampler such as Sampler(interval_millis=500) or None, got "
                                         f"{type(sampler).__name__}.", where=self._where, field="sampler", value=sampler)
        if sampler is None:
            return None
        if self.rule_engine is RuleEngine.DEBUGGER:
            if asked:
                raise ConfigurationError(
                    "RuleEngine.DEBUGGER profiles with Debugger's own profiler, which writes the same profiler-output/ "
                    "files. Pass sampler=None with Debugger, or use the default RuleEngine.EVALUATOR with the sampler.",
                    where=self._where, field="sampler", value=sampler)
            return None
        reason = self._sampler_cannot_run()
        if reason is None:
            self._check_sampler_environment()
            return sampler
        if asked:
            raise ConfigurationError(f"the sampler cannot run here: {reason} Pass sampler=None; the rules are then "
                                     "evaluated from SageMaker's CloudWatch metrics.", where=self._where,
                                     field="sampler", value=sampler)
        cdk.Annotations.of(self).add_info(f"No sampler: {reason} The rules are evaluated from SageMaker's CloudWatch "
                                          "metrics.")
        return None

    def _sampler_cannot_run(self) -> str | None:
        if self.algorithm_name is not None:
            return ("a SageMaker algorithm accepts only the input channels it declares, and may not run Python with "
                    "PYTHONPATH.")
        if self.enable_network_isolation:
            return "with enable_network_isolation=True the container cannot upload to S3."
        return None

    def _check_sampler_environment(self) -> None:
        taken = sorted(k for k in self._environment or {} if k in sampler_contract.environment("s3://b"))
        if taken:
            raise ConfigurationError(
                f"{', '.join(taken)} belong to the sampler and are set from sampler=Sampler(...); remove them from "
                "environment= (set CDK_SAGEMAKER_SAMPLER_DISABLED=1 to switch the sampler off in one run).",
                where=self._where, field="environment", value=taken)

    def _refuse_debugger_features(self, rules: Sequence[Rule]) -> None:
        """Debugger (tensor) rules, the hook and TensorBoard output need SageMaker Debugger itself."""
        for field, used in (("debugger_rules", bool(rules)),
                            ("debug_hook", resolve_debug_hook(self.debug_hook_setting, bool(rules)) is not None),
                            ("tensorboard", self.tensorboard is not None)):
            if used:
                raise ConfigurationError(
                    "needs SageMaker Debugger's hook and rule containers, which RuleEngine.EVALUATOR (the default) "
                    "does not use. Pass rule_engine=RuleEngine.DEBUGGER in an account that still has Debugger (closed "
                    "to new customers since 2026-07-30), or watch training health with CloudWatch metrics the script "
                    "logs instead.", where=self._where, field=field)

    def _check_metric_rule(self, rule: ProfilerRule) -> None:
        """A metric rule runs in the RuleEvaluator only, on metrics this job's MetricDefinitions produce."""
        if is_health_rule(rule) and self.rule_engine is RuleEngine.DEBUGGER:
            raise rule.debugger_error(where=self._where)  # type: ignore[attr-defined]
        if not isinstance(rule, MetricRule):
            return
        if self.rule_engine is RuleEngine.DEBUGGER:
            raise rule.debugger_error(where=self._where)  # type: ignore[arg-type]
        names = [d["Name"] for d in self.request_members.algorithm.get("MetricDefinitions") or ()]
        if not any(is_token(name) for name in names):
            check_metric_names(rule, names, where=self._where)  # type: ignore[arg-type]

    def _refuse_custom_rule(self, rule: ProfilerRule) -> None:
        if isinstance(rule, MetricRule) or is_health_rule(rule):
            return
        if rule.rule_to_invoke != PROFILER_REPORT and rule.rule_to_invoke not in PROFILER_RULE_SPECS:
            raise ConfigurationError(
                f"custom profiler rule {rule.name!r} runs in Debugger's rule container; RuleEngine.EVALUATOR (the "
                "default) evaluates the built-in rules only. Pass rule_engine=RuleEngine.DEBUGGER for custom rules.",
                where=self._where, field="rule_set", value=rule.name)

    def _grant_sampler_access(self) -> None:
        """SageMaker downloads the bundle with the execution role; the sampler uploads with it, only to profiler-output/
        of this construct's runs."""
        bundle = self.sampler_bundle
        if bundle is None:
            return
        self._allow({"Effect": "Allow", "Action": "s3:GetObject",
                     "Resource": bundle.bucket.arn_for_objects(bundle.s3_object_key)})
        match = _S3_URI.match(self.profiler_s3_uri) if not is_token(self.profiler_s3_uri) else None
        key = match["key"].strip("/") if match else self.output_prefix
        bucket_arn = f"arn:{self._partition}:s3:::{match['bucket']}" if match else self._output_bucket_arn
        uploads = f"{bucket_arn}/{key + '/' if key else ''}{self.job_name_prefix}-*/profiler-output/*"
        self._allow({"Effect": "Allow", "Action": "s3:PutObject", "Resource": uploads})
        self._acknowledge({f"Resource::{uploads}": "The sampler uploads each run's profiler files to "
                           "<job>/profiler-output/, whose job name is generated per run; scoped to this prefix."})

    def _attach_evaluator(self, evaluator: Any) -> Any:
        from .rule_evaluator import RuleEvaluator  # the evaluator construct imports this module

        if evaluator is not None:
            if not isinstance(evaluator, RuleEvaluator):
                raise ConfigurationTypeError(f"expected a RuleEvaluator, got {type(evaluator).__name__}.",
                                             where=self._where, field="evaluator", value=evaluator)
            if self.rule_engine is RuleEngine.DEBUGGER:
                raise ConfigurationError("with RuleEngine.DEBUGGER, Debugger evaluates the rules; remove evaluator= "
                                         "or use RuleEngine.EVALUATOR.", where=self._where, field="evaluator")
            evaluator.check_covers(self, where=self._where)
            return evaluator
        if self.rule_engine is RuleEngine.DEBUGGER or self.rule_set is None:
            return None
        return RuleEvaluator(self, "Evaluator", training_jobs=self.training_jobs, rules=self.rule_set)

    def _grant_execution_permissions(self, in_vpc: bool) -> None:
        """Least privilege for SageMaker: the job's own S3 prefixes, image pulls, its log groups and metrics."""
        wildcards: dict[str, str] = {}
        bucket_arn = self._output_bucket_arn
        object_prefix = f"{self.output_prefix}/" if self.output_prefix else ""
        output_objects = f"{bucket_arn}/{object_prefix}*"
        self._allow({"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
                           "Resource": output_objects})
        self._allow({"Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
                           "Condition": {"StringLike": {"s3:prefix": [f"{object_prefix}*"]}}})
        wildcards[f"Resource::{output_objects}"] = (
            "Objects under the job's own output prefix, where each run writes <job>/output, profiler-output and "
            "rule-output under its generated name."
        )
        hook = self.debug_hook
        for uri, label in ((self.profiler.s3_output_path, "profiler output"), (self.checkpoint_s3_uri, "checkpoints"),
                           (hook.s3_output_path if hook is not None else None, "debugger hook output"),
                           (self.tensorboard.s3_output_path if self.tensorboard is not None else None, "TensorBoard output")):
            wildcards.update(self._allow_s3_prefix(uri, label, writable=True))
        for channel in self.inputs:
            for statement in channel.read_statements(self._partition):
                self._allow(statement)
            wildcards.update(channel.wildcard_findings(self._partition))
        # Pull the training image and the rule evaluator images.
        if self.training_image is not None:
            self._allow_image_pull(_ecr_repository_arns(self._partition, self.training_image))
        rule_set = self.rule_set
        if rule_set is not None and self.rule_engine is RuleEngine.DEBUGGER:
            rule_set.on_rule_added(lambda rule: self._grant_profiler_rule(rule_set, rule))
        elif rule_set is not None:
            rule_set.on_rule_added(self._refuse_custom_rule)
        self._allow({"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"})
        self._allow({"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
                           "Condition": {"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*"]}}})
        wildcards["Resource::*"] = (
            "ecr:GetAuthorizationToken and cloudwatch:PutMetricData have no resource-level permissions; PutMetricData "
            "is limited to the /aws/sagemaker/* namespaces by condition."
        )
        log_groups = [self._arn("logs", f"log-group:{group}:*")
                      for group in ("/aws/sagemaker/TrainingJobs", "/aws/sagemaker/ProcessingJobs")]
        self._allow({"Effect": "Allow", "Resource": log_groups, "Action": [
            "logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"]})
        for arn in log_groups:
            wildcards[f"Resource::{arn}"] = (
                "Log streams of SageMaker's training and rule-job log groups, named after each run's job."
            )
        if in_vpc:
            self._allow({"Effect": "Allow", "Resource": "*", "Action": [
                "ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
                "ec2:DeleteNetworkInterfacePermission", "ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs",
                "ec2:DescribeDhcpOptions", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups"]})
            wildcards["Resource::*"] += (
                " The EC2 network-interface actions SageMaker needs to attach the job to the VPC have no resource-level "
                "permissions either."
            )
        self._acknowledge(wildcards)
        self._deny_evaluator_keys()

    def _grant_role_dependent(self, role: iam.Role) -> None:
        """Grants that CDK resources make on the role itself (KMS keys, an ECR repository object)."""
        if self.volume_kms_key is not None:
            self.volume_kms_key.grant_encrypt_decrypt(role)
        if self.output_kms_key is not None:
            self.output_kms_key.grant_encrypt_decrypt(role)
        if self.training_image_repository is not None:
            self.training_image_repository.grant_pull(role)

    def _allow_s3_prefix(self, uri: str | None, label: str, *, writable: bool) -> dict[str, str]:
        """Allow the objects under a literal s3:// prefix; returns the cdk-nag wildcard finding with its reason."""
        match = _S3_URI.match(uri) if uri and not is_token(uri) else None
        if match is None:
            return {}
        key = match["key"].strip("/")
        bucket_arn = f"arn:{self._partition}:s3:::{match['bucket']}"
        objects = f"{bucket_arn}/{key + '/' if key else ''}*"
        actions = ["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"] if writable else ["s3:GetObject"]
        self._allow({"Effect": "Allow", "Action": actions, "Resource": objects})
        self._allow({"Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn})
        access = "written" if writable else "read"
        return {f"Resource::{objects}": f"Objects under the configured {label} prefix, {access} by every run."}

    @functools.cached_property
    def _partition(self) -> str:
        region = self._region
        return _PSEUDO["partition"] if region is None else partition_of(region)

    def _arn(self, service: str, resource: str) -> str:
        """An ARN in this stack's partition, region and account (built locally: format_arn costs a jsii call)."""
        region = self._region or _PSEUDO["region"]
        return f"arn:{self._partition}:{service}:{region}:{_PSEUDO['account']}:{resource}"

    def _allow(self, statement: dict[str, Any]) -> dict[str, Any]:
        """Add a policy statement (JSON form) to the execution role this construct owns: buffered while the construct
        is being built (they become the role's inline policy), added directly for rules added later."""
        if self._pending_statements is not None:
            self._pending_statements.append(statement)
        elif self._owned_role is not None:
            self._owned_role.add_to_policy(iam.PolicyStatement.from_json(statement))
        return statement

    def _acknowledge(self, findings: dict[str, str], *, on: str | None = None) -> None:
        """Record cdk-nag findings of the one resource at path ``on`` below this job (one acknowledgement call per
        resource at the end of construction). Without ``on``: the execution-role policy the statements just went
        to, its inline policy while the job is built, its default policy for rules added later. An acknowledgement
        covers that resource only, so a wildcard a user adds elsewhere (``job.role.add_to_policy``) is reported."""
        target = on or ("ExecutionRole" if self._pending_statements is not None else "ExecutionRole/DefaultPolicy")
        if self._findings is None:
            acknowledge_wildcards(self._resource_at(target), findings, stack=self._stack)
            return
        for finding, reason in findings.items():
            key = f"{target}|{finding}"
            known = self._findings.get(key)
            self._findings[key] = reason if known is None or reason in known else f"{known} {reason}"

    def _flush_findings(self) -> None:
        findings, self._findings = self._findings, None
        by_target: dict[str, dict[str, str]] = {}
        for key, reason in (findings or {}).items():
            target, _, finding = key.partition("|")
            by_target.setdefault(target, {})[finding] = reason
        for target, grouped in by_target.items():
            acknowledge_wildcards(self._resource_at(target), grouped, stack=self._stack)

    def _resource_at(self, path: str) -> IConstruct:
        node: IConstruct = self
        for part in path.split("/"):
            child = node.node.try_find_child(part)
            if child is None:
                raise LookupError(f"{self.node.path}: no {path!r} to acknowledge cdk-nag findings on")
            node = child
        return node

    def _grant_profiler_rule(self, rule_set: ProfilerRuleSet, rule: ProfilerRule) -> None:
        """What the execution role needs to run ``rule``: its evaluator image and, for a custom rule, its source."""
        repository = rule_set.image_repository_arn(rule)
        if repository is not None:
            self._allow_image_pull([repository])
        source = rule_set.source_object_arn(rule)
        if source is not None:
            self._allow({"Effect": "Allow", "Action": "s3:GetObject", "Resource": source})

    def _allow_image_pull(self, repository_arns: Sequence[str]) -> None:
        """Let ``role`` pull from these ECR repositories; one statement, extended as rules are added."""
        new = [arn for arn in dict.fromkeys(repository_arns) if arn not in self._pulled_repositories]
        if not new:
            return
        self._pulled_repositories += new
        if self._image_pull is not None and self._pending_statements is not None:
            self._image_pull["Resource"] += new  # still buffered: extend the one statement
            return
        self._image_pull = self._allow({
            "Effect": "Allow",
            "Action": ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
            "Resource": new,
        })

    def _debugger_rule_repositories(self, rules: Sequence[Rule]) -> list[str]:
        arns: list[str] = []
        for rule in rules:
            if rule.image_uri is None:
                arns.append(rule_image_repository_arn(self, custom=rule.is_custom))
            else:
                arns += _ecr_repository_arns(self._partition, rule.image_uri)
        return arns

    def _grant_debugger_rule_needs(
        self, rules: Sequence[Rule], permissions: RulePermissions, *, with_actions: bool = True
    ) -> None:
        """What the rule containers of ``rules`` need from the execution role this construct created."""
        if self._owned_role is None and self._pending_statements is None:
            return  # a role the user passed is used unchanged
        self._allow_image_pull(self._debugger_rule_repositories(rules))
        wildcards: dict[str, str] = {}
        for rule in rules:
            asset = self._debugger_rule_sources.get(rule)
            if asset is not None:
                self._allow({"Effect": "Allow", "Action": "s3:GetObject",
                                   "Resource": asset.bucket.arn_for_objects(asset.s3_object_key)})
            wildcards.update(self._allow_s3_prefix(rule.s3_output_path, f"rule {rule.name!r} output", writable=True))
            for trial in rule.other_trials:
                wildcards.update(self._allow_s3_prefix(trial, f"other trial of rule {rule.name!r}", writable=False))
        if wildcards:
            self._acknowledge(wildcards)
        if with_actions and self._owned_role is not None:
            self._grant_rule_actions(self._owned_role, permissions)

    def _grant_rule_actions(self, role: iam.Role, permissions: RulePermissions) -> None:
        """What the rule container calls for the actions (docs: "Debugger rule actions and the execution role")."""
        statements: list[iam.PolicyStatement] = []
        findings: dict[str, str] = {}
        if permissions.notification_topic:
            statements += self._notification_statements(permissions, findings)
        statements += self._stop_statements(permissions, findings)
        if not statements:
            return
        if self.rule_actions_policy is None:
            self.rule_actions_policy = iam.Policy(self, "RuleActionsPolicy", roles=[role])
        self.rule_actions_policy.add_statements(*statements)
        if findings:
            acknowledge_wildcards(self.rule_actions_policy, findings)

    def _notification_statements(self, permissions: RulePermissions, findings: dict[str, str]) -> list[iam.PolicyStatement]:
        """Email and SMS: the container creates the account-wide SMDebugRules topic if needed (CreateTopic, whose
        failure fails the action), lists the subscriptions (ListSubscriptions; without it, it subscribes nobody),
        subscribes each endpoint with a filter policy, and publishes. Subscribe is allowed for the configured
        endpoints only, so the training code cannot subscribe an address of its own and read every team's messages."""
        statements: list[iam.PolicyStatement] = []
        topic = self._stack.format_arn(service="sns", resource=RulePermissions.TOPIC_NAME)
        if not self._granted_topic:
            self._granted_topic = True
            statements.append(iam.PolicyStatement(actions=["sns:CreateTopic", "sns:Publish"], resources=[topic]))
            statements.append(iam.PolicyStatement(actions=["sns:ListSubscriptions"], resources=["*"]))
            findings["Resource::*"] = (
                "sns:ListSubscriptions has no resource-level permissions; the debugger rule container lists the "
                "subscriptions to subscribe each Email/SMS endpoint once (Subscribe itself is allowed only for the "
                "configured endpoints)."
            )
        new = [pair for pair in permissions.notification_endpoints if pair not in self._granted_endpoints]
        self._granted_endpoints = self._granted_endpoints | frozenset(new)
        for protocol in ("email", "sms"):
            # the container lowercases the whole action text, endpoints included
            endpoints = [e if is_token(e) else e.lower() for kind, e in new if kind == protocol]
            if endpoints:
                statements.append(iam.PolicyStatement(actions=["sns:Subscribe"], resources=[topic], conditions={
                    "StringEquals": {"sns:Protocol": protocol},
                    "StringEqualsIgnoreCase": {"sns:Endpoint": endpoints},
                }))
        return statements

    def _stop_statements(self, permissions: RulePermissions, findings: dict[str, str]) -> list[iam.PolicyStatement]:
        """StopTraining lists the in-progress jobs (ListTrainingJobs) and stops the one job it finds. The run's own
        StopTraining may stop ``<prefix>-*`` (never a sibling prefix's jobs); one with its own prefix, that prefix."""
        run_name = example_job_name(self.job_name_prefix)
        names: dict[str, str] = {}  # resource-name pattern -> what it stops
        for prefix in permissions.stop_training_job_prefixes:
            if prefix == run_name:
                names[job_name_pattern(f"{self.job_name_prefix}-")] = ("this job's runs (the action names the run's "
                                                                       "exact job)")
            else:
                names[job_name_pattern(prefix)] = f"a running job whose name starts with {prefix!r}"
        new = {pattern: what for pattern, what in names.items() if pattern not in self._granted_stop_patterns}
        if not new:
            return []
        statements: list[iam.PolicyStatement] = []
        if not self._granted_stop_patterns:
            statements.append(iam.PolicyStatement(actions=["sagemaker:ListTrainingJobs"], resources=["*"]))
            reason = findings.get("Resource::*", "")
            findings["Resource::*"] = (reason + " " if reason else "") + (
                "sagemaker:ListTrainingJobs has no resource-level permissions; the debugger rule container lists "
                "in-progress jobs by name to find the one a StopTraining action stops."
            )
        self._granted_stop_patterns.update(new)
        arns = [self._arn("sagemaker", f"training-job/{pattern}") for pattern in new]
        statements.append(iam.PolicyStatement(actions=["sagemaker:StopTrainingJob"], resources=arns))
        for arn, what in zip(arns, new.values(), strict=True):
            findings[f"Resource::{arn}"] = (
                f"StopTraining actions of debugger rules stop {what}; job names get a random suffix per run, and no "
                "other job can be stopped."
            )
        return statements

    def _deny_evaluator_keys(self) -> None:
        """The RuleEvaluator keeps its state and reports under each run's rule-output/: the training code (this
        execution role) must not write them, or one run could forge another run's verdicts. SageMaker's own rule
        output beside them (rule-output/<rule>/profiler-output/) stays writable."""
        object_prefix = f"{self.output_prefix}/" if self.output_prefix else ""
        runs = f"{self._output_bucket_arn}/{object_prefix}{self.job_name_prefix}-*/rule-output"
        self._allow({
            "Effect": "Deny",
            "Action": ["s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"],
            "Resource": [f"{runs}/{EVALUATOR_STATE_FILE}", f"{runs}/*/{EVALUATOR_REPORT_FOLDER}/*"],
        })

    def _state_machine_role(self) -> iam.Role:
        """The state machine's role with exactly what createTrainingJob.sync needs, scoped to this construct's jobs."""
        role = iam.Role(
            self,
            "StateMachineRole",
            assumed_by=iam.ServicePrincipal("states.amazonaws.com", conditions={
                "ArnLike": {"aws:SourceArn": self._arn("states", "stateMachine:*")},
                "StringEquals": {"aws:SourceAccount": _PSEUDO["account"]},
            }),
            inline_policies={"StartTrainingJobs": iam.PolicyDocument.from_json({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Resource": self.training_job_arn_pattern, "Action": [
                    "sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob",
                    "sagemaker:AddTags", "sagemaker:ListTags"]},
                {"Effect": "Allow", "Action": "iam:PassRole", "Resource": self._role_arn,
                 "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}},
                {"Effect": "Allow", "Action": ["events:PutTargets", "events:PutRule", "events:DescribeRule"],
                 "Resource": self._arn("events", "rule/StepFunctionsGetEventsForSageMakerTrainingJobsRule")},
            ]})},
        )
        self._acknowledge({
            f"Resource::{self.training_job_arn_pattern}": (
                "Each execution creates, tags, describes and stops a job named <prefix>-<random suffix>; the pattern "
                "matches only this construct's jobs."
            ),
        }, on="StateMachineRole")
        # The StateMachine construct adds these to the role's default policy (it exists once the machine does).
        self._acknowledge({
            "Resource::*": (
                "X-Ray tracing and CloudWatch Logs delivery actions added by the StateMachine construct have no "
                "resource-level permissions."
            ),
        }, on="StateMachineRole/DefaultPolicy")
        return role

    def _start_on_deploy(self) -> cr.AwsCustomResource:
        """Starts a run on deploy, and again whenever the rendered request changes (its hash is a property)."""
        request_hash = hashlib.sha256(
            json.dumps(self._stack.resolve(self.render_request()), sort_keys=True, default=str).encode()
        ).hexdigest()[:16]
        call = cr.AwsSdkCall(
            service="SFN",
            action="startExecution",
            parameters={"stateMachineArn": self.state_machine.state_machine_arn, "input": "{}"},
            physical_resource_id=cr.PhysicalResourceId.from_response("executionArn"),
            output_paths=["executionArn"],
        )
        trigger = cr.AwsCustomResource(
            self,
            "StartOnDeploy",
            on_create=call,
            on_update=call,
            policy=cr.AwsCustomResourcePolicy.from_statements([
                iam.PolicyStatement(actions=["states:StartExecution"], resources=[self.state_machine.state_machine_arn])
            ]),
            install_latest_aws_sdk=False,
            resource_type="Custom::StartTrainingRun",
        )
        resource = trigger.node.find_child("Resource").node.default_child
        resource.add_property_override("RequestHash", request_hash)  # type: ignore[union-attr]
        trigger.node.add_dependency(self.state_machine)
        return trigger

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
        step = training_step(name, self.render_request(), depends_on=depends_on, display_name=display_name,
                             description=description, cache_expire_after=cache_expire_after, where=self._where)
        dropped = sorted(set(self.request_members.top.get("ExperimentConfig", {})) - {"TrialComponentDisplayName"})
        if dropped:
            self._warn("pipelineExperimentConfig", f"Pipeline step {name!r} leaves out ExperimentConfig "
                       f"{', '.join(dropped)}: Pipelines associates its jobs with the pipeline's own experiment and "
                       "trial (the SageMaker Python SDK drops them too).")
        _ = self._pipeline_sampler_uploads
        return step

    @functools.cached_property
    def _pipeline_sampler_uploads(self) -> str | None:
        """Once: let the execution role this construct created upload the sampler files of pipeline runs."""
        if self.sampler_bundle is None or self._owned_role is None:
            return None
        match = _S3_URI.match(self.profiler_s3_uri) if not is_token(self.profiler_s3_uri) else None
        key = match["key"].strip("/") if match else self.output_prefix
        bucket_arn = f"arn:{self._partition}:s3:::{match['bucket']}" if match else self._output_bucket_arn
        uploads = f"{bucket_arn}/{key + '/' if key else ''}{PIPELINE_JOB_NAME_PREFIX}-*/profiler-output/*"
        self._allow({"Effect": "Allow", "Action": "s3:PutObject", "Resource": uploads})
        self._acknowledge({f"Resource::{uploads}": "The sampler of a SageMaker Pipelines run uploads its profiler files "
                           "to <job>/profiler-output/, and Pipelines names each job pipelines-<execution>-<step>-..."})
        return uploads


def _warn_about_shared_prefix(job: ProfiledTrainingJob, prefix: str) -> None:
    """Warn when another job of the same stack, or of a stack in the same region, has this prefix (ARNs ignore case),
    or one whose runs this one's cover. Jobs in other regions, or where a region is unknown, cannot be compared."""
    known = _PREFIXES.setdefault(job.node.root, [])
    mine = prefix.lower()
    for other_job in known:
        other = other_job.job_name_prefix.lower()
        same_place = other_job._stack is job._stack or (job._region is not None and other_job._region == job._region)
        if not same_place:
            continue
        if other == mine:
            overlap = "uses the same job_name_prefix"
        elif other.startswith(f"{mine}-") or mine.startswith(f"{other}-"):
            overlap = f"uses job_name_prefix {other_job.job_name_prefix!r}, and one job's names start with the other's"
        else:
            continue
        cdk.Annotations.of(job).add_warning_v2(
            f"{_WARNING_PREFIX}:sharedJobNamePrefix",
            f"{other_job.node.path} {overlap} ({prefix!r}): the IAM grants (training-job/{mine}-*), RuleAlarm and "
            "RuleEvaluator of each job then also cover the other's runs, so a verdict about one can stop or notify "
            "about the other. Give each job a prefix that does not start another's, such as 'team-a-bert'.",
        )
    known.append(job)


def _escape_intrinsic(text: str) -> str:
    """``text`` as a string literal inside an intrinsic function: ' { } and \\ escaped (deploy-time tokens kept)."""
    return "".join(part if _STRING_TOKEN.fullmatch(part) else re.sub(r"([\\'{}])", r"\\\1", part)
                   for part in _STRING_TOKEN.split(text))


def _with_run_name(parameters: dict[str, Any], name: str) -> dict[str, Any]:
    """Rule parameters that hold the run's job name (the example ``name``) read the real one from the state input:
    ``key.$`` with the path, or with a States.Format whose template is the value with {} for the name."""
    result: dict[str, Any] = {}
    for key, value in parameters.items():
        if not isinstance(value, str) or name not in value:
            result[key] = value
        elif value == name:
            result[f"{key}.$"] = _RUN_NAME
        else:
            template = "{}".join(_escape_intrinsic(part) for part in value.split(name))
            arguments = ", ".join([_RUN_NAME] * value.count(name))
            result[f"{key}.$"] = f"States.Format('{template}', {arguments})"
    return result


def _ecr_repository_arns(partition: str, image: str) -> list[str]:
    """The ARN of the ECR repository ``image`` is pulled from (none for tokens and images outside ECR)."""
    match = _ECR_IMAGE.match(image) if not is_token(image) else None
    if match is None:
        return []
    return [f"arn:{partition}:ecr:{match['region']}:{match['account']}:repository/{match['repo']}"]


def _features_in_use(features: DebuggerFeatures) -> str:
    used = []
    if features.system_monitoring:
        used.append("system monitoring (on unless profiler=ProfilerConfig(disable_profiler=True))")
    if features.framework_profiling:
        used.append("framework profiling")
    if features.profiler_rules:
        used.append("profiler rules")
    if features.tensor_debugging:
        used.append("the debugger hook/rules")
    return ", ".join(used)


def _subnet_kwargs(selection: ec2.SubnetSelection | None) -> dict[str, Any]:
    if selection is None:
        return {"subnet_type": ec2.SubnetType.PRIVATE_WITH_EGRESS}
    return {k: getattr(selection, k) for k in ("availability_zones", "one_per_az", "subnet_filters", "subnet_group_name",
                                                "subnets", "subnet_type") if getattr(selection, k, None) is not None}


@jsii.implements(cdk.IStableAnyProducer)
class _Producer:
    """Adapter so ``Lazy.any`` can call a Python function when the state machine definition is rendered."""

    def __init__(self, function: Any) -> None:
        self._function = function

    def produce(self) -> Any:
        return self._function()


@jsii.implements(IValidation)
class _StackValidation:
    """Validates every job's full request when the app synthesizes (after every add_rule call). One validation per
    stack rather than per job: each registration is a round trip to the jsii process."""

    _by_stack: weakref.WeakKeyDictionary[cdk.Stack, _StackValidation] = weakref.WeakKeyDictionary()

    def __init__(self) -> None:
        self._jobs: list[ProfiledTrainingJob] = []

    @classmethod
    def register(cls, job: ProfiledTrainingJob) -> None:
        validation = cls._by_stack.get(job._stack)
        if validation is None:
            validation = cls._by_stack[job._stack] = cls()
            job._stack.node.add_validation(validation)
        validation._jobs.append(job)

    def validate(self) -> list[str]:
        return [f"{job.node.path}: {problem}" for job in self._jobs for problem in job.validate_request()]
