"""TrainingCode: the user's training script and its directory, shipped the way the SageMaker Python SDK ships them.

``TrainingCode.from_asset("./src", entry_point="train.py")`` packs the directory as ``sourcedir.tar.gz`` (a CDK S3
asset, packed locally and reproducibly: sorted entries, zero timestamps and owners) and the job gets the SDK's
framework hyperparameters (``sagemaker_program``, ``sagemaker_submit_directory``, ``sagemaker_region``,
``sagemaker_container_log_level``, ``sagemaker_job_name``; :mod:`cdk_sagemaker_debugger.model.training_code`). The
training toolkit of the AWS Deep Learning Containers downloads and unpacks it, installs ``requirements.txt`` when the
directory has one, and runs the entry point (under the launcher of ``distribution=``).
"""

from __future__ import annotations

import fnmatch
import gzip
import io
import logging
import os
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from ..model.errors import ConfigurationError, ConfigurationTypeError
from ..model.parameters import is_token
from ..model.training_code import check_entry_point, check_log_level

__all__ = ["TrainingCode", "BoundTrainingCode", "SOURCE_ARCHIVE"]

#: The archive's file name, as the SDK names it.
SOURCE_ARCHIVE = "sourcedir.tar.gz"
_S3_PREFIX = "s3://"
#: Left out of every archive unless ``exclude`` is given (caches and version-control folders).
DEFAULT_EXCLUDE = ("__pycache__", "*.pyc", ".git", ".venv", ".mypy_cache", ".pytest_cache")


@dataclass(frozen=True)
class BoundTrainingCode:
    """Where a job's code is, once bound to the job: the S3 URI of ``sourcedir.tar.gz`` and what reading it takes."""

    #: ``s3://bucket/key`` of the archive (CDK tokens for assets and bucket objects).
    s3_uri: str
    #: The script the toolkit runs, relative to the archive's root.
    entry_point: str
    #: ``sagemaker_container_log_level``.
    container_log_level: int
    #: The archive's object ARN, or None when it cannot be granted (a URI that is a token as a whole).
    object_arn: str | None
    #: The key that encrypts the archive, when known.
    encryption_key: kms.IKey | None
    #: The S3 asset made from a local directory, or None.
    asset: s3_assets.Asset | None


