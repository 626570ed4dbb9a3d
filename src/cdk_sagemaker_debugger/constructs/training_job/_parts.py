"""JobParts: the ProfiledTrainingJob as its parts (props, execution role, state machine, pipeline step, engines) see
it. A structural type, so the parts never import the construct and the package has no import cycle."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_stepfunctions as sfn
from constructs import Node

from ...model.debug_hook import DebugHookConfig, TensorBoardOutputConfig
from ...model.distribution import Distribution
from ...model.frameworks import FrameworkInfo
from ...model.profiler_config import ProfilerConfig
from ...model.request.members import RequestMembers
from .._cdk.lazy import LazyPath
from .._cdk.nag import Findings
from ..family import TrainingJobs
from ..rule_set import ProfilerRuleSet
from ..sampler import Sampler
from .channels import InputChannel

__all__ = ["JobParts"]


class JobParts(Protocol):
    """What the parts of a job read and call (each is documented on ProfiledTrainingJob)."""

    node: Node
    job_name_prefix: str
    training_input_mode: str
    volume_size_in_gb: int
    vpc: Any
    tags: dict[str, str]
    encrypt_inter_container_traffic: bool
    use_spot_instances: bool
    checkpoint_local_path: str | None
    training_image: str | None
    algorithm_name: str | None
    training_image_repository: ecr.IRepository | None
    instance_type: str
    instance_count: int
    volume_kms_key: kms.IKey | None
    output_kms_key: kms.IKey | None
    inputs: tuple[InputChannel, ...]
    enable_network_isolation: bool
    checkpoint_s3_uri: str | None
    profiler: ProfilerConfig
    rule_set: ProfilerRuleSet | None
    framework: FrameworkInfo | None
    distribution: Distribution | None
    debug_hook_setting: DebugHookConfig | bool | None
    tensorboard: TensorBoardOutputConfig | None
    request_members: RequestMembers
    sampler: Sampler | None
    sampler_bundle: s3_assets.Asset | None
    output_bucket: s3.IBucket
    output_prefix: str
    output_s3_uri: str
    profiler_s3_uri: str
    rule_output_s3_uri: str
    role: iam.IRole
    state_machine: sfn.StateMachine
    training_job_arn_pattern: str
    training_jobs: TrainingJobs
    _where: LazyPath
    _stack: cdk.Stack
    _region: str | None
    _partition: str
    _environment: Mapping[str, str] | None
    #: The RuleEngineBinding (engines/base.py) and the ExecutionPolicy (execution_role.py); typed loosely because
    #: both read this view, and a type import of either here would close an import cycle.
    _engine: Any
    _policy: Any
    _findings: Findings
    _output_bucket_arn: str
    _output_key_arn: str | None
    _volume_key_arn: str | None
    _security_group_ids: list[str]
    _subnet_ids: list[str]
    _stopping: dict[str, Any]
    _hyperparameters: Mapping[str, str] | None
    _role_arn: str

    @property
    def debug_hook(self) -> DebugHookConfig | None: ...

    def _arn(self, service: str, resource: str) -> str: ...

    def _warn(self, kind: str, message: str) -> None: ...

    def render_request(self, *, job_name: str | None = None) -> dict[str, Any]: ...

    def validate_request(self) -> list[str]: ...
