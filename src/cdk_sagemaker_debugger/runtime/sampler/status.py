"""Counters of what the sampler did and what failed, saved as a small JSON file next to the data.

A failure is counted every time and logged once per kind, so a broken disk or a denied bucket costs one log line and
a counter, never a flood of messages or an exception in training.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Callable

MAX_LOG_LINES = 200
MAX_MESSAGES = 10


def write_atomic(path: str, data: bytes) -> None:
    """Write a whole file or nothing: a temp file in the same folder, then rename over the target."""
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    temp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        with open(temp, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


class FileLog:
    """Log lines to a file (the daemon's stdout and stderr are closed), capped so a loop of errors cannot fill a disk."""

    def __init__(self, path: str | None, stream: object = None):
        self.path = path
        self.stream = stream
        self.lines = 0

    def __call__(self, message: str) -> None:
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} cdk-sagemaker-debugger sampler: {message}\n"
        if self.stream is not None:
            self.stream.write(line)
        if self.path is None or self.lines >= MAX_LOG_LINES:
            return
        self.lines += 1
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line if self.lines < MAX_LOG_LINES else line + "(log full; see the status file)\n")
        except OSError:
            pass


class Status:
    """What the status file reports: counts, failures by kind, the last few failure messages."""

    def __init__(self, node: str, log: Callable[[str], None]):
        self.log = log
        self.lock = threading.Lock()
        self.info: dict = {"node": node, "pid": os.getpid(), "started": time.time()}
        self.counts: dict = {}
        self.failures: dict = {}
        self.messages: list = []
        self.warned: set = set()

    def count(self, key: str, amount: int = 1) -> None:
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + amount

    def set(self, key: str, value: object) -> None:
        with self.lock:
            self.info[key] = value

    def fail(self, kind: str, message: str) -> None:
        """Count a failure of ``kind``; log it the first time that kind happens."""
        with self.lock:
            self.failures[kind] = self.failures.get(kind, 0) + 1
            self.messages = (self.messages + [f"{kind}: {message}"])[-MAX_MESSAGES:]
            first = kind not in self.warned
            self.warned.add(kind)
        if first:
            self.log(f"{kind}: {message} (counted in the status file; logged once)")

    def warn_once(self, key: str, message: str) -> None:
        with self.lock:
            first = key not in self.warned
            self.warned.add(key)
            if first:
                self.messages = (self.messages + [f"{key}: {message}"])[-MAX_MESSAGES:]
        if first:
            self.log(message)

    def to_dict(self) -> dict:
        with self.lock:
            return dict(self.info, updated=time.time(), counts=dict(self.counts), failures=dict(self.failures),
                        messages=list(self.messages))

    def save(self, path: str) -> bool:
        """Write the status file; a failure to write it is itself counted (and never raised)."""
        try:
            write_atomic(path, json.dumps(self.to_dict(), indent=1, sort_keys=True).encode())
            return True
        except OSError as exc:
            self.fail("status_write", f"could not write {path}: {exc}")
            return False


class Guard:
    """Runs one reader; after a failure skips it for a while (1 s doubling to a minute) so a broken source is cheap."""

    MAX_DELAY_S = 60.0

    def __init__(self, kind: str, status: Status, monotonic: Callable[[], float] = time.monotonic):
        self.kind = kind
        self.status = status
        self.monotonic = monotonic
        self.retry_at = 0.0
        self.delay = 1.0

    def run(self, reader: Callable[[], str]) -> str:
        now = self.monotonic()
        if now < self.retry_at:
            return ""
        try:
            result = reader()
        except Exception as exc:  # any reader failure: count, back off, keep sampling the rest
            self.status.fail(self.kind, f"{type(exc).__name__}: {exc}; retrying in {self.delay:.0f} s")
            self.retry_at = now + self.delay
            self.delay = min(self.delay * 2, self.MAX_DELAY_S)
            return ""
        self.delay = 1.0
        return result
