"""A per-job lease in S3, so that overlapping runs of the same job do not redo each other's work.

A run holds the lease from before it reads the job's state until after it has committed and delivered. A second run
that finds the lease held does not read a single profiler file: a scheduled run leaves the job to the holder (the
next minute's run picks up whatever is left), and the job-end run waits for the holder to finish, then gives the job
its final evaluation (or, out of time, asks for a continuation). A run that dies (timeout, memory cap) holds the lease
until it expires: the end of that run's invocation plus the commit margin, never longer.

The lease is a small JSON object beside the state (``<state key>.lease``), taken with the same S3 conditional
requests as the state: ``If-None-Match: *`` when there is none, ``If-Match: <ETag>`` to take over an expired or
released one. The lease only saves work; correctness still rests on the state's own conditional write.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .state import CONFLICT_CODES, STATE_TAGGING, error_code, get_if_present

LEASE_SUFFIX = ".lease"


@dataclass
class Lease:
    s3: Any
    bucket: str
    key: str
    clock: Callable[[], float] = time.time
    holder: str = field(default_factory=lambda: uuid.uuid4().hex)
    etag: str | None = None  # of the lease object this run wrote (None: not held)

    def _read(self) -> tuple[dict[str, Any] | None, str | None]:
        found = get_if_present(self.s3, self.bucket, self.key)
        if found is None:
            return None, None
        raw, etag = found
        try:
            body = json.loads(raw)
            return (body if isinstance(body, dict) else {}), etag
        except ValueError:  # a damaged lease is an expired one: it only ever saves work
            return {}, etag

    def holder_until(self) -> float | None:
        """When the current holder's lease expires (None: nobody holds it)."""
        body, _ = self._read()
        expires = (body or {}).get("expires")
        if not isinstance(expires, (int, float)) or expires <= self.clock():
            return None
        return float(expires)

    def acquire(self, until: float) -> bool:
        """Take the lease until ``until`` (epoch seconds); False when another run holds it."""
        body, etag = self._read()
        expires = (body or {}).get("expires") if body is not None else None
        if body is not None and isinstance(expires, (int, float)) and expires > self.clock():
            return False
        condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        return self._write({"holder": self.holder, "expires": until}, condition)

    def wait(self, until: float, give_up_at: float, sleep: Callable[[float], None] = time.sleep,
             poll_s: float = 1.0) -> bool:
        """Acquire, polling while another run holds the lease, until ``give_up_at`` (epoch seconds)."""
        while True:
            if self.acquire(until):
                return True
            if self.clock() + poll_s > give_up_at:
                return False
            sleep(poll_s)

    def release(self) -> None:
        """Hand the lease back (an expired lease in its place); a failure only leaves it to expire."""
        if self.etag is None:
            return
        try:
            self.s3.put_object(Bucket=self.bucket, Key=self.key, Body=json.dumps({"holder": None, "expires": 0}),
                               ContentType="application/json", Tagging=STATE_TAGGING, IfMatch=self.etag)
        except Exception:
            pass
        self.etag = None

    def _write(self, body: dict[str, Any], condition: dict[str, str]) -> bool:
        try:
            response = self.s3.put_object(Bucket=self.bucket, Key=self.key, Body=json.dumps(body),
                                          ContentType="application/json", Tagging=STATE_TAGGING, **condition)
        except Exception as exc:
            if error_code(exc) in CONFLICT_CODES:
                return False
            raise
        self.etag = str(response["ETag"])
        return True