class TrainingCode:
    """The training code of a job: a local directory (``from_asset``), an object of a bucket (``from_bucket``) or an
    ``s3://`` URI (``from_s3_uri``) holding ``sourcedir.tar.gz``.

    Pass it as ``ProfiledTrainingJob(code=...)``; the job's execution role may read exactly that object.
    """

    def __init__(self, *, entry_point: str, container_log_level: int, path: str | None = None,
                 exclude: Sequence[str] | None = None, bucket: s3.IBucket | None = None, key: str | None = None,
                 s3_uri: str | None = None) -> None:
        where = "TrainingCode"
        self.entry_point = check_entry_point(entry_point, where=where)
        self.container_log_level = check_log_level(container_log_level, where=where)
        self.path = path
        self.exclude = tuple(DEFAULT_EXCLUDE if exclude is None else exclude)
        self.bucket = bucket
        self.key = key
        self.s3_uri = s3_uri

    @classmethod
    def from_asset(cls, path: str, *, entry_point: str, exclude: Sequence[str] | None = None,
                   container_log_level: int = logging.INFO) -> TrainingCode:
        """Pack a local directory as ``sourcedir.tar.gz`` (a CDK S3 asset, uploaded on deploy).

        Args:
            path: the source directory; ``entry_point`` must be a file in it.
            entry_point: the script to run, relative to ``path`` (``train.py``, ``scripts/train.py``).
            exclude: glob patterns (of relative paths or names) left out of the archive. Default:
                ``__pycache__``, ``*.pyc``, ``.git``, ``.venv``, ``.mypy_cache``, ``.pytest_cache``.
            container_log_level: the toolkit's log level (``logging.INFO`` is 20). Default: ``logging.INFO``.
        """
        source = Path(path) if isinstance(path, (str, os.PathLike)) else None
        if source is None or not source.is_dir():
            raise ConfigurationError(f"must be a directory with the training code, got {path!r}.",
                                     where="TrainingCode.from_asset", field="path", value=path)
        script = check_entry_point(entry_point, where="TrainingCode.from_asset")
        if not (source / script).is_file():
            raise ConfigurationError(f"{script!r} is not a file in {str(source)!r}; entry_point is relative to the "
                                     "source directory.", where="TrainingCode.from_asset", field="entry_point",
                                     value=entry_point)
        return cls(entry_point=script, container_log_level=container_log_level, path=str(source.resolve()),
                   exclude=exclude)

    @classmethod
    def from_bucket(cls, bucket: s3.IBucket, key: str, *, entry_point: str,
                    container_log_level: int = logging.INFO) -> TrainingCode:
        """A ``sourcedir.tar.gz`` you upload yourself, ``key`` in ``bucket`` (its key, if any, may decrypt it).

        Args:
            bucket: the bucket holding the archive.
            key: the archive's object key, such as ``code/llm/sourcedir.tar.gz``.
            entry_point: the script to run, relative to the archive's root.
            container_log_level: Default: ``logging.INFO``.
        """
        if not isinstance(key, str) or not key or key.endswith("/"):
            raise ConfigurationError(f"must be the object key of a .tar.gz archive, got {key!r}.",
                                     where="TrainingCode.from_bucket", field="key", value=key)
        return cls(entry_point=entry_point, container_log_level=container_log_level, bucket=bucket, key=key)

    @classmethod
    def from_s3_uri(cls, s3_uri: str, *, entry_point: str, container_log_level: int = logging.INFO) -> TrainingCode:
        """A ``sourcedir.tar.gz`` at ``s3://bucket/key`` (literal or with tokens in it).

        Args:
            s3_uri: the archive's URI.
            entry_point: the script to run, relative to the archive's root.
            container_log_level: Default: ``logging.INFO``.
        """
        if not isinstance(s3_uri, str) or not (s3_uri.startswith(_S3_PREFIX) or is_token(s3_uri)):
            raise ConfigurationTypeError(f"expected an s3:// URI of a .tar.gz archive, got {s3_uri!r}.",
                                         where="TrainingCode.from_s3_uri", field="s3_uri", value=s3_uri)
        return cls(entry_point=entry_point, container_log_level=container_log_level, s3_uri=s3_uri)

    def _bind(self, scope: Construct, partition: str) -> BoundTrainingCode:
        """Create the asset (for ``from_asset``) in ``scope`` and say where the code is."""
        if self.path is not None:
            asset = s3_assets.Asset(scope, "TrainingCode", path=self.path, exclude=list(self.exclude),
                                    bundling=cdk.BundlingOptions(
                                        image=cdk.DockerImage.from_registry("local-packing-only"),
                                        local=_SourceArchive(self.path, self.exclude),
                                        output_type=cdk.BundlingOutput.SINGLE_FILE))
            return BoundTrainingCode(asset.s3_object_url, self.entry_point, self.container_log_level,
                                     asset.bucket.arn_for_objects(asset.s3_object_key), None, asset)
        if self.bucket is not None:
            return BoundTrainingCode(self.bucket.s3_url_for_object(self.key), self.entry_point,
                                     self.container_log_level, self.bucket.arn_for_objects(self.key or ""),
                                     self.bucket.encryption_key, None)
        uri = self.s3_uri or ""
        bucket, _, key = uri[len(_S3_PREFIX):].partition("/") if uri.startswith(_S3_PREFIX) else ("", "", "")
        arn = f"arn:{partition}:s3:::{bucket}/{key}" if bucket and key else None
        return BoundTrainingCode(uri, self.entry_point, self.container_log_level, arn, None, None)

    def grant_read(self, grantee: iam.IGrantable, bound: BoundTrainingCode) -> iam.Grant | None:
        """Let ``grantee`` read the archive (and decrypt it with its known key). None when it cannot be granted."""
        if bound.object_arn is None:
            return None
        grant = iam.Grant.add_to_principal(grantee=grantee, actions=["s3:GetObject"], resource_arns=[bound.object_arn])
        if bound.encryption_key is not None:
            bound.encryption_key.grant_decrypt(grantee)
        return grant


@jsii.implements(cdk.ILocalBundling)
class _SourceArchive:
    """Packs the directory into ``sourcedir.tar.gz`` on this machine (no Docker), reproducibly."""

    def __init__(self, path: str, exclude: Sequence[str]) -> None:
        self._path = Path(path)
        self._exclude = tuple(exclude)

    def try_bundle(self, output_dir: str, *args: Any, **kwargs: Any) -> bool:
        Path(output_dir, SOURCE_ARCHIVE).write_bytes(pack_source(self._path, self._exclude))
        return True


def _excluded(relative: str, patterns: Sequence[str]) -> bool:
    parts = relative.split("/")
    return any(fnmatch.fnmatch(relative, p) or any(fnmatch.fnmatch(part, p) for part in parts) for p in patterns)


def pack_source(path: Path, exclude: Sequence[str] = DEFAULT_EXCLUDE) -> bytes:
    """The directory as a gzip'ed tar with the files at its root, sorted, with zero timestamps and owners."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as zipped, tarfile.open(fileobj=zipped, mode="w") as tar:
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            relative = file.relative_to(path).as_posix()
            if _excluded(relative, exclude):
                continue
            info = tarfile.TarInfo(relative)
            data = file.read_bytes()
            info.size = len(data)
            info.mode = 0o755 if os.access(file, os.X_OK) else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
