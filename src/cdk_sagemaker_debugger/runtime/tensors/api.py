"""The collector's process-wide state and public functions; every function here swallows its own failures."""

import atexit
import os
import socket
import sys
import threading

from . import contract
from .writer import CLOSE_TIMEOUT_S, Writer

SAGEMAKER_OUTPUT_DIR = "/opt/ml/output"
LOCAL_FOLDER = "cdk-sagemaker-tensors"
_lock = threading.Lock()
_state = {"collector": None, "writer": None, "said": set()}


def say_once(kind, message):
    if kind in _state["said"]:
        return
    _state["said"].add(kind)
    try:
        sys.stderr.write(f"cdk-sagemaker-debugger tensors: {message}\n")
    except (OSError, ValueError):
        pass


def default_local_dir(env):
    explicit = env.get(contract.LOCAL_DIR, "").strip()
    if explicit:
        return explicit
    if os.path.isdir(SAGEMAKER_OUTPUT_DIR) and os.access(SAGEMAKER_OUTPUT_DIR, os.W_OK):
        return os.path.join(SAGEMAKER_OUTPUT_DIR, LOCAL_FOLDER)
    import tempfile

    return os.path.join(tempfile.gettempdir(), f"{LOCAL_FOLDER}-{os.getuid()}")


def _int(env, name):
    try:
        return int(env.get(name, "0") or 0)
    except ValueError:
        return 0


def start(config=None, *, local_dir=None, node=None, sink=None, env=None):
    """Start collecting in this process (torch must be importable). ``config``: the dict of contract.parse, or None
    for the job's environment. Idempotent; returns True when collecting, False (one line on stderr) when not."""
    env = os.environ if env is None else env
    try:
        with _lock:
            if _state["collector"] is not None:
                return True
            if config is None:
                config = contract.parse(env.get(contract.CONFIG, ""))
            import torch  # the only place torch is imported

            from .collector import Collector

            rank = _int(env, "RANK")
            node = node or socket.gethostname()
            writer = Writer(local_dir or default_local_dir(env), node, rank, sink=sink)
            collector = Collector(torch, config, writer, rank=rank, local_rank=_int(env, "LOCAL_RANK"))
            collector.install()
            _state.update(collector=collector, writer=writer)
        atexit.register(stop)
        return True
    except Exception as exc:  # never into training
        say_once("start", f"not started: {type(exc).__name__}: {exc}")
        return False


def stop(timeout=CLOSE_TIMEOUT_S):
    """Remove the hooks, write what is queued and the status file (at most ``timeout`` seconds). Called at exit."""
    try:
        with _lock:
            collector, writer = _state["collector"], _state["writer"]
            _state.update(collector=None, writer=None)
        if collector is not None:
            collector.stop()
        if writer is not None:
            # a process that never stepped an optimizer (torchrun's launcher, a data loader worker) writes nothing
            stepped = collector is None or collector.optimizer_id is not None or collector.stopped_by_failure
            writer.close(timeout, write_status=stepped)
        return True
    except Exception as exc:
        say_once("stop", f"stop() failed: {type(exc).__name__}: {exc}")
        return False


def record_labels(target, prediction):
    """Record the labels and predictions of this batch (class ids, or logits/probabilities of shape [N, classes])
    for ClassImbalance and Confusion, when the loss module does not see them. Does nothing on other steps."""
    collector = _state["collector"]
    if collector is None or collector.stopped or "labels" not in collector.config:
        return
    try:
        if not collector.wants("labels"):
            return
        classes = None
        if prediction.dim() >= 2:
            classes = prediction.shape[1]
            prediction = prediction.argmax(1)
        if classes is None:
            classes = int(max(int(target.max()), int(prediction.max())) + 1)  # syncs; ids only
        collector.record_labels(target, prediction, max(classes, 2))
    except Exception as exc:
        collector.stop(f"record_labels: {type(exc).__name__}: {exc}")


def status():
    """The collector's counters (a dict), or None when it does not run in this process."""
    writer = _state["writer"]
    if writer is None:
        return None
    import json

    return json.loads(writer.status.to_json())
