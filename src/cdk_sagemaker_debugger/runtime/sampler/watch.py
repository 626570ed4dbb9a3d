"""Membership and supervision inside every Python process of the training, kept light: this runs at every
interpreter start in the container, so it needs only ``os``, ``_thread`` (``threading`` would cost as much as all the
rest), ``time`` and lock.py. Settings and the launcher are imported only when a sampler has to be started (not even
``typing``: it alone costs 10 ms).

``join`` makes this process a member (lock.py) once per folder; ``watch`` starts the process's watch thread, which
checks every few seconds that a sampler holds the lock and starts one (through ``start``) when none does.
"""

from __future__ import annotations

import _thread
import os
import time

from . import layout, lock

#: Seconds between a training process's checks that a sampler runs (lock.py has no settings: read here).
SUPERVISE = "CDK_SAGEMAKER_SAMPLER_SUPERVISE_S"
DEFAULT_SUPERVISE_S = 5.0
#: local dir -> {"fd": members descriptor or None, "pid": the process that joined}
joined: dict = {}


def supervise_seconds(env: dict) -> float:
    try:
        seconds = float(env.get(SUPERVISE, "").strip() or DEFAULT_SUPERVISE_S)
    except ValueError:
        return DEFAULT_SUPERVISE_S
    return seconds if seconds == seconds and 0 < seconds < 86400 else DEFAULT_SUPERVISE_S


def member(local_dir: str) -> dict | None:
    entry = joined.get(local_dir)
    return entry if entry is not None and entry["pid"] == os.getpid() else None


def join(local_dir: str) -> tuple:
    """(entry, True when this call joined); a process joins each folder once."""
    entry = member(local_dir)
    if entry is not None:
        return entry, False
    entry = {"fd": lock.join_members(local_dir), "pid": os.getpid()}
    joined[local_dir] = entry
    return entry, True


def leave(local_dir: str) -> bool:
    """This process is no longer a member of that folder's training; False when it was not one."""
    entry = member(local_dir)
    if entry is None:
        return False
    joined.pop(local_dir, None)
    if entry["fd"] is not None:
        os.close(entry["fd"])
    return True


def watch(local_dir: str, seconds: float, start: object, log: object, first: object = None) -> None:
    """The watch thread: ``first`` once (reaping the first stage), then every ``seconds`` ``start(lock_fd)`` when no
    sampler holds the lock, unless the sampler concluded the training ended (its end marker is there)."""
    entry = joined[local_dir]

    def run() -> None:
        if first is not None:
            first()
        while joined.get(local_dir) is entry and entry["pid"] == os.getpid():
            time.sleep(seconds)
            if joined.get(local_dir) is not entry or os.path.exists(os.path.join(local_dir, layout.END_MARKER)):
                continue
            try:
                fd = lock.try_lock(local_dir)
                if fd is not None:
                    start(fd)
            except Exception as exc:  # never into training; try again at the next check
                log(f"could not restart the sampler: {type(exc).__name__}: {exc}")

    _thread.start_new_thread(run, ())  # like a daemon thread: never keeps the interpreter from exiting
