"""Per-GPU utilisation and memory utilisation: NVML through ctypes, else ``nvidia-smi`` in loop mode, else nothing.

GPUMemoryUtilization is NVML's memory utilisation (``utilization.memory``: the percent of time the memory controller
was busy), the counter both NVML and nvidia-smi report next to GPU utilisation. No GPU is not an error: one warning,
no gpu records.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from typing import Callable

from .status import Status

SMI_QUERY = "--query-gpu=index,utilization.gpu,utilization.memory"
SMI_FORMAT = "--format=csv,noheader,nounits"
MAX_SMI_RESTARTS = 3


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

    def __init__(self, library_path: str):
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
        self.handles = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            if get_handle(ctypes.c_uint(index), ctypes.byref(handle)) == 0:
                self.handles.append((index, handle))
        self.get_rates = _symbol(library, "nvmlDeviceGetUtilizationRates")
        self.rates = _Utilization()

    def read(self) -> list:
        values = []
        for index, handle in self.handles:
            if self.get_rates(handle, ctypes.byref(self.rates)) == 0:
                values.append((index, float(self.rates.gpu), float(self.rates.memory)))
        return values

    def close(self) -> None:
        try:
            self.shutdown()
        except Exception:  # shutting down a broken driver must not fail the sampler
            pass


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

    def __init__(self, executable: str, interval_ms: int, status: Status):
        self.command = [executable, self.query, SMI_FORMAT, "-lms", str(interval_ms)]
        self.status = status
        self.latest: dict = {}
        self.buffer = b""
        self.restarts = 0
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT)
        os.set_blocking(self.process.stdout.fileno(), False)
        self.buffer = b""

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
            self.latest[parsed[0]] = parsed
            self.restarts = 0
        elif line.strip():
            self.status.fail("gpu_nvidia_smi_output", f"unexpected nvidia-smi output {line.strip()[:200]!r}")

    def read(self) -> list:
        if self.process is None:
            return []
        self._drain()
        if self.process.poll() is not None:
            self._restart()
        return [self.latest[index] for index in sorted(self.latest)]

    def _restart(self) -> None:
        code = self.process.returncode
        self.process.stdout.close()
        self.restarts += 1
        if self.restarts > MAX_SMI_RESTARTS:
            self.status.warn_once("gpu", f"no GPU metrics: nvidia-smi keeps exiting (code {code}); gave up")
            self.process = None
            return
        self.status.fail("gpu_nvidia_smi_exit", f"nvidia-smi exited with code {code}; restarting it")
        self.start()

    def close(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
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
        source = NvmlSource(nvml_library)
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
