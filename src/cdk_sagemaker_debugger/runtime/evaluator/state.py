"""Evaluation state in S3, written with conditional requests so two overlapping runs can never both commit.

Why S3 rather than DynamoDB: the state (rule histories, open windows, cursors) of a multi-GPU job is hundreds of
kilobytes to megabytes, well past DynamoDB's 400 KB item limit; S3 has supported compare-and-swap on PutObject
(``If-None-Match: *`` to create, ``If-Match: <etag>`` to replace) since 2024; and the state lives in the job's own
output bucket next to its reports, so no extra table or permission is needed.
"""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timezone
from typing import Any

from .caps import MAX_STATE_BYTES, StateTooLarge

#: Each evaluator keeps its own state per job: ``rule-output/evaluator-state/<evaluator id>.json.gz`` (two evaluators
#: over the same jobs, with other rules or another bus, never read each other's state).
STATE_FOLDER = "evaluator-state"
STATE_SUFFIX = ".json.gz"
#: Written on the state and lease objects: the RuleEvaluator's lifecycle rule expires their superseded versions.
STATE_TAGGING = "cdk-sagemaker-debugger=evaluator-state"
MISSING_CODES = ("NoSuchKey", "404", "NotFound")
CONFLICT_CODES = ("PreconditionFailed", "ConditionalRequestConflict", "412", "409")


def state_key(base: str, evaluator_id: str) -> str:
    """The state object of one evaluator for the job whose ``rule-output`` folder is ``base``."""
    return f"{base}/{STATE_FOLDER}/{evaluator_id}{STATE_SUFFIX}"


class ConcurrentUpdateError(Exception):
    """Another run committed first; this run's work is discarded and redone from that run's state."""


def error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def is_missing(s3: Any, bucket: str, key: str, exc: Exception) -> bool:
    """Whether a failed GetObject means the object does not exist. Without s3:ListBucket covering the request S3
    answers 403 rather than 404, so a 403 is confirmed with a listing of exactly that key (see S3StateStore.load)."""
    code = error_code(exc)
    if code in MISSING_CODES:
        return True
    if code not in ("AccessDenied", "403", "Forbidden"):
        return False
    try:
        page = s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
    except Exception as listing:
        raise PermissionError(
            f"s3://{bucket}/{key}: GetObject was denied and so was ListObjectsV2 on that key ({listing}); the "
            "evaluator needs s3:GetObject and s3:PutObject on the key, and s3:ListBucket with that s3:prefix"
        ) from listing
    return not any(item.get("Key") == key for item in page.get("Contents", []))


def get_if_present(s3: Any, bucket: str, key: str) -> tuple[bytes, str | None] | None:
    """The object's body and ETag, or None when it does not exist (a 403 confirmed absent by :func:`is_missing`).
    Any other failure is raised."""
    try:
        obj = s3.get_object(Bucket=bucket, Key=key)
    except Exception as exc:
        if is_missing(s3, bucket, key, exc):
            return None
        raise
    return obj["Body"].read(), obj.get("ETag")


class DamagedStateError(Exception):
    """The state object exists but cannot be used (not gzip, not JSON, not the evaluator's shape)."""

    def __init__(self, location: str, reason: str, etag: str | None):
        super().__init__(f"{location}: damaged evaluator state ({reason})")
        self.location = location
        self.reason = reason
        self.etag = etag


class S3StateStore:
    #: The largest state (JSON bytes) save() writes: larger raises StateTooLarge (caps.py)
    max_bytes = MAX_STATE_BYTES

    def __init__(self, s3: Any, bucket: str, key: str):
        self.s3 = s3
        self.bucket = bucket
        self.key = key

    @property
    def location(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def load(self) -> tuple[dict[str, Any] | None, str | None]:
        """The state and its ETag, or (None, None) when no run has committed yet.

        Without s3:ListBucket on a key S3 answers a GetObject of a missing object with 403 AccessDenied rather than
        404 NoSuchKey, and the evaluator's ListBucket grant is conditioned on ``s3:prefix``, which a GetObject does not
        carry. So a 403 is confirmed with a listing of that exact key (which the grant allows): absent means no run
        has committed yet; present means the read was really denied, and that is raised.
        Raises ``DamagedStateError`` when the object exists but is not a usable state.
        """
        found = get_if_present(self.s3, self.bucket, self.key)
        if found is None:
            return None, None
        body, etag = found
        try:
            state = json.loads(gzip.decompress(body))
        except (OSError, EOFError, ValueError) as exc:  # gzip.BadGzipFile is an OSError; JSON errors ValueErrors
            raise DamagedStateError(self.location, f"{type(exc).__name__}: {exc}", etag) from exc
        if not isinstance(state, dict):
            raise DamagedStateError(self.location, f"a JSON {type(state).__name__}, not an object", etag)
        return state, etag

    def quarantine(self, damaged: DamagedStateError) -> str | None:
        """Copy a damaged state object aside (``<key>.damaged-<its ETag>``: copying it again is harmless) and return
        where; None if the copy failed."""
        tag = "".join(c for c in (damaged.etag or "") if c.isalnum()) or datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        target = f"{self.key}.damaged-{tag}"
        try:
            self.s3.copy_object(Bucket=self.bucket, Key=target, CopySource={"Bucket": self.bucket, "Key": self.key})
        except Exception:
            return None
        return f"s3://{self.bucket}/{target}"

    def save(self, state: dict[str, Any], etag: str | None) -> str:
        """Commit ``state`` if nobody changed it since ``etag`` was read (``None``: only if it does not exist yet)."""
        text = json.dumps(state, separators=(",", ":")).encode()
        if len(text) > self.max_bytes:
            raise StateTooLarge(len(text), self.max_bytes)
        body = gzip.compress(text, compresslevel=5)
        condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        try:
            response = self.s3.put_object(Bucket=self.bucket, Key=self.key, Body=body, Tagging=STATE_TAGGING,
                                          ContentType="application/json", ContentEncoding="gzip", **condition)
        except Exception as exc:
            if error_code(exc) in CONFLICT_CODES:
                raise ConcurrentUpdateError(f"s3://{self.bucket}/{self.key} changed during this run") from exc
            raise
        return str(response["ETag"])
