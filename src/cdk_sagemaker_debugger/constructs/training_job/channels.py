"""InputChannel: one S3 input channel of a training job, with the read grant and the cdk-nag finding it creates."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3

from ...model.errors import ConfigurationError

__all__ = ["InputChannel", "S3_URI"]

#: ``s3://bucket/key``: the bucket and the key prefix of a literal S3 URI.
S3_URI = re.compile(r"^s3://(?P<bucket>[^/]+)/?(?P<key>.*)$")


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
        match = S3_URI.match(s3_uri) if isinstance(s3_uri, str) and not cdk.Token.is_unresolved(s3_uri) else None
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
                      else f"arn:{partition}:s3:::{S3_URI.match(self.s3_uri)['bucket']}")  # type: ignore[index]
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
