"""Where a ProfiledTrainingJob's runs write: the output bucket (the given one or a locked-down one it creates) and the
S3 locations derived from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from .._cdk.lazy import path_of, remember_path
from ..output_locations import remember_bucket_identity
from ._shared import CONSTANTS

if TYPE_CHECKING:  # pragma: no cover
    from ._parts import JobParts

__all__ = ["OutputLocation", "create_output_bucket", "output_location"]


@dataclass(frozen=True)
class OutputLocation:
    """What ``output_location`` derives from the output bucket and prefix."""

    #: The key prefix, without leading or trailing ``/``.
    prefix: str
    #: ``s3://<bucket>/<prefix>`` (OutputDataConfig.S3OutputPath).
    s3_uri: str
    #: The bucket's ARN, built locally (no jsii round trip).
    bucket_arn: str


def create_output_bucket(job: JobParts, output_bucket: s3.IBucket | None, output_kms_key: kms.IKey | None
                         ) -> s3.IBucket:
    """The given bucket, or a locked-down one the runs write to."""
    if output_bucket is not None:
        return output_bucket
    bucket = s3.Bucket(
        job,  # type: ignore[arg-type]
        "OutputBucket",
        encryption=s3.BucketEncryption.KMS_MANAGED if output_kms_key is None else s3.BucketEncryption.KMS,
        encryption_key=output_kms_key,
        bucket_key_enabled=True,
        enforce_ssl=True,
        block_public_access=CONSTANTS["block_all"],
        versioned=True,
        minimum_tls_version=1.2,
    )
    remember_path(bucket, job, "OutputBucket")  # type: ignore[arg-type]
    remember_bucket_identity(bucket, f"bucket {path_of(bucket)}")  # no name given: the bucket is known by its path
    job._findings.register("OutputBucket", bucket.node.default_child)  # type: ignore[arg-type]
    job._findings.add("OutputBucket", {
        "AwsSolutions::AwsSolutions-S1": "Training outputs are written only by SageMaker through the execution "
        "role; pass output_bucket= with server access logging if your audit policy requires request logs."
    })
    return bucket


def output_location(job: JobParts, bucket: s3.IBucket, output_prefix: str) -> OutputLocation:
    """The S3 locations of the runs' output under ``bucket``."""
    prefix = output_prefix.strip("/")
    bucket_name = bucket.bucket_name
    return OutputLocation(prefix=prefix,
                          s3_uri=f"s3://{bucket_name}/{prefix}" if prefix else f"s3://{bucket_name}",
                          bucket_arn=f"arn:{job._partition}:s3:::{bucket_name}")
