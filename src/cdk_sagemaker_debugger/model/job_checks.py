"""Checks of a CreateTrainingJob request that the API documents but botocore's validator does not run.

Each one fails synth with the member, the value and the fix, instead of failing when the job starts, after the cluster
was requested. docs/request.md lists every check with its source. Unresolved CDK tokens are skipped (they are known at
deploy time only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .errors import ConfigurationError
from .parameters import is_token

__all__ = [
    "INSTANCE_STORAGE_FAMILIES",
    "MAX_RUNTIME_SECONDS",
    "has_instance_storage",
    "JobShape",
    "check_job",
]

#: Training instance families whose instances have local NVMe instance storage, on which SageMaker refuses
#: ResourceConfig.VolumeKmsKeyId. Source: the EC2 User Guide, "Instance store volumes" (instance types with instance
#: store volumes), intersected with botocore's TrainingInstanceType enum; the API reference of VolumeKmsKeyId: "You
#: can't request a VolumeKmsKeyId when using an instance type with local storage".
INSTANCE_STORAGE_FAMILIES = frozenset({
    "g4dn", "g5", "g6", "g6e", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6e-gb200", "r5d", "trn1",
    "trn1n", "trn2",
})
#: StoppingCondition.MaxRuntimeInSeconds: "The maximum value is 28 days" (API reference).
MAX_RUNTIME_SECONDS = 28 * 24 * 3600


def has_instance_storage(instance_type: str) -> bool:
    parts = instance_type.split(".")
    return len(parts) == 3 and parts[1] in INSTANCE_STORAGE_FAMILIES


@dataclass(frozen=True)
class JobShape:
    """What the checks read from a job: the instance types of every group, the stopping condition, spot, warm pool."""

    instance_types: Sequence[str]
    volume_kms_key: bool
    use_spot: bool
    max_runtime_seconds: int | None
    max_wait_seconds: int | None
    keep_alive_seconds: float | None


def _check_volume_key(shape: JobShape, where: str | None) -> None:
    if not shape.volume_kms_key:
        return
    local = [t for t in shape.instance_types if not is_token(t) and has_instance_storage(t)]
    if local:
        raise ConfigurationError(
            f"ResourceConfig.VolumeKmsKeyId cannot be used with {', '.join(sorted(set(local)))}: these instances "
            "have local NVMe storage, which the instance encrypts with its own hardware module, and SageMaker refuses "
            "the key. Remove volume_kms_key= (output_kms_key= still encrypts the output).",
            where=where, field="volume_kms_key", value=local)


def _check_stopping(shape: JobShape, where: str | None) -> None:
    runtime = shape.max_runtime_seconds
    if runtime is not None and not is_token(runtime) and runtime > MAX_RUNTIME_SECONDS:
        raise ConfigurationError(
            f"StoppingCondition.MaxRuntimeInSeconds is {runtime} s ({runtime / 86400:g} days), over the 28 days "
            f"({MAX_RUNTIME_SECONDS} s) SageMaker allows. Use max_runtime=cdk.Duration.days(28) or less, and "
            "checkpoints to continue in a new job.", where=where, field="max_runtime", value=runtime)
    if shape.use_spot and shape.max_wait_seconds is None:
        raise ConfigurationError(
            "managed spot training needs StoppingCondition.MaxWaitTimeInSeconds (the time to wait for spot capacity "
            "plus the run time). Set max_wait= to at least max_runtime, e.g. max_wait=cdk.Duration.hours(30) with "
            "max_runtime=cdk.Duration.hours(20).", where=where, field="max_wait")


def _check_warm_pool(shape: JobShape, where: str | None) -> None:
    if shape.use_spot and shape.keep_alive_seconds:
        raise ConfigurationError(
            "ResourceConfig.KeepAlivePeriodInSeconds (a warm pool) cannot be used with managed spot training: "
            "SageMaker keeps only on-demand instances warm. Remove keep_alive= or use_spot_instances=True.",
            where=where, field="keep_alive", value=shape.keep_alive_seconds)


def check_job(shape: JobShape, *, where: str | None = None) -> None:
    """Raise ConfigurationError for the first documented combination SageMaker refuses."""
    _check_volume_key(shape, where)
    _check_stopping(shape, where)
    _check_warm_pool(shape, where)

