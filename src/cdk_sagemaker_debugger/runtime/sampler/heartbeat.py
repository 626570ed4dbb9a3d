"""Progress marks on local disk: every step or phase a training process records touches its heartbeat file.

The files live in ``.heartbeat/`` under the sampler's local folder (never uploaded); the sampler reads their times to
see whether training on this host still progresses (hang.py). The timeline writer's thread marks when it takes the
loop's events off its queue (nothing on the training thread): one ``time.monotonic()`` per write and one ``utime`` per
second at most. Only events mark, never a timer: a hung training loop records none, so its marks stop.
"""

from __future__ import annotations

import os
import time

HEARTBEAT_DIR = ".heartbeat"
#: Next to the heartbeat folder, so that it never counts as progress.
WRITE_OUT_FILE = ".heartbeat-write-out"
MARK_EVERY_S = 1.0
_state: dict = {"path": None, "last": 0.0, "pid": None}


def heartbeat_folder(root: str) -> str:
    return os.path.join(root, HEARTBEAT_DIR)


def write_out_request(root: str) -> str:
    """Touched by the sampler to ask every training process to write out its open timeline file (idle.py)."""
    return os.path.join(root, WRITE_OUT_FILE)


def attach(root: str, token: str) -> None:
    """Mark into ``<root>/.heartbeat/<token>.<pid>`` from now on (called when the process's timeline opens)."""
    _state.update(path=os.path.join(heartbeat_folder(root), f"{token}.{os.getpid()}"), last=0.0, pid=os.getpid())


def mark() -> None:
    """Note progress; never raises (a full or read-only disk only loses the marks)."""
    path = _state["path"]
    if path is None:
        return
    now = time.monotonic()
    if now - _state["last"] < MARK_EVERY_S and _state["pid"] == os.getpid():
        return
    _state["last"] = now
    try:
        if _state["pid"] != os.getpid():  # a forked child (a DataLoader worker) never marks for its parent
            return
        try:
            os.utime(path)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="ascii") as handle:
                handle.write(str(os.getpid()))
    except OSError:
        pass
