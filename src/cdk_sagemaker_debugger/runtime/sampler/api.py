"""What a training script calls: ``step()`` for step timings, ``start()``/``stop()``/``flush()`` where needed.

None of these ever raises into training: a problem is logged once to stderr and the call does nothing. ``step()``
records only when a sampler is configured for this container (the job's environment, or ``start()``), so a script
instrumented once runs unchanged anywhere.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time

from . import contract, heartbeat, launcher, ranks
from .settings import LOCAL_DIR, ROLE, Settings, SettingsError, from_environment, is_disabled
from .timeline import MODES, TimelineWriter, phase_name

PHASES = {mode: phase_name(mode) for mode in MODES}
RANK_VARIABLES = ranks.RANK_VARIABLES
_state: dict = {"settings": None, "writer": None, "checked": False, "counters": {}, "logged": set()}
_lock = threading.Lock()


def log_once(key: str, message: str) -> None:
    """One line on stderr per kind of problem, ever (this runs inside someone's training)."""
    if key in _state["logged"]:
        return
    _state["logged"].add(key)
    try:
        sys.stderr.write(f"cdk-sagemaker-debugger sampler: {message}\n")
    except (OSError, ValueError):
        pass


def rank() -> int:
    return ranks.rank()


def _settings_from_environment() -> Settings | None:
    """This container's settings when the job's environment configures a sampler, else None."""
    env = os.environ
    if is_disabled(env) or env.get(ROLE) == "daemon":
        return None
    if not (env.get(contract.S3_URI, "").strip() or env.get(LOCAL_DIR, "").strip()):
        return None
    try:
        return from_environment()
    except SettingsError as exc:
        log_once("settings", f"sampler not configured: {exc}")
        return None


def _writer() -> TimelineWriter | None:
    writer = _state["writer"]
    if writer is not None or _state["checked"]:
        return writer
    with _lock:
        if not _state["checked"]:
            settings = _state["settings"] or _settings_from_environment()
            _state["checked"] = True
            if settings is not None and settings.framework_events:
                _state["writer"] = _new_writer(settings)
    return _state["writer"]


def _new_writer(settings: Settings) -> TimelineWriter:
    from .idle import shifted_clock, watch_idle
    from .layout import framework_token

    token = framework_token(settings.node, rank())
    writer = TimelineWriter(settings.local_dir, token, lambda message: log_once("timeline", message),
                            clock=shifted_clock(settings.clock_offset_s),
                            min_free_bytes=int(settings.min_free_mb * 1024 * 1024))
    writer.offset_s = settings.clock_offset_s  # event times come from time.time(); the files use the writer's clock
    heartbeat.attach(settings.local_dir, token)
    writer.on_drain = heartbeat.mark  # the writer thread marks progress when it writes the loop's events
    watch_idle(writer)
    atexit.register(writer.close)
    atexit.register(_mark_exit, writer)  # runs first (atexit is last in, first out)
    launcher.before_stop.append(writer.close)
    return writer


#: The event a training process writes when it exits normally (not when it is killed): TrainingHang then knows that
#: the silence after it is the end of the process, not a hang.
EXIT_PHASE = "Process:exit"


def _mark_exit(writer: TimelineWriter) -> None:
    if writer.pid != os.getpid() or not (writer.last_end_us or writer.queue):
        return  # a forked child, or a process that never recorded a step: nothing to close
    now = time.time() + writer.offset_s
    writer.add(EXIT_PHASE, "exit", now, now, {"pid": os.getpid()})


def record_step(mode: str, step_num: object, start_s: float, end_s: float) -> None:
    """Queue one step event for this process's timeline writer (its thread formats and writes it)."""
    writer = _state["writer"] if _state["checked"] else _writer()
    if writer is None:
        return
    phase = PHASES.get(mode)
    if phase is None:
        log_once(f"mode-{mode}", f"step(mode={mode!r}) is not one of {', '.join(MODES)}; that step is not recorded")
        return
    if step_num is None:
        counters = _state["counters"]
        step_num = counters.get(mode, 0)
        counters[mode] = step_num + 1
    offset = writer.offset_s
    writer.add(phase, phase, start_s + offset, end_s + offset, {"pid": writer.pid, "step_num": str(step_num)})


class step:
    """``with sampler.step():`` records one ``Step:ModeKeys.<mode>`` event with ``args.step_num``.

    ``step_num`` defaults to a counter per mode; ``mode`` is TRAIN, EVAL, PREDICT or GLOBAL. Costs a few microseconds
    (the event is queued; a thread writes it), and almost nothing when no sampler is configured.
    """

    __slots__ = ("step_num", "mode", "started")

    def __init__(self, step_num: object = None, mode: str = "TRAIN"):
        self.step_num = step_num
        self.mode = mode
        self.started = 0.0

    def __enter__(self) -> step:
        self.started = time.time()
        return self

    def __exit__(self, *_exc: object) -> bool:
        try:
            record_step(self.mode, self.step_num, self.started, time.time())
        except Exception as exc:  # never into training
            log_once("step", f"step() failed: {type(exc).__name__}: {exc}")
        return False


def start(**options: object) -> bool:
    """Start the sampler for this container (for images where PYTHONPATH, and so the bundle's sitecustomize, is not
    honoured). Options override the job's environment: s3_uri, interval_ms, local_dir, node, job_name, ...

    Idempotent and safe: returns True when a sampler runs, False (with one line on stderr) when it cannot.
    """
    try:
        if is_disabled(os.environ):
            return False
        settings = from_environment(**options)
        if settings.s3_uri:
            settings = settings.with_changes(prune_uploaded=True)
        with _lock:
            writer = _state["writer"]
            if writer is not None and writer.root != settings.local_dir:
                writer.close()  # events so far stay where they were written; new ones follow the new folder
                _state["writer"] = None
            _state.update(settings=settings, checked=_state["writer"] is not None)
        return launcher.ensure_running(settings, log=lambda message: log_once("supervise", message))
    except Exception as exc:  # never into training
        log_once("start", f"not started: {type(exc).__name__}: {exc}")
        return False


def stop(timeout: float = launcher.STOP_TIMEOUT_S) -> bool:
    """Write out this process's step events and leave the training: when no other process of it runs, the sampler
    writes out, uploads and ends now (this waits at most ``timeout`` seconds for that; True once it has ended).

    Optional: without it the sampler ends a few seconds after the training's last process (nothing waits at exit).
    """
    try:
        writer = _state["writer"]
        if writer is not None:
            writer.close()
        return launcher.leave(timeout)
    except Exception as exc:  # never into training
        log_once("stop", f"stop() failed: {type(exc).__name__}: {exc}")
        return False


def flush() -> bool:
    """Write out this process's step events and ask the sampler to publish its current minute and upload now."""
    try:
        writer = _writer()
        if writer is not None:
            writer.close()
        settings = _state["settings"] or _settings_from_environment()
        return settings is not None and launcher.request_flush(settings.local_dir)
    except Exception as exc:  # never into training
        log_once("flush", f"flush() failed: {type(exc).__name__}: {exc}")
        return False
