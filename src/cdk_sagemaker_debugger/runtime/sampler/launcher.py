"""Start the sampler once per container as a process that belongs to nobody, and keep one running while the training
runs.

* Detached: the starter runs ``python -m <this package> --detach`` in a new session with no stdin/stdout/stderr; that
  process forks the sampler and exits at once, so the sampler is nobody's child (a launcher that reaps its children
  until none is left never waits for it) and nobody capturing the training's output waits on it either.
* Owned by the container: every Python process of the training joins the members lock (lock.py) for its life; the
  sampler ends, writing Debugger's end markers, once no member is left. No process waits for the sampler at exit.
* Supervised: each member checks every few seconds (a thread, one failed flock per check) that a sampler holds the
  sampler lock; when one died (the OOM killer, a cleanup that kills processes), the first member to notice starts
  another, which records the death and recovers what its predecessor left in ``.partial/``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Callable

from . import lock, watch
from .settings import ROLE, Settings

STOP_TIMEOUT_S = 5.0
PACKAGE = __name__.rpartition(".")[0]
#: Called before this process leaves the training (``sampler.stop()``): the timeline writer writes out its events.
before_stop: list = []
_lock = threading.Lock()


def package_root() -> str:
    """The sys.path entry this package was imported from (a folder or the bundle zip)."""
    top = sys.modules[PACKAGE.split(".")[0]]
    location = os.path.abspath(getattr(top, "__file__", None) or list(top.__path__)[0])
    if os.path.basename(location) == "__init__.py":
        location = os.path.dirname(location)
    return os.path.dirname(location)


def daemon_command(settings: Settings, lock_fd: int) -> list:
    command = [sys.executable, "-m", PACKAGE, "--out", settings.local_dir, "--interval-ms", str(settings.interval_ms),
               "--node", settings.node, "--lock-fd", str(lock_fd), "--detach", "--watch-members",
               "--training-pid", str(os.getpid())]
    if settings.s3_uri:
        command += ["--s3-uri", settings.s3_uri]
    if settings.job_name:
        command += ["--job-name", settings.job_name]
    if settings.prune_uploaded:
        command.append("--prune-uploaded")
    return command


def daemon_environment() -> dict:
    env = dict(os.environ)
    env[ROLE] = "daemon"
    root = package_root()
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([root] + paths)
    return env


def spawn(settings: Settings, lock_fd: int) -> subprocess.Popen:
    """The short-lived first stage (it forks the sampler and exits); the caller reaps it off the training's path."""
    if not sys.executable:
        raise OSError("sys.executable is empty, so the sampler process cannot be started")
    return subprocess.Popen(daemon_command(settings, lock_fd), env=daemon_environment(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
                            pass_fds=(lock_fd,), start_new_session=True)


def start_if_free(settings: Settings, fd: int | None = None) -> subprocess.Popen | None:
    """Start a sampler when none holds the lock (``fd``: the lock, when the caller already took it; closed here)."""
    fd = lock.try_lock(settings.local_dir) if fd is None else fd
    if fd is None:
        return None  # a sampler runs (or is being started by another process right now)
    try:
        return spawn(settings, fd)
    finally:
        os.close(fd)  # the sampler holds the lock through its inherited copy


def reap(process: subprocess.Popen | None) -> None:
    """Wait for the first stage (it exits within a fraction of a second); a launcher may have reaped it already."""
    if process is None:
        return
    try:
        process.wait(timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        pass


def ensure_running(settings: Settings, fd: int | None = None, log: Callable[[str], None] = lambda message: None
                   ) -> bool:
    """Join the training's members, start the sampler unless one runs, and watch it; True once one runs.

    ``fd`` is the sampler lock when the caller already took it (the bundle's sitecustomize); it is closed here.
    """
    with _lock:
        _entry, joined_now = watch.join(settings.local_dir)
        try:
            first = start_if_free(settings, fd)
        except BaseException:
            if joined_now:
                watch.leave(settings.local_dir)
            raise
        if joined_now:
            watch.watch(settings.local_dir, settings.supervise_s, lambda lock_fd: reap(start_if_free(settings, lock_fd)),
                        log, first=lambda: reap(first))
        else:
            reap(first)
    return True


def _after_fork_in_child() -> None:
    """A forked child stays a member through the shared descriptor; the watch thread stays with the parent."""
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def run_before_stop(hooks: list, log: Callable[[str], None] | None = None) -> None:
    for hook in list(hooks):
        try:
            hook()
        except Exception as exc:  # one failing hook must not keep this process from leaving
            if log:
                log(f"flush at stop failed: {type(exc).__name__}: {exc}")


def leave(timeout: float = STOP_TIMEOUT_S) -> bool:
    """``sampler.stop()``: this process leaves the training. When it was the last member, the sampler writes out,
    uploads and ends now; this waits at most ``timeout`` s for that. True when no sampler runs any more."""
    run_before_stop(before_stop)
    with _lock:
        entries = [d for d in list(watch.joined) if watch.leave(d)]
    if not entries:
        return False
    deadline = time.monotonic() + timeout
    stopped = True
    for local_dir in entries:
        if lock.members_remain(local_dir):
            continue  # other processes of the training still run: the sampler stays with them
        pid = lock.holder_pid(local_dir)
        if pid is not None:
            _signal(pid, signal.SIGUSR2)  # "look for members now": no grace period after an explicit stop
        while lock.holder_pid(local_dir) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        stopped = stopped and lock.holder_pid(local_dir) is None
    return stopped


def _signal(pid: int, number: int) -> bool:
    try:
        os.kill(pid, number)
    except OSError:
        return False
    return True


def request_flush(local_dir: str) -> bool:
    """SIGUSR1 to the running sampler: publish the current minute and upload now."""
    pid = lock.holder_pid(local_dir)
    return pid is not None and _signal(pid, signal.SIGUSR1)
