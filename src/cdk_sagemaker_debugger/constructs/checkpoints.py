"""Checkpoints: where SageMaker copies a job's checkpoints (CheckpointConfig), granted on exactly that prefix.

``Checkpoints.from_bucket(bucket, "ckpt/llm")`` and ``Checkpoints.from_s3_uri(f"s3://{bucket.bucket_name}/ckpt")`` (the
usual CDK spelling, a token) both get read and write on ``ckpt/llm/*`` only, listing under that prefix only, and the
bucket's key when the bucket object is known. A location whose bucket cannot be read from the value (a URI that is one
token as a whole, such as a CfnParameter) cannot be granted: the job gets a synth warning saying how to grant it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from aws_cdk import aws_s3 as s3

from ..model.errors import ConfigurationError, ConfigurationTypeError
from ..model.parameters import is_token

__all__ = ["Checkpoints", "CheckpointGrant"]

_S3_URI = re.compile(r"^s3://(?P<bucket>[^/]+)/?(?P<key>.*)$")
#: What SageMaker does with the checkpoint prefix: uploads new files, downloads them on a spot restart, lists them.
CHECKPOINT_ACTIONS = ("s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload")


@dataclass(frozen=True)
class CheckpointGrant:
    """The statements (IAM JSON) that let SageMaker save and restore the checkpoints, and their cdk-nag findings."""

    statements: tuple[dict[str, Any], ...]
    findings: dict[str, str]


class Checkpoints:
    """A job's checkpoint location (``ProfiledTrainingJob(checkpoints=...)``).

    Build it with :meth:`from_bucket` or :meth:`from_s3_uri`.
    """

    def __init__(self, *, s3_uri: str, local_path: str | None = None, bucket: s3.IBucket | None = None,
                 prefix: str | None = None) -> None:
        if local_path is not None and (not isinstance(local_path, str) or not local_path.startswith("/")):
            raise ConfigurationError(f"must be an absolute path in the container, such as '/opt/ml/checkpoints', got "
                                     f"{local_path!r}.", where="Checkpoints", field="local_path", value=local_path)
        self.s3_uri = s3_uri
        self.local_path = local_path
        self.bucket = bucket
        self.prefix = prefix

    @classmethod
    def from_bucket(cls, bucket: s3.IBucket, prefix: str, *, local_path: str | None = None) -> Checkpoints:
        """Checkpoints under ``s3://<bucket>/<prefix>/``; the bucket's key (if any) may encrypt and decrypt them.

        Args:
            bucket: the bucket.
            prefix: the key prefix, such as ``ckpt/llm`` (no leading slash; one run's checkpoints overwrite the
                previous run's unless the script names its files per run).
            local_path: the checkpoint folder in the container. Default: None (SageMaker's ``/opt/ml/checkpoints``).
        """
        if not isinstance(prefix, str) or (not is_token(prefix) and (not prefix.strip("/") or prefix.startswith("/"))):
            raise ConfigurationError(f"must be a key prefix such as 'ckpt/llm' (not the bucket root, no leading "
                                     f"'/'), got {prefix!r}.", where="Checkpoints.from_bucket", field="prefix",
                                     value=prefix)
        prefix = prefix.strip("/")
        return cls(s3_uri=bucket.s3_url_for_object(prefix), local_path=local_path, bucket=bucket, prefix=prefix)

    @classmethod
    def from_s3_uri(cls, s3_uri: str, *, local_path: str | None = None) -> Checkpoints:
        """Checkpoints under ``s3://bucket/prefix``, literal or with tokens (``f"s3://{bucket.bucket_name}/ckpt"``).

        Args:
            s3_uri: the location.
            local_path: the checkpoint folder in the container. Default: None (``/opt/ml/checkpoints``).
        """
        if not isinstance(s3_uri, str) or not (s3_uri.startswith("s3://") or is_token(s3_uri)):
            raise ConfigurationTypeError(f"expected an s3:// URI such as 's3://bucket/ckpt', got {s3_uri!r}.",
                                         where="Checkpoints.from_s3_uri", field="s3_uri", value=s3_uri)
        return cls(s3_uri=s3_uri, local_path=local_path)

    def to_request(self) -> dict[str, str]:
        """CheckpointConfig."""
        config = {"S3Uri": self.s3_uri}
        if self.local_path is not None:
            config["LocalPath"] = self.local_path
        return config

    def grant_statements(self, partition: str) -> CheckpointGrant | None:
        """Read/write on exactly the prefix and listing under it; None when the bucket cannot be read from the URI."""
        if self.bucket is not None:
            bucket_arn, key = self.bucket.bucket_arn, self.prefix or ""
        else:
            match = _S3_URI.match(self.s3_uri)
            if match is None:
                return None
            bucket_arn, key = f"arn:{partition}:s3:::{match['bucket']}", match["key"].strip("/")
        objects = f"{bucket_arn}/{key + '/' if key else ''}*"
        listing: dict[str, Any] = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn}
        if key:
            listing["Condition"] = {"StringLike": {"s3:prefix": [f"{key}/*", key]}}
        statements = ({"Effect": "Allow", "Action": list(CHECKPOINT_ACTIONS), "Resource": objects}, listing)
        return CheckpointGrant(statements, {f"Resource::{objects}": (
            "Checkpoint files under the job's checkpoint prefix, saved and restored by SageMaker for every run "
            "(their names are chosen by the training script).")})
