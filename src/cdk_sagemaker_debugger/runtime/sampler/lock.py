"""One sampler per container: whoever holds an exclusive flock on ``<local dir>/sampler.lock`` is (or starts) it.

The starter takes the lock and hands the open descriptor to the sampler process it spawns, so the lock never has an
unowned moment; the kernel drops it when the sampler dies, so a stale lock cannot exist. The file holds the pid.
Only ``os`` and ``fcntl``: this runs at every interpreter start in the container.
"""

from __future__ import annotations

import fcntl
import os

from . import layout

#: Folder the sampler writes to (and uploads from). Default: /opt/ml/output/cdk-sagemaker-sampler, else a temp folder.
LOCAL_DIR = "CDK_SAGEMAKER_SAMPLER_LOCAL_DIR"
#: Set to "daemon" in the sampler's own environment, so its own interpreter start does not start another sampler.
ROLE = "CDK_SAGEMAKER_SAMPLER_ROLE"
SAGEMAKER_OUTPUT_DIR = "/opt/ml/output"
LOCAL_FOLDER = "cdk-sagemaker-sampler"


def default_local_dir(env: dict) -> str:
    """The folder every process of one container agrees on: the sampler writes there and uploads it."""
    explicit = env.get(LOCAL_DIR, "").strip()
    if explicit:
        return explicit
    if os.path.isdir(SAGEMAKER_OUTPUT_DIR) and os.access(SAGEMAKER_OUTPUT_DIR, os.W_OK):
        return os.path.join(SAGEMAKER_OUTPUT_DIR, LOCAL_FOLDER)
    import tempfile  # only off SageMaker: keeps the every-interpreter-start path light

    return os.path.join(tempfile.gettempdir(), f"{LOCAL_FOLDER}-{os.getuid()}")


def lock_path(local_dir: str) -> str:
    return os.path.join(local_dir, layout.LOCK_FILE)


def try_lock(local_dir: str) -> int | None:
    """An open descriptor holding the lock, or None when a sampler already holds it."""
    os.makedirs(local_dir, exist_ok=True)
    fd = os.open(lock_path(local_dir), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_pid(fd: int, pid: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{pid}\n".encode(), 0)


def holder_pid(local_dir: str) -> int | None:
    """The pid of the running sampler, or None when nobody holds the lock."""
    fd = try_lock(local_dir)
    if fd is not None:
        os.close(fd)
        return None
    try:
        with open(lock_path(local_dir), encoding="ascii") as handle:
            return int(handle.read().strip() or 0) or None
    except (OSError, ValueError):
        return None
