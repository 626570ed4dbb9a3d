"""The sampling loop: one sample per interval, one file per minute, an upload after every minute.

It stops on SIGTERM/SIGINT, at the end of ``duration_s``, or when the process that started it has exited (SageMaker
tears the container down right after the training's entry point ends), and then writes out the current minute and
uploads it within a few seconds. SIGUSR1 publishes the current minute and uploads without stopping.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from typing import Callable

from . import layout
from .gpu import gpu_rows, open_gpu_source
from .gpu_health import NoHealth, open_health_source
from .hang import HangWatch
from .minutes import MinuteFiles
from .procfs import HostSource
from .records import Formatter
from .settings import Settings
from .status import FileLog, Guard, Status, write_atomic

FINAL_UPLOAD_S = 3.5
CHECK_EVERY_S = 1.0


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class Daemon:
    def __init__(self, settings: Settings, *, clock: Callable[[], float] = time.time,
                 log: Callable[[str], None] | None = None, lock_fd: int | None = None):
        self.settings = settings
        self.root = settings.local_dir
        if settings.clock_offset_s and clock is time.time:
            from .idle import shifted_clock

            clock = shifted_clock(settings.clock_offset_s)
        self.clock = clock
        self.lock_fd = lock_fd
        self.status = Status(settings.node, log or FileLog(os.path.join(self.root, layout.log_file(settings.node))))
        self.formatter = Formatter(settings.node)
        self.host = HostSource(settings.proc_root, self.formatter, self.status, clock)
        self.minutes = MinuteFiles(self.root, settings.node, self.status)
        self.gpu_guard = Guard("gpu_read", self.status)
        self.gpu = None
        self.health_guard = Guard("gpu_health_read", self.status)
        self.health = NoHealth()
        self.hang = HangWatch(self.root, settings.node, settings.on_hang, settings.hang_minutes, settings.watch_pid,
                              self.status)
        self.uploader = self._uploader()
        self.thread = None
        self.stop_requested = False
        self.flush_requested = False
        self.wake_read, self.wake_write = os.pipe()
        for fd in (self.wake_read, self.wake_write):
            os.set_blocking(fd, False)

    def _uploader(self):
        settings = self.settings
        self.status.set("interval_ms", settings.interval_ms)
        self.status.set("local_dir", self.root)
        if not settings.s3_uri:
            return None
        if not settings.job_name:
            self.status.fail("upload_no_job_name", "no training job name (TRAINING_JOB_NAME is not set and "
                             "trainingjobconfig.json has none): files stay local, nothing is uploaded")
            return None
        from .upload import Uploader  # only when uploading: urllib and its imports cost memory and start time

        uploader = Uploader(self.root, settings, self.status)
        self.status.set("destination", f"s3://{uploader.bucket}/{uploader.base}/")
        return uploader

    # ---- signals
    def _on_signal(self, number: int, _frame: object) -> None:
        if number == signal.SIGUSR1:
            self.flush_requested = True
        else:
            self.stop_requested = True
        try:
            os.write(self.wake_write, b"!")
        except OSError:
            pass

    def _install_signals(self) -> dict:
        if threading.current_thread() is not threading.main_thread():
            return {}
        return {number: signal.signal(number, self._on_signal)
                for number in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}

    # ---- the loop
    def run(self, duration_s: float | None = None) -> dict:
        """Sample until told to stop; returns the final status. Never raises for a sampling or upload failure."""
        previous = self._install_signals()
        try:
            self._start()
            self._loop(duration_s)
        finally:
            self.finish()
            for number, handler in previous.items():
                signal.signal(number, handler)
            for fd in (self.wake_read, self.wake_write):
                os.close(fd)
        return self.status.to_dict()

    def _start(self) -> None:
        if self.lock_fd is not None:
            from .lock import write_pid

            write_pid(self.lock_fd, os.getpid())
        self.minutes.recover(int(self.clock() // 60) * 60)
        self.gpu = open_gpu_source(self.settings.nvml_library, self.settings.interval_ms, self.status)
        self.status.set("gpu_source", self.gpu.name)
        self.health = open_health_source(self.gpu, self.settings.nvml_library, self.settings.interval_ms, self.status)
        where = self.status.info.get("destination", "no upload")
        self.status.log(f"started (pid {os.getpid()}): every {self.settings.interval_ms} ms, node "
                        f"{self.settings.node}, into {self.root} ({where}), GPUs from {self.gpu.name}")
        if self.uploader is not None:
            from .upload import UploadThread

            self.thread = UploadThread(self.uploader, self.settings.prune_uploaded)
            self.thread.start()
        self.status.save(os.path.join(self.root, layout.status_file(self.settings.node)))

    def _loop(self, duration_s: float | None) -> None:
        interval = self.settings.interval_ms / 1000.0
        started = time.monotonic()
        end = None if duration_s is None else started + duration_s
        next_sample = started
        while not self.stop_requested:
            now = time.monotonic()
            if end is not None and now >= end:
                return
            if now >= next_sample:
                self._sample_safely()
                next_sample += interval
                if next_sample <= now:  # fell behind (a stalled host): skip, never burst
                    next_sample = now + interval
            if self.flush_requested:
                self.flush()
            wait = next_sample - time.monotonic()
            if end is not None:
                wait = min(wait, end - time.monotonic())
            self._wait(min(max(wait, 0.0), CHECK_EVERY_S))
            self.hang.check()
            if self.settings.watch_pid and not process_alive(self.settings.watch_pid):
                self.status.set("stopped_because", f"process {self.settings.watch_pid} exited")
                return

    def _wait(self, seconds: float) -> None:
        ready, _, _ = select.select([self.wake_read], [], [], seconds)
        if ready:
            try:
                os.read(self.wake_read, 64)
            except OSError:
                pass

    def _sample_safely(self) -> None:
        try:
            self.sample()
        except Exception as exc:  # a bug in one sample must not end the sampler; counted, logged once
            self.status.fail("sample", f"{type(exc).__name__}: {exc}")

    def sample(self) -> None:
        """One sample of every group, in the agent's order: i/o, cpu, memory, gpu, network."""
        started = self.clock()
        text = (self.host.before_gpu() + self.gpu_guard.run(self._gpu_lines) + self.health_guard.run(self._health_lines)
                + self.host.after_gpu())
        finished = self.minutes.append(started, text)
        self.status.count("samples")
        if finished is not None:
            self._publish()

    def _gpu_lines(self) -> str:
        values = self.gpu.read()
        if not values:
            return ""
        self.status.set("gpus", len(values))
        return self.formatter.group(self.clock(), gpu_rows(values))

    def _health_lines(self) -> str:
        rows = self.health.rows()
        return self.formatter.group(self.clock(), rows) if rows else ""

    def _publish(self) -> None:
        self.status.save(os.path.join(self.root, layout.status_file(self.settings.node)))
        if self.thread is not None:
            self.thread.request()

    def flush(self) -> None:
        """Publish the current minute as it is so far and upload now (SIGUSR1, ``sampler.flush()``)."""
        self.flush_requested = False
        self.minutes.checkpoint()
        self._publish()

    def finish(self) -> None:
        """Write out the current minute, stop the GPU reader, upload what is left within a few seconds."""
        deadline = time.monotonic() + FINAL_UPLOAD_S
        self.minutes.finish()
        if self.gpu is not None:
            self.gpu.close()
        self.health.close()
        if self.settings.end_marker:
            try:
                write_atomic(os.path.join(self.root, layout.END_MARKER), b"")
            except OSError as exc:
                self.status.fail("write", f"cannot write {layout.END_MARKER}: {exc}")
        self.status.set("finished", self.clock())
        status_path = os.path.join(self.root, layout.status_file(self.settings.node))
        self.status.save(status_path)
        if self.thread is not None:
            self.thread.stop(timeout=0.5)
        if self.uploader is not None:
            self.uploader.cycle(deadline=deadline, force=True)
            self.status.save(status_path)  # now with the last uploads counted; only this file changed
            self.uploader.cycle(deadline=deadline + 0.5, force=True)
