"""The CreateTrainingJob request, one renderer per member (like aws-cdk's ``renderAlgorithmSpecification``,
``renderResourceConfig``, ``renderStoppingCondition``): the only place that spells the request's member names.

A construct hands its props to these renderers and ``render_training_request`` puts the members together with
the extra members of ``.members`` (``RequestMembers``) and the members of its rule engine, in the order the
SageMaker Python SDK sends them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .members import RequestMembers
from .training import assemble_request

__all__ = [
    "algorithm_specification",
    "checkpoint_config",
    "output_data_config",
    "render_training_request",
    "resource_config",
    "stopping_condition",
    "tag_list",
    "vpc_config",
]

DEFAULT_MAX_RUNTIME_SECONDS = 86400


def algorithm_specification(*, training_image: str | None, algorithm_name: str | None,
                            input_mode: str) -> dict[str, Any]:
    """``AlgorithmSpecification``: the image or the algorithm, then the input mode."""
    if training_image is not None:
        return {"TrainingImage": training_image, "TrainingInputMode": input_mode}
    return {"AlgorithmName": algorithm_name, "TrainingInputMode": input_mode}


def resource_config(*, instance_type: str, instance_count: int, volume_size_in_gb: int,
                    volume_kms_key_id: str | None) -> dict[str, Any]:
    """``ResourceConfig``: one instance type and count (instance groups replace them in ``RequestMembers``)."""
    resource: dict[str, Any] = {
        "InstanceType": instance_type,
        "InstanceCount": instance_count,
        "VolumeSizeInGB": volume_size_in_gb,
    }
    if volume_kms_key_id is not None:
        resource["VolumeKmsKeyId"] = volume_kms_key_id
    return resource


def output_data_config(*, s3_output_path: str, kms_key_id: str | None) -> dict[str, Any]:
    """``OutputDataConfig``: where the artifacts land, and their key."""
    output: dict[str, Any] = {"S3OutputPath": s3_output_path}
    if kms_key_id is not None:
        output["KmsKeyId"] = kms_key_id
    return output


def stopping_condition(*, max_runtime_seconds: int | None, max_wait_seconds: int | None) -> dict[str, Any]:
    """``StoppingCondition``: the run time limit (one day unless given) and the spot wait limit."""
    stopping: dict[str, Any] = {
        "MaxRuntimeInSeconds": DEFAULT_MAX_RUNTIME_SECONDS if max_runtime_seconds is None else max_runtime_seconds
    }
    if max_wait_seconds is not None:
        stopping["MaxWaitTimeInSeconds"] = max_wait_seconds
    return stopping


def checkpoint_config(*, s3_uri: str | None, local_path: str | None) -> dict[str, Any] | None:
    """``CheckpointConfig``, or None without a checkpoint location."""
    if s3_uri is None:
        return None
    checkpoint = {"S3Uri": s3_uri}
    if local_path is not None:
        checkpoint["LocalPath"] = local_path
    return checkpoint


def vpc_config(*, security_group_ids: Sequence[str], subnets: Sequence[str], in_vpc: bool) -> dict[str, Any] | None:
    """``VpcConfig``, or None outside a VPC."""
    if not in_vpc:
        return None
    return {"SecurityGroupIds": list(security_group_ids), "Subnets": list(subnets)}


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    """``Tags`` as the API's list of ``Key``/``Value`` pairs."""
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def input_data_config(channels: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``InputDataConfig``: the channels in request order."""
    return [dict(channel) for channel in channels]


def render_training_request(
    *,
    job_name: str,
    algorithm: Mapping[str, Any],
    role_arn: str,
    channels: Sequence[Mapping[str, Any]],
    output: Mapping[str, Any],
    resource: Mapping[str, Any],
    vpc: Mapping[str, Any] | None,
    stopping: Mapping[str, Any],
    hyperparameters: Mapping[str, str] | None,
    environment: Mapping[str, str] | None,
    tags: Mapping[str, str],
    network_isolation: bool,
    inter_container_encryption: bool,
    managed_spot: bool,
    checkpoint: Mapping[str, Any] | None,
    engine_members: Mapping[str, Any],
    members: RequestMembers,
) -> dict[str, Any]:
    """The whole request: the members above, the rule engine's members (Debugger's, or none), the extra members and
    ``request_overrides``, ordered like the SDK and without empty members."""
    return assemble_request(members.apply({
        "TrainingJobName": job_name,
        "AlgorithmSpecification": dict(algorithm),
        "RoleArn": role_arn,
        "InputDataConfig": input_data_config(channels),
        "OutputDataConfig": dict(output),
        "ResourceConfig": dict(resource),
        "VpcConfig": vpc,
        "StoppingCondition": dict(stopping),
        "HyperParameters": hyperparameters,
        "Environment": environment,
        "Tags": tag_list(tags),
        "EnableNetworkIsolation": network_isolation or None,
        "EnableInterContainerTrafficEncryption": inter_container_encryption or None,
        "EnableManagedSpotTraining": managed_spot or None,
        "CheckpointConfig": checkpoint,
        **engine_members,
    }))
