"""When the training has ended, seen from the sampler, which is nobody's child: no member is left (lock.py), or the
process the sampler was reparented to waits for its children and the sampler is the only one it has.

The second case is a launcher that reaps every child until none is left while being the container's init (PID 1) or
a child subreaper: the sampler, reparented to it, would keep it waiting forever. Reading the parent's current system
call (``/proc/<pid>/syscall``) needs the same user; where the kernel refuses, only the members decide.
"""

from __future__ import annotations

import os

from . import layout
from .status import write_atomic

#: wait4 and waitid, by machine (what os.wait, os.waitpid and subprocess block in).
WAIT_SYSCALLS = {"x86_64": (61, 247), "aarch64": (260, 95), "arm64": (260, 95)}


def in_wait(pid: int, proc_root: str = "/proc") -> bool:
    """True when ``pid`` is blocked waiting for a child."""
    numbers = WAIT_SYSCALLS.get(os.uname().machine, ())
    try:
        with open(os.path.join(proc_root, str(pid), "syscall"), encoding="ascii") as handle:
            first = handle.read().split()
        return bool(first) and first[0].isdigit() and int(first[0]) in numbers
    except OSError:
        return False


def children_of(pid: int, proc_root: str = "/proc") -> set:
    """The pids whose parent is ``pid`` (a scan of /proc: only done when the parent already waits)."""
    found = set()
    for name in os.listdir(proc_root):
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(proc_root, name, "stat"), encoding="ascii", errors="replace") as handle:
                fields = handle.read().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 1 and fields[1] == str(pid):
            found.add(int(name))
    return found


def parent_waits_only_for_me(proc_root: str = "/proc") -> bool:
    """True when the sampler's parent is blocked waiting for children and the sampler is its only child."""
    parent = os.getppid()
    if parent <= 0 or not in_wait(parent, proc_root):
        return False
    try:
        return children_of(parent, proc_root) == {os.getpid()}
    except OSError:
        return False


def write_end_markers(root: str) -> list:
    """Debugger's ``system/`` and ``framework/training_job_end.ts`` (empty files); returns the ones that failed."""
    failed = []
    for marker in layout.END_MARKERS:
        try:
            write_atomic(os.path.join(root, marker), b"")
        except OSError as exc:
            failed.append(f"{marker}: {exc}")
    return failed


def remove_end_markers(root: str) -> bool:
    """A sampler starting after its predecessor concluded the training had ended: the markers were wrong."""
    removed = False
    for marker in layout.END_MARKERS:
        try:
            os.unlink(os.path.join(root, marker))
            removed = True
        except OSError:
            pass
    return removed
