"""Per-GPU utilisation and memory utilisation: NVML through ctypes, else ``nvidia-smi`` in loop mode, else nothing.

GPUMemoryUtilization is NVML's memory utilisation (``utilization.memory``: the percent of time the memory controller
was busy), the counter both NVML and nvidia-smi report next to GPU utilisation. No GPU is not an error: one warning,
no gpu records.

Nothing is repeated as live: an nvidia-smi reading older than ``stale_after`` (three intervals, at least 2 s) is not
reported and each stale GPU is counted (``gpu_stale``); an nvidia-smi that hangs is restarted. An nvidia-smi that
exits is restarted with a back-off (one interval doubling to five minutes, reset once one has run a minute) and given
up after three exits that produced no reading. An NVML error on one GPU (NOT_SUPPORTED on MIG, GPU_IS_LOST) is
counted per GPU and named in the status file (``gpu_errors``), next to how many GPUs NVML sees (``gpu_count``).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import time
from typing import Callable

from .status import Status

SMI_QUERY = "--query-gpu=index,utilization.gpu,utilization.memory"
SMI_FORMAT = "--format=csv,noheader,nounits"
MAX_SMI_RESTARTS = 3
STABLE_S = 60.0
MAX_BACKOFF_S = 300.0
NVML_ERRORS = {1: "UNINITIALIZED", 2: "INVALID_ARGUMENT", 3: "NOT_SUPPORTED", 4: "NO_PERMISSION", 6: "NOT_FOUND",
               9: "DRIVER_NOT_LOADED", 10: "TIMEOUT", 15: "GPU_IS_LOST", 16: "RESET_REQUIRED", 999: "UNKNOWN"}


def nvml_error(code: int) -> str:
    return f"NVML_ERROR_{NVML_ERRORS.get(code, code)}"


class GpuUnavailable(Exception):
    """This source cannot read GPUs here (no library, no driver, no device)."""


class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


def _symbol(library: ctypes.CDLL, *names: str):
    for name in names:
        function = getattr(library, name, None)
        if function is not None:
            return function
    raise GpuUnavailable(f"NVML has none of {', '.join(names)}")


class NvmlSource:
    """Reads utilisation rates from libnvidia-ml through ctypes (no process, no parsing: the cheapest path)."""

    name = "nvml"

    def __init__(self, library_path: str, status: Status | None = None):
        self.status = status
        self.errors: dict = {}
        try:
            library = ctypes.CDLL(library_path)
        except OSError as exc:
            raise GpuUnavailable(f"cannot load {library_path}: {exc}") from exc
        init = _symbol(library, "nvmlInit_v2", "nvmlInit")
        if init() != 0:
            raise GpuUnavailable("nvmlInit failed (no NVIDIA driver?)")
        self.shutdown = _symbol(library, "nvmlShutdown")
        count = ctypes.c_uint(0)
        if _symbol(library, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount")(ctypes.byref(count)) != 0:
            self.close()
            raise GpuUnavailable("nvmlDeviceGetCount failed")
        get_handle = _symbol(library, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex")
        self.count = count.value
        self.handles = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            code = get_handle(ctypes.c_uint(index), ctypes.byref(handle))
            if code == 0:
                self.handles.append((index, handle))
            else:
                self._error(index, "nvmlDeviceGetHandleByIndex", code)
        self.get_rates = _symbol(library, "nvmlDeviceGetUtilizationRates")
        self.rates = _Utilization()

    def _error(self, index: int, call: str, code: int) -> None:
        note_nvml_error(self.status, self.errors, index, call, code, f"gpu{index} has no record")

    def read(self) -> list:
        values = []
        for index, handle in self.handles:
            code = self.get_rates(handle, ctypes.byref(self.rates))
            if code == 0:
                values.append((index, float(self.rates.gpu), float(self.rates.memory)))
            else:
                self._error(index, "nvmlDeviceGetUtilizationRates", code)
        return values

    def close(self) -> None:
        try:
            self.shutdown()
        except Exception:  # shutting down a broken driver must not fail the sampler
            pass


def note_nvml_error(status: Status | None, errors: dict, index: int, call: str, code: int, lost: str) -> None:
    """One GPU's NVML failure (utilisation or health): counted per GPU and named in the status (``gpu_errors``),
    never a silent gap; ``lost`` says what has no record while it lasts."""
    name = nvml_error(code)
    if errors.get(f"gpu{index}") != name:
        errors[f"gpu{index}"] = name
        if status is not None:
            status.set("gpu_errors", dict(errors))
    if status is not None:
        status.fail(f"gpu{index}_nvml", f"{call} returned {name}; {lost} while it lasts")


def parse_smi_line(line: str) -> tuple | None:
    """``0, 45, 12`` -> (0, 45.0, 12.0); None for anything else ([N/A], [Not Supported], error text)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 3:
        return None
    try:
        return int(parts[0]), float(parts[1]), float(parts[2])
    except ValueError:
        return None


