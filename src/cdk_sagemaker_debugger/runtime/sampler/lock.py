"""One sampler per container, and who the training is, both with flock (the kernel drops a lock when its holder
dies, however it dies, so a stale lock cannot exist).

* ``<local dir>/sampler.lock``: whoever holds it exclusively is (or starts) the sampler. The starter takes the lock
  and hands the open descriptor to the sampler process it spawns, so the lock never has an unowned moment. The file
  holds the sampler's pid.
* ``<local dir>/sampler.members``: every Python process of the training holds it shared for its whole life (forked
  children share the holder's descriptor, so pool workers count too). When nobody holds it, the training's processes
  have ended.

Only ``os``, ``fcntl`` and ``time``: this runs at every interpreter start in the container.
"""

from __future__ import annotations

import fcntl
import os
import time

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


def read_pid(fd: int) -> int | None:
    """The pid a previous holder wrote into the lock file (None when empty)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


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


def members_path(local_dir: str) -> str:
    return os.path.join(local_dir, layout.MEMBERS_FILE)


def join_members(local_dir: str) -> int | None:
    """This process is part of the training from now until it ends: a descriptor holding the members file shared.

    The sampler takes the file exclusively for an instant to look for members, so a refusal is retried briefly; None
    when that keeps failing (this process then simply does not count)."""
    os.makedirs(local_dir, exist_ok=True)
    fd = os.open(members_path(local_dir), os.O_RDWR | os.O_CREAT, 0o644)
    for attempt in range(20):
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            time.sleep(0.001 * (attempt + 1))
        except BaseException:
            os.close(fd)
            raise
    os.close(fd)
    return None


def members_present(fd: int) -> bool:
    """True while any process holds the members file (``fd``: the sampler's own descriptor of it, unlocked)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def members_remain(local_dir: str) -> bool:
    """True while any process of the training holds the members file (for a process that is not one itself)."""
    try:
        fd = os.open(members_path(local_dir), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return False
    try:
        return members_present(fd)
    finally:
        os.close(fd)
