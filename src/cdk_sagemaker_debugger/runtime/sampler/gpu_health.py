"""Per-GPU health next to utilisation: power draw and limit, SM and memory clocks, temperature, clock-throttle
reasons, XID events, uncorrectable ECC errors and remapped rows. NVML first, ``nvidia-smi`` second, else nothing.

Records are Debugger's (Type ``gpu``, Name ``gpu<i>``) with new Dimension names; the managed rules and smdebug skip
dimensions they do not know, so Debugger-compatible readers are unaffected.

========================  =====================================================================================
Dimension                 Value
========================  =====================================================================================
GPUPowerDraw              watts, every sample
GPUPowerLimit             watts (the enforced limit), every SLOW_EVERY_S
GPUSMClock                MHz, every sample
GPUMemoryClock            MHz, every sample
GPUTemperature            degrees Celsius, every sample
GPUThrottleReasons        NVML's clock-throttle bit mask (0x20 software thermal, 0x40 hardware thermal, 0x80 power
                          brake, 0x8 hardware slowdown, 0x4 power cap, 0x1 idle), every sample
GPUXid                    the XID code, one record per critical XID event (NVML only: nvidia-smi cannot show them)
GPUEccUncorrected         volatile uncorrectable ECC error count, every SLOW_EVERY_S
GPURemappedRowsPending    1 when a row remap waits for a GPU reset, every SLOW_EVERY_S
GPURemappedRowsFailure    1 when a row remap failed (the GPU needs replacing), every SLOW_EVERY_S
========================  =====================================================================================

A field a GPU does not support is dropped for that GPU after its first answer (named in the status,
``gpu_health_unsupported``); any other NVML error is counted per GPU with the utilisation reader's (``gpu_errors``).
An nvidia-smi reading ages out like a utilisation reading (never repeated as live) and its process is restarted with
the same back-off (status keys ``gpu_health_*``). Nothing here ever raises.
"""

from __future__ import annotations

import ctypes
import subprocess
import time

from .gpu import SMI_FORMAT, NoGpu, SmiSource, note_nvml_error

SLOW_EVERY_S = 10.0
NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
XID_CRITICAL_EVENT = 0x8
MAX_XIDS_PER_SAMPLE = 16
FAST = ("GPUPowerDraw", "GPUSMClock", "GPUMemoryClock", "GPUTemperature", "GPUThrottleReasons")
SLOW = ("GPUPowerLimit", "GPUEccUncorrected", "GPURemappedRowsPending", "GPURemappedRowsFailure")
DIMENSIONS = FAST + SLOW + ("GPUXid",)