class SmiSource:
    """One long-lived ``nvidia-smi -lms <interval>``: each sample drains its output without blocking."""

    name = "nvidia-smi"
    #: What to ask and how to read a line (gpu_health.SmiHealth asks for other fields through the same process logic).
    query = SMI_QUERY
    parse = staticmethod(parse_smi_line)
    #: Prefix of this reader's status keys (``gpu_stale``, ``gpu_nvidia_smi_exit``, ...).
    key = "gpu"

    def __init__(self, executable: str, interval_ms: int, status: Status,
                 monotonic: Callable[[], float] = time.monotonic):
        self.command = [executable, self.query, SMI_FORMAT, "-lms", str(interval_ms)]
        self.status = status
        self.monotonic = monotonic
        self.interval_s = interval_ms / 1000.0
        self.stale_after = max(3 * self.interval_s, 2.0)
        #: GPU index -> ((index, utilisation, memory), when it was read)
        self.latest: dict = {}
        self.buffer = b""
        self.quick_exits = 0
        self.silent_exits = 0
        self.next_start = 0.0
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT)
        os.set_blocking(self.process.stdout.fileno(), False)
        self.buffer = b""
        self.started_at = self.monotonic()
        self.readings = 0

    def _drain(self) -> None:
        stream = self.process.stdout
        while True:
            try:
                chunk = os.read(stream.fileno(), 65536)
            except BlockingIOError:
                return
            if not chunk:
                return
            *lines, self.buffer = (self.buffer + chunk).split(b"\n")
            for line in lines:
                self._take(line.decode("utf-8", "replace"))

    def _take(self, line: str) -> None:
        parsed = self.parse(line)
        if parsed is not None:
            self.latest[parsed[0]] = (parsed, self.monotonic())
            self.readings += 1
        elif line.strip():
            self.status.fail(f"{self.key}_nvidia_smi_output", f"unexpected nvidia-smi output {line.strip()[:200]!r}")

    def read(self) -> list:
        now = self.monotonic()
        if self.process is not None:
            self._drain()
            if self.process.poll() is not None:
                self._exited(now)
            elif self._all_stale(now) and now - self.started_at > 2 * self.stale_after:
                self.status.fail(f"{self.key}_nvidia_smi_hung", f"nvidia-smi wrote nothing for {self.stale_after:g} s; "
                                 "restarting it")
                self._end_process()
                self._exited(now)
        elif self.next_start and now >= self.next_start:
            self.next_start = 0.0
            self.start()
        return self._fresh(now)

    def _all_stale(self, now: float) -> bool:
        return all(now - when > self.stale_after for _value, when in self.latest.values()) if self.latest else \
            now - self.started_at > self.stale_after

    def _fresh(self, now: float) -> list:
        values = []
        for index in sorted(self.latest):
            value, when = self.latest[index]
            if now - when <= self.stale_after:
                values.append(value)
            else:
                self.status.fail(f"{self.key}_stale", f"gpu{index}: no nvidia-smi reading for {now - when:.0f} s; not "
                                 "reported (an old reading is never repeated as live)")
        return values

    def _exited(self, now: float) -> None:
        """Back off: one interval doubling to five minutes; reset once one ran a minute; give up after three exits
        that never produced a reading."""
        code = self.process.returncode
        self.process.stdout.close()
        self.process = None
        self.quick_exits = self.quick_exits + 1 if now - self.started_at < STABLE_S else 0
        self.silent_exits = self.silent_exits + 1 if self.readings == 0 else 0
        if self.silent_exits > MAX_SMI_RESTARTS:
            self.status.warn_once(self.key, f"no GPU metrics: nvidia-smi keeps exiting (code {code}); gave up")
            return
        delay = min(self.interval_s * 2 ** max(self.quick_exits - 1, 0), MAX_BACKOFF_S)
        self.status.fail(f"{self.key}_nvidia_smi_exit", f"nvidia-smi exited with code {code}; restarting it in {delay:g} s "
                         "(doubling while it keeps exiting)")
        self.next_start = now + delay

    def _end_process(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def close(self) -> None:
        if self.process is None:
            return
        self._end_process()
        self.process.stdout.close()
        self.process = None


class NoGpu:
    name = "none"

    def read(self) -> list:
        return []

    def close(self) -> None:
        pass


def open_gpu_source(nvml_library: str, interval_ms: int, status: Status,
                    which: Callable[[str], str | None] = shutil.which) -> object:
    """NVML if it loads and sees a GPU, else nvidia-smi if it is on PATH, else no GPU (with one warning)."""
    reasons = []
    try:
        source = NvmlSource(nvml_library, status)
        status.set("gpu_count", source.count)
        if source.handles:
            return source
        source.close()
        reasons.append("NVML sees no GPU")
    except GpuUnavailable as exc:
        reasons.append(str(exc))
    executable = which("nvidia-smi")
    if executable:
        try:
            return SmiSource(executable, interval_ms, status)
        except OSError as exc:
            reasons.append(f"cannot run {executable}: {exc}")
    else:
        reasons.append("nvidia-smi is not on PATH")
    status.warn_once("gpu", "no GPU metrics (normal on CPU instances): " + "; ".join(reasons))
    return NoGpu()


def gpu_rows(values: list) -> list:
    """GPUUtilization rows then GPUMemoryUtilization rows, in GPU order."""
    rows = [("gpu", f"gpu{index}", "GPUUtilization", util) for index, util, _ in values]
    rows += [("gpu", f"gpu{index}", "GPUMemoryUtilization", memory) for index, _, memory in values]
    return rows
