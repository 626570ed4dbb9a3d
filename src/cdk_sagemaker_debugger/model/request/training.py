"""CreateTrainingJob request assembly and the checks that need no CDK: job-name prefixes, hyperparameters, spot timing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import job_family
from ..api_model import enum_values
from ..errors import ConfigurationError, ConfigurationTypeError, did_you_mean
from ..job_family import JOB_NAME_SUFFIX_LENGTH, MAX_JOB_NAME_PREFIX_LENGTH
from ..parameters import is_token

__all__ = [
    "JOB_NAME_SUFFIX_LENGTH",
    "MAX_JOB_NAME_PREFIX_LENGTH",
    "check_job_name_prefix",
    "example_job_name",
    "normalize_string_map",
    "check_instance",
    "check_stopping",
    "assemble_request",
    "REQUEST_KEY_ORDER",
]

TRAINING_INPUT_MODES = ("File", "Pipe", "FastFile")

# Members added after the first release sit where the SageMaker Python SDK's _get_train_request inserts them relative to
# their neighbours (InfraCheckConfig right after the algorithm, ExperimentConfig after the VPC, RemoteDebugConfig,
# SessionChainingConfig and RetryStrategy last); members the SDK does not send (MlflowConfig, ModelPackageConfig,
# ServerlessJobConfig) follow. A request without them is unchanged.
REQUEST_KEY_ORDER = (
    "TrainingJobName",
    "AlgorithmSpecification",
    "RoleArn",
    "InfraCheckConfig",
    "InputDataConfig",
    "OutputDataConfig",
    "ResourceConfig",
    "VpcConfig",
    "StoppingCondition",
    "HyperParameters",
    "Environment",
    "Tags",
    "ExperimentConfig",
    "EnableNetworkIsolation",
    "EnableInterContainerTrafficEncryption",
    "EnableManagedSpotTraining",
    "CheckpointConfig",
    "DebugHookConfig",
    "DebugRuleConfigurations",
    "TensorBoardOutputConfig",
    "ProfilerConfig",
    "ProfilerRuleConfigurations",
    "RemoteDebugConfig",
    "SessionChainingConfig",
    "RetryStrategy",
    "MlflowConfig",
    "ModelPackageConfig",
    "ServerlessJobConfig",
)


def check_job_name_prefix(prefix: Any, *, where: str | None = None) -> None:
    """A ProfiledTrainingJob prefix that, with the 21-character unique suffix, always gives a valid TrainingJobName."""
    job_family.check_job_name_prefix(prefix, where=where, own=True)


def example_job_name(prefix: str) -> str:
    """A job name as an execution would generate it, for validating the request at synth time."""
    return f"{prefix}-{'0' * (JOB_NAME_SUFFIX_LENGTH - 1)}"


def normalize_string_map(values: Mapping[str, Any] | None, *, field: str, where: str | None = None) -> dict[str, str] | None:
    """Hyperparameters and environment are string maps; numbers are converted, anything else is an error."""
    if values is None:
        return None
    if not isinstance(values, Mapping):
        raise ConfigurationTypeError(f"expected a mapping of strings, got {type(values).__name__}.", where=where, field=field)
    result: dict[str, str] = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise ConfigurationTypeError(f"keys must be strings, got {key!r}.", where=where, field=field, value=key)
        if isinstance(value, bool):
            raise ConfigurationTypeError(
                f"value of {key!r} is the boolean {value!r}; quote it the way your training script parses it "
                "('true' or 'True').",
                where=where,
                field=f"{field}.{key}",
                value=value,
            )
        if isinstance(value, (int, float)):
            value = str(value)
        if not isinstance(value, str):
            raise ConfigurationTypeError(
                f"value of {key!r} must be a string or number, got {type(value).__name__} {value!r}.",
                where=where,
                field=f"{field}.{key}",
                value=value,
            )
        result[key] = value
    return result


def check_instance(instance_type: Any, instance_count: Any, volume_size_in_gb: Any, *, where: str | None = None) -> None:
    allowed = enum_values("TrainingInstanceType")
    if not is_token(instance_type) and instance_type not in allowed:
        raise ConfigurationError(
            f"{instance_type!r} is not a SageMaker training instance type.{did_you_mean(str(instance_type), allowed)}",
            where=where,
            field="instance_type",
            value=instance_type,
        )
    for field, value, minimum in (("instance_count", instance_count, 1), ("volume_size_in_gb", volume_size_in_gb, 1)):
        if is_token(value):
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigurationTypeError(
                f"expected an integer, got {type(value).__name__} {value!r}.", where=where, field=field, value=value
            )
        if value < minimum:
            raise ConfigurationError(f"must be at least {minimum}, got {value}.", where=where, field=field, value=value)


def check_stopping(
    max_runtime_seconds: int, max_wait_seconds: int | None, use_spot: bool, *, where: str | None = None
) -> None:
    if max_runtime_seconds < 1:
        raise ConfigurationError("must be at least 1 second.", where=where, field="max_runtime", value=max_runtime_seconds)
    if max_wait_seconds is not None and not use_spot:
        raise ConfigurationError(
            "max_wait only applies to managed spot training; set use_spot_instances=True or remove max_wait.",
            where=where,
            field="max_wait",
            value=max_wait_seconds,
        )
    if use_spot and max_wait_seconds is not None and max_wait_seconds < max_runtime_seconds:
        raise ConfigurationError(
            f"max_wait ({max_wait_seconds} s) must be at least max_runtime ({max_runtime_seconds} s): it includes the time "
            "spent waiting for spot capacity.",
            where=where,
            field="max_wait",
            value=max_wait_seconds,
        )


def assemble_request(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Order the request's members like the SageMaker Python SDK and drop the empty ones."""
    unknown = set(fields) - set(REQUEST_KEY_ORDER)
    if unknown:
        raise ValueError(f"unexpected request members: {sorted(unknown)}")
    return {key: fields[key] for key in REQUEST_KEY_ORDER if fields.get(key) not in (None, [], {})}
