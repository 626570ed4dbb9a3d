"""The sampling loop: one sample per interval, one file per minute, an upload after every minute.

It stops on SIGTERM/SIGINT, at the end of ``duration_s``, or (``watch_members``, in a training container) when the
training has ended (ending.py): then it also writes Debugger's end markers. Either way it writes out the current
minute and uploads it within a few seconds. SIGUSR1 publishes the current minute and uploads without stopping;
SIGUSR2 asks it to look for members now (a process that left on purpose), with no grace period.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from typing import Callable

from . import ending, layout, lock, timeline
from .disk import DiskGuard
from .gpu import gpu_rows, open_gpu_source
from .gpu_health import NoHealth, open_health_source
from .hang import HangWatch
from .minutes import MinuteFiles
from .procfs import HostSource
from .records import Formatter
from .settings import Settings, read_json
from .status import FileLog, Guard, Status

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
        self.disk = DiskGuard(self.root, settings, self.status)
        self.gpu_guard = Guard("gpu_read", self.status)
        self.gpu = None
        self.health_guard = Guard("gpu_health_read", self.status)
        self.health = NoHealth()
        self.hang = HangWatch(self.root, settings.node, settings.on_hang, settings.hang_minutes,
                              settings.training_pid, self.status)
        self.uploader = self._uploader()
        self.thread = None
        self.stop_requested = False
        self.flush_requested = False
        self.look_now = False
        self.members_fd: int | None = None
        self.alone_since: float | None = None
        self.next_check = 0.0
        self.training_ended = False
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
        elif number == signal.SIGUSR2:
            self.look_now = True
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
                for number in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)}

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
            for fd in (self.wake_read, self.wake_write, self.members_fd):
                if fd is not None:
                    os.close(fd)
        return self.status.to_dict()

    def _start(self) -> None:
        if self.lock_fd is not None:
            self._take_over(lock.read_pid(self.lock_fd))
            lock.write_pid(self.lock_fd, os.getpid())
        if self.settings.watch_members:
            self.members_fd = os.open(lock.members_path(self.root), os.O_RDWR | os.O_CREAT, 0o644)
        self.minutes.recover(int(self.clock() // 60) * 60)
        self._recover_timelines(everything=False)
        if self.settings.prune_uploaded:
            self.disk.trim()  # what a previous outage left may already be over the cap
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
            if self.members_fd is not None and self._training_ended():
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
        if not self.disk.room():
            return
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
        self._recover_timelines(everything=False)
        if self.settings.prune_uploaded:
            self.disk.trim()
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
        self._recover_timelines(everything=self.training_ended)
        if self.settings.end_marker or self.training_ended:
            for failure in ending.write_end_markers(self.root):
                self.status.fail("write", f"cannot write {failure}")
        self.status.set("finished", self.clock())
        status_path = os.path.join(self.root, layout.status_file(self.settings.node))
        self.status.save(status_path)
        if self.thread is not None:
            self.thread.stop(timeout=0.5)
        if self.uploader is not None:
            self.uploader.cycle(deadline=deadline, force=True)
            self.status.save(status_path)  # now with the last uploads counted; only this file changed
            self.uploader.cycle(deadline=deadline + 0.5, force=True)

    # ---- the training's end, a predecessor's death, step events of processes that ended without writing them out
    def _training_ended(self) -> bool:
        """Checked every second: no member for the grace period (at once after SIGUSR2), or a parent waiting for us."""
        now = time.monotonic()
        look_now, self.look_now = self.look_now, False
        if now < self.next_check and not look_now:
            return False
        self.next_check = now + CHECK_EVERY_S
        present = lock.members_present(self.members_fd)
        if present:
            self.alone_since = None
        elif self.alone_since is None:
            self.alone_since = now
            if not look_now:
                self.flush()  # the last process of the training just ended: publish at once, the container may go
        reason = None
        if ending.parent_waits_only_for_me(self.settings.proc_root):
            reason = f"process {os.getppid()}, which the sampler was reparented to, waits for it alone"
        elif not present and look_now:
            reason = "the last process of the training stopped the sampler"
        elif not present and now - self.alone_since >= self.settings.end_grace_s:
            reason = f"no process of the training for {self.settings.end_grace_s:g} s"
        if reason is None:
            return False
        self.training_ended = True
        self.status.set("stopped_because", f"the training ended: {reason}")
        return True

    def _take_over(self, previous_pid: int | None) -> None:
        """Record a predecessor that died without finishing (its status file just stopped)."""
        if ending.remove_end_markers(self.root):
            self.status.fail("end_marker_removed", "a sampler starts after its predecessor concluded the training "
                             "had ended; the local end markers are removed (uploaded ones stay)")
        previous = read_json(os.path.join(self.root, layout.status_file(self.settings.node)))
        if not previous or previous.get("finished") or previous_pid in (None, os.getpid()):
            return
        replaced = int(previous.get("counts", {}).get("samplers_replaced", 0)) + 1
        self.status.count("samplers_replaced", replaced)
        self.status.set("replaced", {"pid": previous.get("pid"), "last_update": previous.get("updated")})
        self.status.fail("sampler_died", f"the previous sampler (pid {previous.get('pid')}) ended without finishing "
                         f"(last status at {previous.get('updated')}); its partial files are recovered")

    def _recover_timelines(self, everything: bool) -> None:
        try:
            count = timeline.recover_partials(self.root, None if everything else process_alive)
        except OSError as exc:
            self.status.fail("write", f"cannot recover step events: {exc}")
            return
        if count:
            self.status.count("recovered_timelines", count)
