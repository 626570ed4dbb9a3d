"""Where profiler output lives: a local folder or an S3 prefix, behind one small interface.

Keys are always ``/``-separated and relative to the store's root, so the readers and the cursor never care which one
they talk to.
"""

from __future__ import annotations

import builtins
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


class EvaluationInputError(Exception):
    """The input cannot be evaluated at all (missing folder, no profiler data, access denied)."""


@dataclass(frozen=True)
class StoredObject:
    key: str
    size: int
    #: S3's ETag (None on disk): with the size, tells a new version of a key from the one already read
    etag: str | None = None


class Store(Protocol):
    def list(self, prefix: str, start_after: str | None = None) -> Iterator[StoredObject]: ...

    def read(self, key: str) -> bytes: ...

    def exists(self, key: str) -> bool: ...

    def describe(self) -> str: ...


class LocalStore:
    """A folder on disk laid out like the profiler's S3 prefix."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        #: folders and files that could not be listed (permissions, vanished), reported with the verdicts
        self.problems: builtins.list[str] = []  # builtins: in this class, ``list`` is the method below

    def describe(self) -> str:
        return str(self.root)

    def list(self, prefix: str, start_after: str | None = None) -> Iterator[StoredObject]:
        base = self.root / prefix
        if not base.exists():
            return iter(())
        found = []

        def unreadable(exc: OSError) -> None:
            self.problems.append(f"{exc.filename}: folder could not be read ({exc.strerror or exc}); "
                                 "the profiler files in it were not evaluated")

        for folder, _dirs, names in os.walk(base, onerror=unreadable):
            for name in names:
                path = Path(folder, name)
                key = path.relative_to(self.root).as_posix()
                if start_after is not None and key <= start_after:
                    continue
                try:
                    info = path.stat()
                except OSError as exc:
                    self.problems.append(f"{key}: could not be read ({exc.strerror or exc})")
                    continue
                if stat.S_ISREG(info.st_mode):  # never a FIFO or a device, whose read could block forever
                    found.append(StoredObject(key, info.st_size))
        found.sort(key=lambda o: o.key)
        return iter(found)

    def read(self, key: str) -> bytes:
        return (self.root / key).read_bytes()

    def exists(self, key: str) -> bool:
        return (self.root / key).exists()


class S3Store:
    """An S3 prefix; ``client`` is a boto3 S3 client (created lazily so the CLI works without AWS for local paths)."""

    def __init__(self, bucket: str, prefix: str, client: Any = None):
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("s3")
        return self._client

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def list(self, prefix: str, start_after: str | None = None) -> Iterator[StoredObject]:
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self.prefix + prefix}
        if start_after:
            kwargs["StartAfter"] = self.prefix + start_after
        while True:
            page = self.client.list_objects_v2(**kwargs)
            for item in page.get("Contents", []):
                yield StoredObject(item["Key"][len(self.prefix) :], int(item.get("Size", 0)), item.get("ETag"))
            if not page.get("IsTruncated"):
                return
            kwargs["ContinuationToken"] = page["NextContinuationToken"]
            kwargs.pop("StartAfter", None)

    def read(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=self.prefix + key)["Body"].read()

    def exists(self, key: str) -> bool:
        page = self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix + key, MaxKeys=1)
        return any(item["Key"] == self.prefix + key for item in page.get("Contents", []))


def split_s3_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise EvaluationInputError(f"{uri!r} is not an S3 URI; expected s3://bucket/prefix")
    bucket, _, key = uri[5:].partition("/")
    if not bucket:
        raise EvaluationInputError(f"{uri!r} has no bucket name; expected s3://bucket/prefix")
    return bucket, key


def job_profiler_store(base_uri: str, job: str, client: Any = None) -> S3Store:
    """``<base_uri>/<job>/profiler-output``: where Debugger's ProfilerConfig and the sampler both put a job's data."""
    bucket, prefix = split_s3_uri(base_uri)
    return S3Store(bucket, f"{prefix.strip('/')}/{job}/profiler-output".lstrip("/"), client)


def open_profiler_output(location: str, *, s3_client: Any = None) -> Store:
    """Open a ``profiler-output/`` tree (the folder holding ``system/`` and ``framework/``) on disk or in S3.

    The job folder above it is accepted too, so both ``.../<job>/profiler-output`` and ``.../<job>`` work.
    """
    if location.startswith("s3://"):
        bucket, prefix = split_s3_uri(location)
        store = S3Store(bucket, prefix, s3_client)
        for candidate in (store, S3Store(bucket, store.prefix + "profiler-output", s3_client)):
            if next(candidate.list("system/"), None) is not None or next(candidate.list("framework/"), None) is not None:
                return candidate
        return store
    root = Path(location).expanduser()
    if not root.exists():
        raise EvaluationInputError(f"{location}: no such folder. Pass the profiler-output/ folder of a training job.")
    if not root.is_dir():
        raise EvaluationInputError(f"{location}: not a folder. Pass the profiler-output/ folder of a training job.")
    if not (root / "system").exists() and not (root / "framework").exists() and (root / "profiler-output").is_dir():
        root = root / "profiler-output"
    return LocalStore(root)
