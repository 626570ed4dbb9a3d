"""Fakes for the sampler tests: a fake nvidia-smi, a fake NVML library (compiled C), a clock that crosses a minute.

Each fake is a real program or library the sampler drives through its real interfaces (PATH, ctypes), never a mock
of the sampler's own functions.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

FAKE_SMI = '''#!{python}
"""A fake nvidia-smi: --query-gpu=index,utilization.gpu,utilization.memory --format=csv,noheader,nounits [-lms N]."""
import os, sys, time
gpus = int(os.environ.get("FAKE_GPUS", "2"))
util = os.environ.get("FAKE_GPU_UTIL", "5")
memory = os.environ.get("FAKE_GPU_MEMORY", "20")
assert sys.argv[1] == "--query-gpu=index,utilization.gpu,utilization.memory", sys.argv
assert sys.argv[2] == "--format=csv,noheader,nounits", sys.argv
loop_ms = int(sys.argv[sys.argv.index("-lms") + 1]) if "-lms" in sys.argv else None
while True:
    sys.stdout.write("".join("%d, %s, %s\\n" % (i, util, memory) for i in range(gpus)))
    sys.stdout.flush()
    if loop_ms is None:
        break
    time.sleep(loop_ms / 1000.0)
'''

#: The devices of a fake NVML: FAKE_NVML_GPUS (2) GPUs whose handles are their index + 1.
FAKE_NVML_DEVICES_C = r"""
#include <stdlib.h>
#include <stddef.h>
typedef struct { unsigned int gpu; unsigned int memory; } nvmlUtilization_t;
static unsigned int count(void) { const char *v = getenv("FAKE_NVML_GPUS"); return v ? (unsigned int)atoi(v) : 2; }
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = count(); return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **handle) {
    if (i >= count()) return 2;
    *handle = (void *)(size_t)(i + 1);
    return 0;
}
"""

FAKE_NVML_C = FAKE_NVML_DEVICES_C + r"""
/* gpu<i>: utilisation 30 + 10 i, memory utilisation 7 + i; FAKE_NVML_FAIL="<i>:<code>" makes gpu<i> fail */
int nvmlDeviceGetUtilizationRates(void *handle, nvmlUtilization_t *rates) {
    size_t i = (size_t)handle - 1;
    const char *fail = getenv("FAKE_NVML_FAIL");
    if (fail && (size_t)atoi(fail) == i) {
        const char *colon = fail;
        while (*colon && *colon != ':') colon++;
        return *colon ? atoi(colon + 1) : 999;
    }
    rates->gpu = 30 + 10 * (unsigned int)i;
    rates->memory = 7 + (unsigned int)i;
    return 0;
}
"""


def bundle_zip(target: Path) -> Path:
    """The sampler bundle as the construct ships it (a zip Python imports from), written to ``target``."""
    import zipfile

    from cdk_sagemaker_debugger.runtime.sampler.bundle import write_bundle

    folder = target.parent / (target.stem + "-files")
    write_bundle(folder)
    with zipfile.ZipFile(target, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return target


def write_smi_script(folder: Path, script: str) -> Path:
    """``script`` (a Python program with ``{python}`` for its interpreter) as an executable ``folder/nvidia-smi``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "nvidia-smi"
    path.write_text(script.replace("{python}", sys.executable))
    path.chmod(0o755)
    return path


def compile_library(folder: Path, name: str, source_text: str) -> Path | None:
    """``lib<name>.so`` from C ``source_text``, built with the machine's C compiler; None when there is none."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    source, library = folder / f"{name}.c", folder / f"lib{name}.so"
    source.write_text(source_text)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True, capture_output=True)
    return library


def write_fake_smi(folder: Path) -> Path:
    """An executable ``nvidia-smi`` in ``folder`` (put ``folder`` first on PATH)."""
    return write_smi_script(folder, FAKE_SMI)


def compile_fake_nvml(folder: Path) -> Path | None:
    """``libfake-nvml.so`` built with the machine's C compiler; None when there is none."""
    return compile_library(folder, "fake-nvml", FAKE_NVML_C)


def clock_crossing_a_minute(seconds_before: float = 1.0):
    """A wall clock running at real speed that reads ``seconds_before`` s before a minute boundary right now.

    A short sampling run then spans two minute files, and the evaluator (which never analyses the newest minute, as
    the managed rules) has one complete window to judge.
    """
    now = time.time()
    target = (math.floor(now / 60) + 2) * 60 - seconds_before
    offset = target - now
    return lambda: time.time() + offset


def system_records(root: Path) -> list[dict]:
    import json

    records = []
    for path in sorted(root.glob("system/incremental/*/*.json")):
        records += [json.loads(line) for line in path.read_text().splitlines()]
    return records


def per_core_cpu_lines() -> int:
    """How many ``cpuN`` lines /proc/stat has on this machine (read independently of the sampler)."""
    return sum(1 for line in Path("/proc/stat").read_text().splitlines() if line.startswith("cpu") and line[3].isdigit())


class LocalHttp:
    """A tiny HTTP server on 127.0.0.1 answering from ``routes`` {(method, path): (status, headers, body)}.

    Stands in for endpoints that only exist inside AWS (container credentials, IMDS) or for S3 misbehaving.
    """

    def __init__(self, routes: dict):
        import http.server
        import threading

        self.routes = routes
        self.requests: list = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                outer.requests.append((self.command, self.path, dict(self.headers), body))
                status, headers, payload = outer.routes.get((self.command, self.path), (404, {}, b"not found"))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PUT = _answer  # noqa: N815 - the handler's method names

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
