"""Start the sampler as a detached process of its own, once per container, and stop it when its starter exits.

The sampler runs as ``python -m <this package>`` in a new session with no stdin/stdout/stderr (a caller capturing
the training's output must never wait on it), inheriting only the lock descriptor. The starter registers an atexit
handler that closes open timeline files, asks the sampler to stop and waits a few seconds for its last upload; if the
starter dies without atexit, the sampler notices within a second and does the same itself.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
from typing import Callable

from . import lock
from .settings import ROLE, Settings

STOP_TIMEOUT_S = 5.0
PACKAGE = __name__.rpartition(".")[0]
#: Called before the sampler is stopped at exit (the timeline writer closes its file here).
before_stop: list = []
_started: dict = {}


def package_root() -> str:
    """The sys.path entry this package was imported from (a folder or the bundle zip)."""
    top = sys.modules[PACKAGE.split(".")[0]]
    location = os.path.abspath(getattr(top, "__file__", None) or list(top.__path__)[0])
    if os.path.basename(location) == "__init__.py":
        location = os.path.dirname(location)
    return os.path.dirname(location)


def daemon_command(settings: Settings, lock_fd: int, watch_pid: int) -> list:
    command = [sys.executable, "-m", PACKAGE, "--out", settings.local_dir, "--interval-ms", str(settings.interval_ms),
               "--node", settings.node, "--lock-fd", str(lock_fd), "--watch-pid", str(watch_pid)]
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
    if not sys.executable:
        raise OSError("sys.executable is empty, so the sampler process cannot be started")
    return subprocess.Popen(daemon_command(settings, lock_fd, os.getpid()), env=daemon_environment(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            close_fds=True, pass_fds=(lock_fd,), start_new_session=True)


def ensure_running(settings: Settings, fd: int | None = None) -> bool:
    """Start the sampler unless one already runs for this container; True either way once one runs.

    ``fd`` is the lock when the caller already took it (the bundle's sitecustomize); it is closed here.
    """
    if _started.get("pid") == os.getpid():
        if fd is not None:
            os.close(fd)
        return True
    fd = lock.try_lock(settings.local_dir) if fd is None else fd
    if fd is None:
        return True  # another process started it (or is starting it right now)
    try:
        process = spawn(settings, fd)
    finally:
        os.close(fd)  # the sampler holds the lock through its inherited copy
    _started.update(pid=os.getpid(), process=process, local_dir=settings.local_dir)
    atexit.register(stop_at_exit, process, os.getpid(), settings.local_dir)
    return True


def run_before_stop(hooks: list, log: Callable[[str], None] | None = None) -> None:
    for hook in list(hooks):
        try:
            hook()
        except Exception as exc:  # one failing hook must not keep the sampler from its last upload
            if log:
                log(f"flush at exit failed: {type(exc).__name__}: {exc}")


def wait_until_ready(process: subprocess.Popen, local_dir: str, deadline: float) -> None:
    """Until the sampler has written its pid to the lock file, its SIGTERM handler is not in place yet."""
    path = lock.lock_path(local_dir)
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with open(path, encoding="ascii") as handle:
                if handle.read().strip() == str(process.pid):
                    return
        except OSError:
            return
        time.sleep(0.02)


def stop(process: subprocess.Popen, local_dir: str, timeout: float = STOP_TIMEOUT_S) -> bool:
    """Ask the sampler to write out and upload, and wait at most ``timeout`` seconds; True when it has exited."""
    deadline = time.monotonic() + timeout
    wait_until_ready(process, local_dir, deadline)
    if process.poll() is not None:
        return True
    try:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=max(deadline - time.monotonic(), 0.1))
    except (OSError, subprocess.TimeoutExpired):
        return False
    return True


def stop_at_exit(process: subprocess.Popen, starter_pid: int, local_dir: str) -> None:
    if os.getpid() != starter_pid:  # a forked child exiting: the sampler belongs to its parent
        return
    run_before_stop(before_stop)
    stop(process, local_dir)
    _started.clear()


def stop_started(timeout: float = STOP_TIMEOUT_S) -> bool:
    """Stop the sampler this process started (``sampler.stop()``); False when it started none."""
    process = _started.get("process")
    if process is None or _started.get("pid") != os.getpid():
        return False
    run_before_stop(before_stop)
    stopped = stop(process, _started["local_dir"], timeout)
    _started.clear()
    return stopped


def request_flush(local_dir: str) -> bool:
    """SIGUSR1 to the running sampler: publish the current minute and upload now."""
    pid = lock.holder_pid(local_dir)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        return False
    return True
