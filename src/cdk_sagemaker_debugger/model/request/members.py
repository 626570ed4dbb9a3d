"""Every member of CreateTrainingJob: the typed props beyond the basics, ``request_overrides`` for the rest, and the one
table that accounts for each member of botocore's ``CreateTrainingJobRequest`` (a test fails when the pinned model grows
a member the table does not name).

ProfiledTrainingJob keeps its constructor short: it hands the new props to :func:`request_members` and calls
:meth:`RequestMembers.apply` on the request it renders.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import regex

from ..api_model import request_problems, sagemaker_model
from ..errors import ConfigurationError, ConfigurationTypeError, did_you_mean
from ..parameters import is_token

__all__ = [
    "MEMBER_PROPS",
    "EXPANDED_MEMBERS",
    "OWNED_HINTS",
    "DEFAULT_INSTANCE_TYPE",
    "TrainingImageConfig",
    "InstanceGroup",
    "ExperimentConfig",
    "MlflowConfig",
    "RequestMembers",
    "request_members",
    "check_overrides",
    "merge_overrides",
]

#: ProfiledTrainingJob's default ``instance_type`` (instance_groups replaces it).
DEFAULT_INSTANCE_TYPE = "ml.m5.xlarge"

#: Structures whose members are accounted for one by one (the construct renders part of them; overrides may add the
#: rest, deep-merged). Every other member is set whole, by one prop or by ``request_overrides``.
EXPANDED_MEMBERS = ("AlgorithmSpecification", "OutputDataConfig", "ResourceConfig", "StoppingCondition")

#: Member path -> the ProfiledTrainingJob prop that sets it, or None: reachable through ``request_overrides`` only.
MEMBER_PROPS: dict[str, str | None] = {
    "TrainingJobName": "job_name_prefix",
    "HyperParameters": "hyperparameters",
    "AlgorithmSpecification.TrainingImage": "training_image",
    "AlgorithmSpecification.AlgorithmName": "algorithm_name",
    "AlgorithmSpecification.TrainingInputMode": "training_input_mode",
    "AlgorithmSpecification.MetricDefinitions": "metric_definitions",
    "AlgorithmSpecification.EnableSageMakerMetricsTimeSeries": "enable_sagemaker_metrics_time_series",
    "AlgorithmSpecification.ContainerEntrypoint": "container_entrypoint",
    "AlgorithmSpecification.ContainerArguments": "container_arguments",
    "AlgorithmSpecification.TrainingImageConfig": "training_image_config",
    "RoleArn": "role",
    "InputDataConfig": "inputs",
    "OutputDataConfig.S3OutputPath": "output_bucket",
    "OutputDataConfig.KmsKeyId": "output_kms_key",
    "OutputDataConfig.CompressionType": None,
    "ResourceConfig.InstanceType": "instance_type",
    "ResourceConfig.InstanceCount": "instance_count",
    "ResourceConfig.VolumeSizeInGB": "volume_size_in_gb",
    "ResourceConfig.VolumeKmsKeyId": "volume_kms_key",
    "ResourceConfig.KeepAlivePeriodInSeconds": "keep_alive",
    "ResourceConfig.InstanceGroups": "instance_groups",
    "ResourceConfig.TrainingPlanArn": None,
    "ResourceConfig.InstancePlacementConfig": None,
    "ResourceConfig.InstancePreferences": None,
    "ResourceConfig.SelectedInstanceType": None,
    "ResourceConfig.SelectedInstanceCount": None,
    "VpcConfig": "vpc",
    "StoppingCondition.MaxRuntimeInSeconds": "max_runtime",
    "StoppingCondition.MaxWaitTimeInSeconds": "max_wait",
    "StoppingCondition.MaxPendingTimeInSeconds": None,
    "Tags": "tags",
    "EnableNetworkIsolation": "enable_network_isolation",
    "EnableInterContainerTrafficEncryption": "encrypt_inter_container_traffic",
    "EnableManagedSpotTraining": "use_spot_instances",
    "CheckpointConfig": "checkpoint_s3_uri",
    "DebugHookConfig": "debug_hook",
    "DebugRuleConfigurations": "debugger_rules",
    "TensorBoardOutputConfig": "tensorboard",
    "ExperimentConfig": "experiment_config",
    "ProfilerConfig": "profiler",
    "ProfilerRuleConfigurations": "rule_set",
    "Environment": "environment",
    "RetryStrategy": "retry_attempts",
    "RemoteDebugConfig": "remote_debug",
    "InfraCheckConfig": "infra_check",
    "SessionChainingConfig": "session_tag_chaining",
    "ServerlessJobConfig": None,
    "MlflowConfig": "mlflow",
    "ModelPackageConfig": None,
}

#: Why a member the construct owns cannot be overridden, where the prop name alone does not say it.
OWNED_HINTS: dict[str, str] = {
    "TrainingJobName": "each run is named <job_name_prefix>-<20 hex characters>; Pipelines names its own jobs",
    "RoleArn": "or let the construct create its least-privilege execution role",
    "InputDataConfig": "the construct adds the sampler's channel itself",
    "Environment": "the sampler's variables come from sampler=",
    "OutputDataConfig.S3OutputPath": "with output_prefix=",
    "CheckpointConfig": "with checkpoint_local_path=",
    "VpcConfig": "with vpc_subnets= and security_groups=",
    "DebugHookConfig": "with rule_engine=RuleEngine.DEBUGGER",
    "DebugRuleConfigurations": "with rule_engine=RuleEngine.DEBUGGER",
    "TensorBoardOutputConfig": "with rule_engine=RuleEngine.DEBUGGER",
    "ProfilerConfig": "with rule_engine=RuleEngine.DEBUGGER; the evaluator's sampler is set with sampler=",
}

_PROBE_ROLE = "arn:aws:iam::123456789012:role/probe"
_INDEX = regex.compile(r"\[\d+\]")


@dataclass(frozen=True)
class TrainingImageConfig:
    """Pull the training image from a private Docker registry (``AlgorithmSpecification.TrainingImageConfig``).

    :param repository_access_mode: ``"Vpc"`` (a private registry reached through the job's VPC; needs ``vpc=``) or
        ``"Platform"`` (Amazon ECR). Default: ``"Vpc"``.
    :param credentials_provider_arn: ARN of the Lambda function that returns the registry's credentials
        (``TrainingRepositoryAuthConfig``). Default: None (the registry needs no authentication).
    """

    repository_access_mode: str = "Vpc"
    credentials_provider_arn: str | None = None

    def to_request(self) -> dict[str, Any]:
        config: dict[str, Any] = {"TrainingRepositoryAccessMode": self.repository_access_mode}
        if self.credentials_provider_arn is not None:
            config["TrainingRepositoryAuthConfig"] = {
                "TrainingRepositoryCredentialsProviderArn": self.credentials_provider_arn}
        return config


@dataclass(frozen=True)
class InstanceGroup:
    """One instance group of a heterogeneous cluster (``ResourceConfig.InstanceGroups``, at most 5 groups).

    :param name: the group's name (``InstanceGroupName``), unique in the job; the script reads it from
        ``/opt/ml/input/config/resourceconfig.json``.
    :param instance_type: a SageMaker training instance type, e.g. ``"ml.p4d.24xlarge"``.
    :param instance_count: instances in this group. Default: 1.
    """

    name: str
    instance_type: str
    instance_count: int = 1

    def to_request(self) -> dict[str, Any]:
        return {"InstanceGroupName": self.name, "InstanceType": self.instance_type, "InstanceCount": self.instance_count}


@dataclass(frozen=True)
class ExperimentConfig:
    """Associate each run with a SageMaker Experiment (``ExperimentConfig``); every field defaults to None (unset).

    In a SageMaker Pipelines step only ``trial_component_display_name`` is kept, as the SageMaker Python SDK does:
    Pipelines associates its jobs with the pipeline's own experiment and trial.
    """

    experiment_name: str | None = None
    trial_name: str | None = None
    trial_component_display_name: str | None = None
    run_name: str | None = None

    def to_request(self) -> dict[str, Any]:
        fields = (("ExperimentName", self.experiment_name), ("TrialName", self.trial_name),
                  ("TrialComponentDisplayName", self.trial_component_display_name), ("RunName", self.run_name))
        return {key: value for key, value in fields if value is not None}


@dataclass(frozen=True)
class MlflowConfig:
    """Log the run to a SageMaker managed MLflow tracking server (``MlflowConfig``).

    :param resource_arn: ARN of the MLflow tracking server or app (``MlflowResourceArn``).
    :param experiment_name: MLflow experiment. Default: None (SageMaker's default).
    :param run_name: MLflow run. Default: None (SageMaker's default).
    """

    resource_arn: str
    experiment_name: str | None = None
    run_name: str | None = None

    def to_request(self) -> dict[str, Any]:
        config: dict[str, Any] = {"MlflowResourceArn": self.resource_arn}
        for key, value in (("MlflowExperimentName", self.experiment_name), ("MlflowRunName", self.run_name)):
            if value is not None:
                config[key] = value
        return config


@dataclass(frozen=True)
class RequestMembers:
    """The rendered extra members: nested ones for AlgorithmSpecification and ResourceConfig, top-level ones, and the
    validated overrides. :meth:`apply` adds them to a request the construct rendered."""

    algorithm: dict[str, Any] = field(default_factory=dict)
    resource: dict[str, Any] = field(default_factory=dict)
    top: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)
    #: ``instance_groups`` replaces ResourceConfig.InstanceType/InstanceCount.
    heterogeneous: bool = False

    def apply(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """``fields`` (request members by name) with these members added and the overrides deep-merged."""
        result = dict(fields)
        if self.algorithm:
            result["AlgorithmSpecification"] = {**result["AlgorithmSpecification"], **self.algorithm}
        if self.resource:
            resource = dict(result["ResourceConfig"])
            if self.heterogeneous:
                resource.pop("InstanceType", None)
                resource.pop("InstanceCount", None)
            result["ResourceConfig"] = {**resource, **self.resource}
        result.update(self.top)
        return merge_overrides(result, self.overrides)


def request_members(
    *,
    where: Any = None,
    instance_type: Any = DEFAULT_INSTANCE_TYPE,
    instance_count: Any = 1,
    metric_definitions: Mapping[str, str] | None = None,
    enable_sagemaker_metrics_time_series: bool | None = None,
    retry_attempts: int | None = None,
    training_image_config: TrainingImageConfig | None = None,
    instance_groups: Sequence[InstanceGroup] | None = None,
    keep_alive_seconds: float | None = None,
    infra_check: bool | None = None,
    remote_debug: bool | None = None,
    container_entrypoint: Sequence[str] | None = None,
    container_arguments: Sequence[str] | None = None,
    experiment_config: ExperimentConfig | None = None,
    mlflow: MlflowConfig | None = None,
    session_tag_chaining: bool | None = None,
    request_overrides: Mapping[str, Any] | None = None,
) -> RequestMembers:
    """Check the props and render them; raises ConfigurationError naming the prop, the bad value and the fix."""
    _check_instance_groups(instance_groups, instance_type, instance_count, keep_alive_seconds, where)
    algorithm = {
        "TrainingImageConfig": _typed(training_image_config, TrainingImageConfig, "training_image_config", where),
        "ContainerEntrypoint": _string_list(container_entrypoint, "container_entrypoint", where),
        "ContainerArguments": _string_list(container_arguments, "container_arguments", where),
        "MetricDefinitions": _metric_definitions(metric_definitions, where),
        "EnableSageMakerMetricsTimeSeries": enable_sagemaker_metrics_time_series,
    }
    resource = {
        "KeepAlivePeriodInSeconds": _whole_seconds(keep_alive_seconds, "keep_alive", where),
        "InstanceGroups": None if instance_groups is None else [g.to_request() for g in instance_groups],
    }
    experiment = _typed(experiment_config, ExperimentConfig, "experiment_config", where)
    top = {
        "ExperimentConfig": experiment or None,
        "InfraCheckConfig": None if infra_check is None else {"EnableInfraCheck": infra_check},
        "RemoteDebugConfig": None if remote_debug is None else {"EnableRemoteDebug": remote_debug},
        "SessionChainingConfig": (None if session_tag_chaining is None
                                  else {"EnableSessionTagChaining": session_tag_chaining}),
        "RetryStrategy": None if retry_attempts is None else {"MaximumRetryAttempts": retry_attempts},
        "MlflowConfig": _typed(mlflow, MlflowConfig, "mlflow", where),
    }
    members = RequestMembers(
        algorithm={k: v for k, v in algorithm.items() if v is not None},
        resource={k: v for k, v in resource.items() if v is not None},
        top={k: v for k, v in top.items() if v is not None},
        overrides=check_overrides(request_overrides, where=where),
        heterogeneous=instance_groups is not None,
    )
    _check_against_model(members, where)
    return members


# -- checks of the typed props -------------------------------------------------------------------------------------
def _typed(value: Any, kind: type, field_name: str, where: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, kind):
        hint = f" Build it with {kind.__name__}(...)." if isinstance(value, Mapping) else ""
        raise ConfigurationTypeError(f"expected a {kind.__name__}, got {type(value).__name__}.{hint}", where=where,
                                     field=field_name, value=value)
    return value.to_request()  # type: ignore[attr-defined]


def _string_list(values: Any, field_name: str, where: Any) -> list[str] | None:
    if values is None:
        return None
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise ConfigurationTypeError(
            f"expected a list of strings, e.g. ['python', 'train.py'], got {type(values).__name__} {values!r}.",
            where=where, field=field_name, value=values)
    return list(values)


def _metric_definitions(definitions: Any, where: Any) -> list[dict[str, str]] | None:
    """``{"train:loss": r"loss=([0-9.]+)"}`` -> MetricDefinitions; each regex must compile and capture the value."""
    if definitions is None:
        return None
    if not isinstance(definitions, Mapping):
        raise ConfigurationTypeError(
            f"expected a mapping of metric name -> regex, e.g. {{'train:loss': r'loss=([0-9.]+)'}}, got "
            f"{type(definitions).__name__}.", where=where, field="metric_definitions", value=definitions)
    for name, pattern in definitions.items():
        if not isinstance(name, str) or not isinstance(pattern, str):
            raise ConfigurationTypeError(f"names and regexes must be strings, got {name!r}: {pattern!r}.",
                                         where=where, field="metric_definitions", value={name: pattern})
        if is_token(pattern):
            continue
        try:
            groups = regex.compile(pattern).groups
        except regex.error as error:
            raise ConfigurationError(f"the regex {pattern!r} does not compile ({error}).", where=where,
                                     field=f"metric_definitions[{name!r}]", value=pattern) from None
        if groups < 1:
            raise ConfigurationError(
                f"the regex {pattern!r} has no capturing group; SageMaker takes the metric's value from the first "
                f"group, e.g. {pattern + '=([0-9.]+)'!r}.", where=where, field=f"metric_definitions[{name!r}]",
                value=pattern)
    return [{"Name": name, "Regex": pattern} for name, pattern in definitions.items()]


def _whole_seconds(seconds: float | None, field_name: str, where: Any) -> int | None:
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ConfigurationTypeError(f"expected a cdk.Duration, got {type(seconds).__name__} {seconds!r}.",
                                     where=where, field=field_name, value=seconds)
    if seconds != int(seconds):
        raise ConfigurationError(f"must be whole seconds, got {seconds} s; use cdk.Duration.seconds({int(seconds)}) "
                                 "or cdk.Duration.minutes(...).", where=where, field=field_name, value=seconds)
    return int(seconds)


def _check_instance_groups(groups: Any, instance_type: Any, instance_count: Any, keep_alive: Any, where: Any) -> None:
    if groups is None:
        return
    if isinstance(groups, (str, Mapping)) or not isinstance(groups, Sequence) or not groups or not all(
            isinstance(g, InstanceGroup) for g in groups):
        raise ConfigurationTypeError(
            "expected a non-empty list of InstanceGroup(name, instance_type, instance_count), got "
            f"{groups!r}.", where=where, field="instance_groups", value=groups)
    if instance_type != DEFAULT_INSTANCE_TYPE or instance_count != 1:
        raise ConfigurationError(
            f"a heterogeneous cluster sets each group's type and count, so instance_type ({instance_type!r}) and "
            f"instance_count ({instance_count!r}) cannot be used with it: remove them and put every instance in an "
            "InstanceGroup.", where=where, field="instance_groups", value=[g.name for g in groups])
    if keep_alive is not None:
        raise ConfigurationError(
            "warm pools (keep_alive) are not available with heterogeneous clusters (Terraform's "
            "aws_sagemaker_training_job marks the two as conflicting): remove keep_alive or instance_groups.",
            where=where, field="keep_alive", value=keep_alive)
    names = [g.name for g in groups]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigurationError(f"instance group names must be unique; repeated: {', '.join(duplicates)}.",
                                 where=where, field="instance_groups", value=names)


def _prop_of(path: str) -> str:
    """The prop (or ``request_overrides``) responsible for a problem at ``path`` such as
    ``AlgorithmSpecification.MetricDefinitions[0].Regex``."""
    parts = _INDEX.sub("", path).split(".")
    for end in range(len(parts), 0, -1):
        key = ".".join(parts[:end])
        if key in MEMBER_PROPS:
            return MEMBER_PROPS[key] or "request_overrides"
    return "request_overrides"


def _check_against_model(members: RequestMembers, where: Any) -> None:
    """The members through the same botocore check as the whole request, in a minimal probe request."""
    probe = members.apply({
        "TrainingJobName": "probe",
        "RoleArn": _PROBE_ROLE,
        "OutputDataConfig": {"S3OutputPath": "s3://probe/output"},
        "AlgorithmSpecification": {"TrainingInputMode": "File"},
        "ResourceConfig": {},
    })
    problems = request_problems(probe)
    if problems:
        path, _ = problems[0]
        lines = "; ".join(f"{p}: {problem}" for p, problem in problems)
        raise ConfigurationError(f"not valid for the SageMaker API: {lines}.", where=where, field=_prop_of(path),
                                 value=path)


# -- request_overrides ---------------------------------------------------------------------------------------------
def _owned(path: str) -> str:
    prop = MEMBER_PROPS[path]
    hint = OWNED_HINTS.get(path)
    return f"{path} (use {prop}=" + (f"; {hint})" if hint else ")")


def check_overrides(overrides: Mapping[str, Any] | None, *, where: Any = None) -> dict[str, Any]:
    """A deep copy of ``overrides`` after refusing unknown members and members the construct owns (with the prop to use
    instead). Members of AlgorithmSpecification, OutputDataConfig, ResourceConfig and StoppingCondition are given as
    nested mappings and deep-merged; every other member replaces the rendered one."""
    if overrides is None:
        return {}
    if not isinstance(overrides, Mapping):
        raise ConfigurationTypeError(f"expected a mapping of CreateTrainingJob members, got {type(overrides).__name__}.",
                                     where=where, field="request_overrides", value=overrides)
    shape = sagemaker_model().operation_model("CreateTrainingJob").input_shape
    unknown: list[str] = []
    owned: list[str] = []
    for key, value in overrides.items():
        if key not in shape.members:
            unknown.append(f"{key!r}{did_you_mean(str(key), shape.members)}")
        elif key in EXPANDED_MEMBERS:
            if not isinstance(value, Mapping):
                raise ConfigurationTypeError(f"{key} is merged member by member: give a mapping such as "
                                             f"{{'{key}': {{...}}}}, got {type(value).__name__}.", where=where,
                                             field=f"request_overrides.{key}", value=value)
            members = shape.members[key].members
            for sub in value:
                path = f"{key}.{sub}"
                if sub not in members:
                    unknown.append(f"{path!r}{did_you_mean(str(sub), members)}")
                elif MEMBER_PROPS.get(path):
                    owned.append(_owned(path))
        elif MEMBER_PROPS.get(key):
            owned.append(_owned(key))
    if unknown:
        raise ConfigurationError(f"not members of CreateTrainingJob: {', '.join(unknown)}.", where=where,
                                 field="request_overrides", value=list(overrides))
    if owned:
        raise ConfigurationError(f"these members are rendered by ProfiledTrainingJob and cannot be overridden: "
                                 f"{'; '.join(owned)}.", where=where, field="request_overrides", value=list(overrides))
    return copy.deepcopy(dict(overrides))


def merge_overrides(request: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``request`` with ``overrides`` deep-merged: nested members of the expanded structures, whole values otherwise."""
    result = dict(request)
    for key, value in overrides.items():
        if key in EXPANDED_MEMBERS:
            result[key] = {**result.get(key, {}), **copy.deepcopy(value)}
        else:
            result[key] = copy.deepcopy(value)
    return result
