"""The collector's background writer: JSON lines to a local file, then (optionally) an upload; counters in a status.

The training thread only puts a step's records on a bounded queue; the writer writes every queued step before it
uploads (uploads wait while steps come in quickly, e.g. on the first steps). A full queue drops that step (counted), a full disk
budget drops the step's file (counted), an upload failure keeps the file for the next try (counted): the training
never waits on the disk or the network. ``close()`` gives the queue a bounded time at interpreter exit.
"""

import json
import os
import queue
import threading
import time

from . import layout

QUEUE_STEPS = 64
#: Local bytes not yet uploaded above which new step files are dropped (never fill the training's disk).
MAX_LOCAL_BYTES = 256 * 1024 * 1024
CLOSE_TIMEOUT_S = 10.0
MAX_MESSAGES = 10


def write_atomic(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temp = f"{path}.{os.getpid()}.tmp"
    with open(temp, "wb") as handle:
        handle.write(data)
    os.replace(temp, path)


class Status:
    """Counters and the first messages of each failure kind (thread-safe; written as the status file)."""

    def __init__(self, node, rank):
        self.lock = threading.Lock()
        self.values = {"node": node, "rank": rank, "pid": os.getpid(), "started": time.time(), "failures": {},
                       "messages": []}

    def set(self, key, value):
        with self.lock:
            self.values[key] = value

    def add(self, key, amount=1):
        with self.lock:
            self.values[key] = self.values.get(key, 0) + amount

    def fail(self, kind, message):
        with self.lock:
            failures = self.values["failures"]
            failures[kind] = failures.get(kind, 0) + 1
            if len(self.values["messages"]) < MAX_MESSAGES:
                self.values["messages"].append(f"{kind}: {message}")

    def to_json(self):
        with self.lock:
            return json.dumps(self.values, sort_keys=True, default=str).encode()


class Writer:
    def __init__(self, local_dir, node, rank, sink=None, keep_local=False):
        self.local_dir = local_dir
        self.node, self.rank = node, rank
        self.sink = sink  # put(relative, path) or None: files stay in local_dir
        self.keep_local = keep_local or sink is None
        self.status = Status(node, rank)
        self.queue = queue.Queue(QUEUE_STEPS)
        self.unsent = []  # relative paths written and not uploaded yet
        self.local_bytes = 0
        self.thread = None
        self.closed = False

    def submit(self, step, records):
        if self.closed:
            return
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="cdk-sagemaker-tensors", daemon=True)
            self.thread.start()
        try:
            self.queue.put_nowait((step, records))
        except queue.Full:
            self.status.add("dropped_steps")

    def _run(self):
        while True:
            item = self.queue.get()
            if item is None:
                return
            try:
                self._write(*item)
            except Exception as exc:  # a full or read-only disk: counted, the next step tries again
                self.status.fail("write", f"{type(exc).__name__}: {exc}")
            if self.queue.empty():
                self._send(list(self.unsent))

    def _write(self, step, records):
        data = "".join(json.dumps(r, separators=(",", ":"), allow_nan=False) + "\n" for r in records).encode()
        if self.local_bytes + len(data) > MAX_LOCAL_BYTES:
            self.status.add("dropped_steps")
            self.status.fail("disk_budget", f"over {MAX_LOCAL_BYTES} bytes not uploaded; step {step} dropped")
            return
        relative = layout.step_file(self.node, self.rank, step)
        write_atomic(os.path.join(self.local_dir, relative), data)
        self.local_bytes += len(data)
        self.status.add("files")
        self.status.set("last_step", step)
        self.unsent.append(relative)

    def _send(self, relatives):
        self.unsent = []
        if self.sink is None:
            return
        for relative in relatives:
            path = os.path.join(self.local_dir, relative)
            try:
                self.sink.put(relative, path)
            except Exception as exc:
                self.unsent.append(relative)
                self.status.fail("upload", f"{type(exc).__name__}: {exc}")
                continue
            self.status.add("uploaded")
            if not self.keep_local:
                try:
                    self.local_bytes -= os.path.getsize(path)
                    os.unlink(path)
                except OSError:
                    pass

    def close(self, timeout=CLOSE_TIMEOUT_S, write_status=True):
        """Write what is queued and the status file, waiting at most ``timeout`` seconds; never raises."""
        if self.closed:
            return
        self.closed = True
        deadline = time.monotonic() + timeout
        try:
            if self.thread is not None:
                self.queue.put(None, timeout=max(0.0, deadline - time.monotonic()))
                self.thread.join(max(0.0, deadline - time.monotonic()))
            if self.thread is None or not self.thread.is_alive():
                self._send(list(self.unsent))
            if not write_status:
                return
            relative = layout.status_file(self.node, self.rank)
            self.status.set("closed", time.time())
            write_atomic(os.path.join(self.local_dir, relative), self.status.to_json())
            if self.sink is not None and time.monotonic() < deadline:
                self.sink.put(relative, os.path.join(self.local_dir, relative))
        except Exception:  # at interpreter exit: nothing to report to any more
            pass
