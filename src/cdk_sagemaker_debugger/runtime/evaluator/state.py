"""Evaluation state in S3, written with conditional requests so two overlapping runs can never both commit.

Why S3 rather than DynamoDB: the state (rule histories, open windows, cursors) of a multi-GPU job is hundreds of
kilobytes to megabytes, well past DynamoDB's 400 KB item limit; S3 has supported compare-and-swap on PutObject
(``If-None-Match: *`` to create, ``If-Match: <etag>`` to replace) since 2024; and the state lives in the job's own
output bucket next to its reports, so no extra table or permission is needed.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

STATE_FILE = "evaluator-state.json.gz"


class ConcurrentUpdateError(Exception):
    """Another run committed first; this run's work is discarded and redone from that run's state."""


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


class S3StateStore:
    def __init__(self, s3: Any, bucket: str, key: str):
        self.s3 = s3
        self.bucket = bucket
        self.key = key

    def load(self) -> tuple[dict[str, Any] | None, str | None]:
        """The state and its ETag, or (None, None) when no run has committed yet."""
        try:
            obj = self.s3.get_object(Bucket=self.bucket, Key=self.key)
        except Exception as exc:
            if _error_code(exc) in ("NoSuchKey", "404"):
                return None, None
            raise
        return json.loads(gzip.decompress(obj["Body"].read())), obj["ETag"]

    def save(self, state: dict[str, Any], etag: str | None) -> str:
        """Commit ``state`` if nobody changed it since ``etag`` was read (``None``: only if it does not exist yet)."""
        body = gzip.compress(json.dumps(state, separators=(",", ":")).encode(), compresslevel=5)
        condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        try:
            response = self.s3.put_object(Bucket=self.bucket, Key=self.key, Body=body,
                                          ContentType="application/json", ContentEncoding="gzip", **condition)
        except Exception as exc:
            if _error_code(exc) in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
                raise ConcurrentUpdateError(f"s3://{self.bucket}/{self.key} changed during this run") from exc
            raise
        return str(response["ETag"])
