"""Copies finished files to ``<S3 URI>/<job name>/profiler-output/<same path>``, where Debugger's files went.

Data files (system metrics, framework events) go gzip-compressed as ``<same path>.gz`` unless the upload format is
"plain" (settings.UPLOAD_FORMAT): a 192-core node at 100 ms writes about 30 MB a minute of JSON, which gzip makes
about a tenth of that. The local files stay plain; the compressed copy is written in ``.partial/`` and removed once
sent.

Runs on its own thread so a slow or failing S3 never delays a sample. A failure is counted, logged once, and the next
attempt waits (one minute doubling to ten); nothing is lost, the files are sent when S3 answers again.
"""

from __future__ import annotations

import gzip
import os
import shutil
import threading
import time

from . import layout
from .s3 import StdlibS3, UploadError, make_client
from .settings import Settings, split_s3_uri
from .status import Status

FIRST_DELAY_S = 60.0
MAX_DELAY_S = 600.0
PRUNE_AFTER_S = 120.0
#: zlib level of the compressed uploads: see docs/sampler.md ("Upload format") for the measurement behind it.
GZIP_LEVEL = 1
_COMPRESSED_PREFIXES = ("system/", "framework/pevents/")


def compressed(relative: str, settings: Settings) -> bool:
    """Whether a file goes as ``<relative>.gz``: a data file (never an end marker or the sampler's own files)."""
    return (settings.upload_format == "gzip" and relative.startswith(_COMPRESSED_PREFIXES)
            and relative.endswith(".json"))


def destination(settings: Settings) -> tuple:
    """(bucket, key prefix) of the job's profiler output."""
    bucket, prefix = split_s3_uri(settings.s3_uri or "")
    base = "/".join(part for part in (prefix, settings.job_name, "profiler-output") if part)
    return bucket, base


def local_files(root: str) -> list:
    """Relative paths of every file the sampler uploads, data first and its own files (status, log) last."""
    found = []
    for top in ("system", "framework", layout.SAMPLER_DIR):
        for folder, _dirs, names in os.walk(os.path.join(root, top)):
            for name in names:
                relative = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
                if layout.is_uploaded(relative):
                    found.append(relative)
    return sorted(found, key=lambda r: (r.startswith(layout.SAMPLER_DIR + "/"), r))


class Uploader:
    def __init__(self, root: str, settings: Settings, status: Status, client_factory=make_client):
        self.root = root
        self.settings = settings
        self.status = status
        self.bucket, self.base = destination(settings)
        self.client_factory = client_factory
        self.client = None
        self.sent: dict = {}
        self.lock = threading.Lock()
        self.retry_at = 0.0
        self.delay = FIRST_DELAY_S

    def _client(self):
        if self.client is None:
            try:
                self.client = self.client_factory(self.settings.uploader, None, self.settings.endpoint_url)
            except Exception as exc:  # a broken boto3 in the image: fall back to the standard library
                self.status.fail("upload_client", f"{type(exc).__name__}: {exc}; using the standard-library client")
                self.client = StdlibS3(None, self.settings.endpoint_url)
            self.status.set("uploader", self.client.name)
        return self.client

    def pending(self) -> list:
        out = []
        for relative in local_files(self.root):
            try:
                stat = os.stat(os.path.join(self.root, relative))
            except OSError:
                continue
            if self.sent.get(relative, (None, None))[1] != (stat.st_size, stat.st_mtime_ns):
                out.append((relative, (stat.st_size, stat.st_mtime_ns)))
        return out

    def cycle(self, deadline: float | None = None, force: bool = False) -> int:
        """Send what changed since the last cycle; returns how many files went. Never raises."""
        if not force and time.monotonic() < self.retry_at:
            return 0
        if not self.lock.acquire(timeout=30 if deadline is None else max(deadline - time.monotonic(), 0)):
            return 0
        try:
            return self._send(self.pending(), deadline)
        finally:
            self.lock.release()

    def _send(self, pending: list, deadline: float | None) -> int:
        sent = 0
        for relative, signature in pending:
            if deadline is not None and time.monotonic() > deadline:
                self.status.fail("upload_deadline", f"stopped before sending {len(pending) - sent} file(s)")
                break
            try:
                sent_bytes = self._put(relative)
            except (UploadError, OSError) as exc:
                kind = getattr(exc, "kind", "read")
                self.status.fail(f"upload_{kind}", f"s3://{self.bucket}/{self.base}/{relative}: {exc}")
                self.retry_at = time.monotonic() + self.delay
                self.delay = min(self.delay * 2, MAX_DELAY_S)
                break
            self.sent[relative] = (time.monotonic(), signature)
            self.status.count("uploads")
            self.status.count("upload_bytes", sent_bytes)
            sent += 1
        else:
            self.delay = FIRST_DELAY_S
        return sent

    def _put(self, relative: str) -> int:
        """Send one file (compressed when it is a data file and the format is gzip); returns the bytes sent."""
        path = os.path.join(self.root, relative)
        if not compressed(relative, self.settings):
            self._client().put(self.bucket, f"{self.base}/{relative}", path)
            return os.path.getsize(path)
        folder = os.path.join(self.root, layout.PARTIAL_DIR)
        os.makedirs(folder, exist_ok=True)
        packed = os.path.join(folder, f"upload-{threading.get_ident()}.json.gz")
        try:
            with open(path, "rb") as source, open(packed, "wb") as raw, \
                    gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL, mtime=0) as target:
                shutil.copyfileobj(source, target, 1 << 20)  # streamed: a 30 MB minute is never in memory
            self._client().put(self.bucket, f"{self.base}/{relative}.gz", packed)
            return os.path.getsize(packed)
        finally:
            try:
                os.unlink(packed)
            except OSError:
                pass

    def prune(self) -> None:
        """Delete data files sent more than two minutes ago (bounded disk on long jobs); keep the sampler's files."""
        now = time.monotonic()
        for relative, (when, _signature) in list(self.sent.items()):
            if now - when < PRUNE_AFTER_S or relative.startswith(layout.SAMPLER_DIR + "/"):
                continue
            try:
                os.unlink(os.path.join(self.root, relative))
            except OSError:
                pass
            del self.sent[relative]


class UploadThread(threading.Thread):
    """Runs upload cycles when asked (each finished minute), off the sampling thread."""

    def __init__(self, uploader: Uploader, prune: bool):
        super().__init__(name="cdk-sagemaker-sampler-upload", daemon=True)
        self.uploader = uploader
        self.prune = prune
        self.wake = threading.Event()
        self.stopping = False

    def run(self) -> None:
        while True:
            self.wake.wait()
            self.wake.clear()
            if self.stopping:
                return
            try:
                self.uploader.cycle()
                if self.prune:
                    self.uploader.prune()
            except Exception as exc:  # an unexpected client error must not end uploading for the rest of the job
                self.uploader.status.fail("upload_unexpected", f"{type(exc).__name__}: {exc}")

    def request(self) -> None:
        self.wake.set()

    def stop(self, timeout: float) -> None:
        self.stopping = True
        self.wake.set()
        self.join(timeout)