class _EventData(ctypes.Structure):
    _fields_ = [("device", ctypes.c_void_p), ("eventType", ctypes.c_ulonglong), ("eventData", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class NvmlHealth:
    """The health fields through NVML (its own nvmlInit: NVML counts them, so this never shuts the reader down)."""

    name = "nvml"

    def __init__(self, library_path: str, monotonic=time.monotonic, status: object = None, errors: dict | None = None):
        self.status = status
        self.errors = {} if errors is None else errors  # shared with the utilisation reader: one count per GPU
        self.unsupported: dict = {}
        library = ctypes.CDLL(library_path)
        if (getattr(library, "nvmlInit_v2", None) or library.nvmlInit)() != NVML_SUCCESS:
            raise OSError("nvmlInit failed")
        self.library = library
        self.monotonic = monotonic
        self.slow_at = 0.0
        count = ctypes.c_uint(0)
        (getattr(library, "nvmlDeviceGetCount_v2", None) or library.nvmlDeviceGetCount)(ctypes.byref(count))
        get_handle = getattr(library, "nvmlDeviceGetHandleByIndex_v2", None) or library.nvmlDeviceGetHandleByIndex
        self.handles = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            code = get_handle(ctypes.c_uint(index), ctypes.byref(handle))
            if code == NVML_SUCCESS:
                self.handles.append((index, handle))
            else:
                note_nvml_error(status, self.errors, index, "nvmlDeviceGetHandleByIndex", code,
                                f"gpu{index} has no health record")
        self.readers = self._readers()
        self.off: set = set()  # (gpu index, dimension) a GPU does not support
        self.uint, self.ulong = ctypes.c_uint(), ctypes.c_ulonglong()
        self.events = self._xid_events()

    def _function(self, *names: str):
        for name in names:
            function = getattr(self.library, name, None)
            if function is not None:
                return function
        return None

    def _readers(self) -> dict:
        """dimension -> (function, extra leading arguments, output kind, scale)."""
        power, limit = self._function("nvmlDeviceGetPowerUsage"), self._function("nvmlDeviceGetEnforcedPowerLimit")
        clock, temperature = self._function("nvmlDeviceGetClockInfo"), self._function("nvmlDeviceGetTemperature")
        throttle = self._function("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
        ecc = self._function("nvmlDeviceGetTotalEccErrors")
        table = {"GPUPowerDraw": (power, (), "uint", 0.001), "GPUPowerLimit": (limit, (), "uint", 0.001),
                 "GPUSMClock": (clock, (1,), "uint", 1), "GPUMemoryClock": (clock, (2,), "uint", 1),
                 "GPUTemperature": (temperature, (0,), "uint", 1), "GPUThrottleReasons": (throttle, (), "ulong", 1),
                 "GPUEccUncorrected": (ecc, (1, 0), "ulong", 1)}
        return {dim: spec for dim, spec in table.items() if spec[0] is not None}

    def _xid_events(self):
        create, register = self._function("nvmlEventSetCreate"), self._function("nvmlDeviceRegisterEvents")
        wait = self._function("nvmlEventSetWait_v2", "nvmlEventSetWait")
        if not (create and register and wait):
            return None
        events = ctypes.c_void_p()
        if create(ctypes.byref(events)) != NVML_SUCCESS:
            return None
        registered = [register(handle, ctypes.c_ulonglong(XID_CRITICAL_EVENT), events) == NVML_SUCCESS
                      for _, handle in self.handles]
        return (events, wait, _EventData()) if any(registered) else None

    def _value(self, index: int, handle: object, dimension: str):
        function, leading, kind, scale = self.readers[dimension]
        out = self.uint if kind == "uint" else self.ulong
        code = function(handle, *[ctypes.c_int(a) for a in leading], ctypes.byref(out))
        if code == NVML_SUCCESS:
            return out.value * scale
        if code == NVML_ERROR_NOT_SUPPORTED:
            self.off.add((index, dimension))
            self.unsupported.setdefault(f"gpu{index}", []).append(dimension)
            if self.status is not None:
                self.status.set("gpu_health_unsupported", {gpu: list(dims) for gpu, dims in self.unsupported.items()})
        else:
            note_nvml_error(self.status, self.errors, index, getattr(function, "__name__", dimension), code,
                            f"gpu{index} has no {dimension} record")
        return None

    def _remapped(self, handle: object) -> tuple:
        function = self._function("nvmlDeviceGetRemappedRows")
        if function is None:
            return ()
        corrected, uncorrected, pending, failure = (ctypes.c_uint() for _ in range(4))
        code = function(handle, *(ctypes.byref(v) for v in (corrected, uncorrected, pending, failure)))
        if code != NVML_SUCCESS:
            return ()
        return ("GPURemappedRowsPending", float(pending.value)), ("GPURemappedRowsFailure", float(failure.value))

    def rows(self) -> list:
        now = self.monotonic()
        slow = now >= self.slow_at
        if slow:
            self.slow_at = now + SLOW_EVERY_S
        wanted = FAST + SLOW if slow else FAST
        rows = []
        for index, handle in self.handles:
            name = f"gpu{index}"
            for dimension in wanted:
                if dimension in self.readers and (index, dimension) not in self.off:
                    value = self._value(index, handle, dimension)
                    if value is not None:
                        rows.append(("gpu", name, dimension, value))
            if slow:
                rows += [("gpu", name, dim, value) for dim, value in self._remapped(handle)]
        return rows + self._xids()

    def _xids(self) -> list:
        if self.events is None:
            return []
        events, wait, data = self.events
        by_handle = {handle.value: index for index, handle in self.handles}
        rows = []
        for _ in range(MAX_XIDS_PER_SAMPLE):
            if wait(events, ctypes.byref(data), ctypes.c_uint(0)) != NVML_SUCCESS:
                break
            index = by_handle.get(data.device)
            if index is not None:
                rows.append(("gpu", f"gpu{index}", "GPUXid", float(data.eventData)))
        return rows

    def close(self) -> None:
        try:
            if self.events is not None:
                free = self._function("nvmlEventSetFree")
                if free is not None:
                    free(self.events[0])
            self.library.nvmlShutdown()
        except Exception:  # a broken driver must not fail the sampler's exit
            pass


SMI_HEALTH_FIELDS = (("power.draw", "GPUPowerDraw"), ("power.limit", "GPUPowerLimit"), ("clocks.sm", "GPUSMClock"),
                     ("clocks.mem", "GPUMemoryClock"), ("temperature.gpu", "GPUTemperature"),
                     ("clocks_throttle_reasons.active", "GPUThrottleReasons"),
                     ("ecc.errors.uncorrected.volatile.total", "GPUEccUncorrected"),
                     ("remapped_rows.pending", "GPURemappedRowsPending"),
                     ("remapped_rows.failure", "GPURemappedRowsFailure"))
SMI_HEALTH_QUERY = "--query-gpu=index," + ",".join(field for field, _ in SMI_HEALTH_FIELDS)
SMI_HEALTH_MIN_INTERVAL_MS = 1000


def smi_number(text: str) -> float | None:
    """``250.5`` / ``0x0000000000000040`` / ``Yes`` / ``No`` -> a number; None for [N/A], [Not Supported] and noise."""
    text = text.strip()
    if text in ("Yes", "No"):
        return 1.0 if text == "Yes" else 0.0
    try:
        return float(int(text, 16)) if text.lower().startswith("0x") else float(text)
    except ValueError:
        return None


def parse_smi_health(line: str) -> tuple | None:
    """One line of the health query -> (index, [(dimension, value), ...]); None for anything but such a line."""
    parts = line.split(",")
    if len(parts) != len(SMI_HEALTH_FIELDS) + 1 or not parts[0].strip().isdigit():
        return None
    values = [(dim, smi_number(text)) for (_, dim), text in zip(SMI_HEALTH_FIELDS, parts[1:])]
    return int(parts[0]), [(dim, value) for dim, value in values if value is not None]


PROBE_TIMEOUT_S = 10.0


def probe(executable: str) -> None:
    """Ask once, synchronously: an nvidia-smi that does not know a field (old drivers) fails here, not in a loop."""
    try:
        result = subprocess.run([executable, SMI_HEALTH_QUERY, SMI_FORMAT], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise OSError(f"{executable} did not answer the health query within {PROBE_TIMEOUT_S:.0f} s") from exc
    lines = result.stdout.decode("utf-8", "replace").splitlines()
    if result.returncode != 0 or not any(parse_smi_health(line) for line in lines):
        first = lines[0].strip()[:200] if lines else ""
        raise OSError(f"{executable} cannot answer the health query (exit {result.returncode}: {first!r})")


class SmiHealth(SmiSource):
    """A second long-lived ``nvidia-smi -lms`` for the health fields (at most once a second: they change slowly)."""

    name = "nvidia-smi"
    query = SMI_HEALTH_QUERY
    parse = staticmethod(parse_smi_health)
    key = "gpu_health"

    def __init__(self, executable: str, interval_ms: int, status: object, monotonic=time.monotonic):
        probe(executable)
        super().__init__(executable, max(interval_ms, SMI_HEALTH_MIN_INTERVAL_MS), status, monotonic)

    def rows(self) -> list:
        return [("gpu", f"gpu{index}", dim, value) for index, values in self.read() for dim, value in values]


class NoHealth(NoGpu):
    def rows(self) -> list:
        return []


def open_health_source(gpu_source: object, nvml_library: str, interval_ms: int, status: object) -> object:
    """The health reader matching the utilisation reader (gpu.py chose it): NVML, nvidia-smi or none."""
    try:
        if gpu_source.name == "nvml":
            return NvmlHealth(nvml_library, status=status, errors=getattr(gpu_source, "errors", None))
        if gpu_source.name == "nvidia-smi":
            return SmiHealth(gpu_source.command[0], interval_ms, status)
    except (OSError, AttributeError, ValueError) as exc:
        status.warn_once("gpu_health", f"no GPU health fields (power, clocks, throttling, XID, ECC): {exc}")
    return NoHealth()
