"""Fakes for the GPU health tests: an NVML library (compiled C) and an ``nvidia-smi`` that report power, clocks,
temperature, throttle reasons, ECC, remapped rows and XID events as the environment says. The sampler drives them
through its real interfaces (ctypes, a process on PATH), exactly as it drives the real ones.

Environment (every value per GPU unless ``_GPU`` narrows it): FAKE_NVML_GPUS (2), FAKE_NVML_UTIL (95),
FAKE_NVML_POWER_W (300), FAKE_NVML_LIMIT_W (700), FAKE_NVML_SM_CLOCK (1980), FAKE_NVML_MEM_CLOCK (2619),
FAKE_NVML_TEMP (60), FAKE_NVML_THROTTLE (0, a bit mask) on FAKE_NVML_THROTTLE_GPU (-1: every GPU), FAKE_NVML_XID
(0: none; else one event with that code, on FAKE_NVML_XID_GPU, once per process), FAKE_NVML_ECC (0), FAKE_NVML_PENDING
(0), FAKE_NVML_FAILURE (0); FAKE_NVML_POWER_FAIL_GPU (-1: none) answers the power query with
FAKE_NVML_POWER_FAIL_CODE (15, GPU_IS_LOST). The fake nvidia-smi: FAKE_SMI_SILENT_AFTER (0: never) batches of lines,
then it stays alive and silent (a hung nvidia-smi).
"""

from __future__ import annotations

from pathlib import Path

from sampler_fakes import FAKE_NVML_DEVICES_C, compile_library, write_smi_script

FAKE_HEALTH_NVML_C = FAKE_NVML_DEVICES_C + r"""
typedef struct { void *device; unsigned long long eventType; unsigned long long eventData;
                 unsigned int gpuInstanceId; unsigned int computeInstanceId; } nvmlEventData_t;
static long env(const char *name, long fallback) { const char *v = getenv(name); return v ? strtol(v, 0, 0) : fallback; }
static long gpu(void *handle) { return (long)(size_t)handle - 1; }
static int xid_sent = 0;
int nvmlDeviceGetUtilizationRates(void *h, nvmlUtilization_t *r) {
    r->gpu = (unsigned int)env("FAKE_NVML_UTIL", 95); r->memory = 40; return 0;
}
int nvmlDeviceGetPowerUsage(void *h, unsigned int *mw) {
    if (env("FAKE_NVML_POWER_FAIL_GPU", -1) == gpu(h)) return (int)env("FAKE_NVML_POWER_FAIL_CODE", 15);
    *mw = (unsigned int)(env("FAKE_NVML_POWER_W", 300) * 1000); return 0;
}
int nvmlDeviceGetEnforcedPowerLimit(void *h, unsigned int *mw) { *mw = (unsigned int)(env("FAKE_NVML_LIMIT_W", 700) * 1000); return 0; }
int nvmlDeviceGetClockInfo(void *h, int type, unsigned int *mhz) {
    *mhz = (unsigned int)(type == 1 ? env("FAKE_NVML_SM_CLOCK", 1980) : env("FAKE_NVML_MEM_CLOCK", 2619)); return 0;
}
int nvmlDeviceGetTemperature(void *h, int sensor, unsigned int *c) { *c = (unsigned int)env("FAKE_NVML_TEMP", 60); return 0; }
int nvmlDeviceGetCurrentClocksThrottleReasons(void *h, unsigned long long *mask) {
    long only = env("FAKE_NVML_THROTTLE_GPU", -1);
    *mask = (only < 0 || only == gpu(h)) ? (unsigned long long)env("FAKE_NVML_THROTTLE", 0) : 0ULL; return 0;
}
int nvmlDeviceGetTotalEccErrors(void *h, int type, int counter, unsigned long long *n) {
    *n = (unsigned long long)env("FAKE_NVML_ECC", 0); return 0;
}
int nvmlDeviceGetRemappedRows(void *h, unsigned int *corr, unsigned int *unc, unsigned int *pending, unsigned int *failure) {
    *corr = 0; *unc = 0; *pending = (unsigned int)env("FAKE_NVML_PENDING", 0); *failure = (unsigned int)env("FAKE_NVML_FAILURE", 0);
    return 0;
}
int nvmlEventSetCreate(void **set) { *set = (void *)(size_t)42; return 0; }
int nvmlDeviceRegisterEvents(void *h, unsigned long long types, void *set) { return 0; }
int nvmlEventSetFree(void *set) { return 0; }
int nvmlEventSetWait_v2(void *set, nvmlEventData_t *data, unsigned int timeout_ms) {
    long code = env("FAKE_NVML_XID", 0);
    if (!code || xid_sent) return 10; /* NVML_ERROR_TIMEOUT */
    xid_sent = 1;
    data->device = (void *)(size_t)(env("FAKE_NVML_XID_GPU", 0) + 1);
    data->eventType = 8; data->eventData = (unsigned long long)code;
    return 0;
}
"""

FAKE_HEALTH_SMI = '''#!{python}
"""A fake nvidia-smi answering the sampler's two queries (utilisation; health) in loop mode."""
import os, sys, time
gpus = int(os.environ.get("FAKE_NVML_GPUS", "2"))
query = sys.argv[1]
loop_ms = int(sys.argv[sys.argv.index("-lms") + 1]) if "-lms" in sys.argv else None
def health(i):
    mask = int(os.environ.get("FAKE_NVML_THROTTLE", "0"), 0)
    only = int(os.environ.get("FAKE_NVML_THROTTLE_GPU", "-1"))
    mask = mask if only in (-1, i) else 0
    return "%d, %s, %s, %s, %s, %s, 0x%016x, %s, No, [N/A]" % (
        i, os.environ.get("FAKE_NVML_POWER_W", "300"), os.environ.get("FAKE_NVML_LIMIT_W", "700"),
        os.environ.get("FAKE_NVML_SM_CLOCK", "1980"), os.environ.get("FAKE_NVML_MEM_CLOCK", "2619"),
        os.environ.get("FAKE_NVML_TEMP", "60"), mask, os.environ.get("FAKE_NVML_ECC", "0"))
while True:
    if query == "--query-gpu=index,utilization.gpu,utilization.memory":
        lines = ["%d, %s, 40" % (i, os.environ.get("FAKE_NVML_UTIL", "95")) for i in range(gpus)]
    else:
        lines = [health(i) for i in range(gpus)]
    sys.stdout.write("".join(line + "\\n" for line in lines))
    sys.stdout.flush()
    if loop_ms is None:
        break
    batches = globals().get("batches", 0) + 1
    if batches == int(os.environ.get("FAKE_SMI_SILENT_AFTER", "0")):
        time.sleep(3600)
    time.sleep(loop_ms / 1000.0)
'''


def compile_health_nvml(folder: Path) -> Path | None:
    """``libfake-health-nvml.so`` built with the machine's C compiler; None when there is none."""
    return compile_library(folder, "fake-health-nvml", FAKE_HEALTH_NVML_C)


def write_health_smi(folder: Path) -> Path:
    """An executable ``nvidia-smi`` answering both queries (put ``folder`` first on PATH)."""
    return write_smi_script(folder, FAKE_HEALTH_SMI)
