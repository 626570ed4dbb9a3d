#!/usr/bin/env python3
"""Overhead of the sampler: its own CPU (as % of one core) and peak RSS, against an idle baseline.

    python benchmarks/sampler.py [--seconds 20]

Each run is a child process of this benchmark, measured with wait4 (user + system CPU over wall time, and peak RSS,
including the interpreter's start and any process it runs, such as nvidia-smi):
  * the baseline: an idle Python loop sleeping at the same cadence;
  * the sampler at 100 ms and at 500 ms on this machine (real /proc, no GPU here);
  * the sampler at 500 ms on a simulated host: a fake /proc with 96 cores and a fake nvidia-smi with 8 GPUs;
  * the sampler's memory with an upload client (boto3 and the standard-library one) against an unreachable endpoint.
  * the sampler at 100 ms with 8 GPUs through a fake NVML library, with the health fields (power, clocks,
    temperature, throttling, XID, ECC, remapped rows) and, in process, against utilisation alone;
It also prints the in-process cost of one sample, of one ``with sampler.step():`` on the training thread against an
empty ``with`` of a do-nothing context manager in the same loop (the writer thread's CPU is shown apart), and the
per-step cost of ``sampler.phase()`` and ``sampler.wrap(loader)`` against an unwrapped loop in the same process (each
only queues its event, like ``step()``). Targets at 100 ms: at most 2 % of one core and at most 40 MB RSS.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from health_fakes import compile_health_nvml  # noqa: E402  (the fake NVML of the health tests)
from sampler_fakes import compile_fake_nvml, write_fake_smi  # noqa: E402  (the same fakes the tests use)

from cdk_sagemaker_debugger.runtime.sampler.daemon import Daemon  # noqa: E402
from cdk_sagemaker_debugger.runtime.sampler.settings import Settings  # noqa: E402

SAMPLER = "cdk_sagemaker_debugger.runtime.sampler"
IDLE = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n" \
       "    time.sleep(float(sys.argv[2]))\n"
CPU_TARGET_PCT, RSS_TARGET_MB = 2.0, 40.0


# Runs a module or code like ``python -m``/``-c`` would, then writes its own peak RSS (VmHWM of /proc/self/status:
# wait4's ru_maxrss would report this benchmark's size, which a child inherits across fork and exec).
WRAPPER = """
import runpy, sys
report, how, target = sys.argv[1:4]
sys.argv = [target] + sys.argv[4:]
try:
    if how == "-m":
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        exec(compile(target, "<idle>", "exec"), {"__name__": "__main__"})
except SystemExit as exc:
    if exc.code:
        raise
finally:
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(report, "w") as out:
        out.write(peak)
"""


@dataclass
class Usage:
    cpu_pct: float | None  # sampling alone (None: not measured)
    cpu_pct: float  # sampling alone: CPU of the run minus CPU of the same command run for 0 s, over the run's length
    total_cpu_pct: float  # the whole run, including the interpreter's start and the final write and upload
    rss_mb: float


def run_child(how: str, target: str, args: list, env: dict, base: Path) -> tuple:
    """(CPU seconds of the child and the processes it waited for, wall seconds, peak RSS MB)."""
    report = base / f"rss-{time.monotonic_ns()}"
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-c", WRAPPER, str(report), how, target, *args], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{how} {target} {' '.join(args)} exited with {process.returncode}")
    return usage.ru_utime + usage.ru_stime, time.monotonic() - started, int(report.read_text()) / 1024


def measure(how: str, target: str, args_for, env: dict, seconds: float, base: Path, sampling: bool = True) -> Usage:
    """One run of ``seconds`` and one of 0 s (start and stop only): their difference is the cost of sampling."""
    cpu, wall, rss = run_child(how, target, args_for(seconds), env, base)
    if not sampling:
        return Usage(None, 100.0 * cpu / wall, rss)
    start_stop_cpu, _, _ = run_child(how, target, args_for(0), env, base)
    return Usage(100.0 * max(cpu - start_stop_cpu, 0.0) / seconds, 100.0 * cpu / wall, rss)


def environment(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CDK_SAGEMAKER_SAMPLER_")}
    env["PYTHONPATH"] = str(ROOT / "src")
    env["CDK_SAGEMAKER_SAMPLER_NVML_LIBRARY"] = "libnvidia-ml-not-here.so"
    env.update(extra)
    return env


def fake_host(base: Path, cores: int, gpus: int) -> dict:
    """A /proc with ``cores`` cores and an nvidia-smi with ``gpus`` GPUs; the environment that points at them."""
    proc = base / "proc"
    (proc / "net").mkdir(parents=True)
    (proc / "stat").write_text("cpu  0 0 0 0 0 0 0 0\n" + "".join(
        f"cpu{i} {1000 + i} 10 300 90000 20 0 5 0 0 0\n" for i in range(cores)) + "intr 1 2 3\nctxt 4\n")
    (proc / "meminfo").write_text("MemTotal: 790000000 kB\nMemFree: 600000000 kB\nMemAvailable: 700000000 kB\n")
    (proc / "net" / "dev").write_text("h1\nh2\n    lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n"
                                      "  eth0: 1000 5 0 0 0 0 0 0 400 3 0 0 0 0 0 0\n")
    (proc / "diskstats").write_text(" 259 0 nvme0n1 4 0 16 0 2 0 8 0 0 0 0\n 259 1 nvme1n1 4 0 16 0 2 0 8 0 0 0 0\n")
    write_fake_smi(base / "bin")
    return {"CDK_SAGEMAKER_SAMPLER_PROC_ROOT": str(proc), "PATH": f"{base / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "FAKE_GPUS": str(gpus), "FAKE_GPU_UTIL": "85", "FAKE_GPU_MEMORY": "40"}


def per_sample_us(local_dir: Path, env: dict, samples: int = 300, nvml: str = "libnvidia-ml-not-here.so") -> float:
    """In-process cost of one sample (read, format, write), best of three rounds."""
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        settings = Settings(local_dir=str(local_dir), interval_ms=100, proc_root=env.get(
            "CDK_SAGEMAKER_SAMPLER_PROC_ROOT", "/proc"), nvml_library=nvml)
        daemon = Daemon(settings, log=lambda message: None)
        daemon._start()
        try:
            best = float("inf")
            for _ in range(3):
                started = time.process_time()
                for _ in range(samples):
                    daemon.sample()
                best = min(best, (time.process_time() - started) / samples)
        finally:
            daemon.finish()
        return best * 1e6
    finally:
        os.environ.clear()
        os.environ.update(saved)


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *_exc: object) -> bool:
        return False


def step_cost(local_dir: Path, calls: int = 200_000) -> tuple:
    """(us per step() call on the calling thread, us of an empty with, us of process CPU per step incl. the writer)."""
    from cdk_sagemaker_debugger.runtime.sampler import api

    saved = dict(os.environ)
    os.environ["CDK_SAGEMAKER_SAMPLER_LOCAL_DIR"] = str(local_dir)
    api._state.update(settings=None, writer=None, checked=False, counters={})
    try:
        best_step = best_empty = best_cpu = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            for _ in range(calls):
                with _Nothing():
                    pass
            best_empty = min(best_empty, (time.perf_counter() - started) / calls)
            cpu, started = time.process_time(), time.perf_counter()
            for _ in range(calls):
                with api.step():
                    pass
            best_step = min(best_step, (time.perf_counter() - started) / calls)
            api.flush()  # the writer thread's share: what is still queued, written now
            best_cpu = min(best_cpu, (time.process_time() - cpu) / calls)
        return best_step * 1e6, best_empty * 1e6, best_cpu * 1e6
    finally:
        os.environ.clear()
        os.environ.update(saved)


def row(name: str, usage: Usage, baseline: Usage | None = None) -> str:
    """One line; the upload-client rows show memory only (the client's import swamps 20 s of sampling CPU)."""
    sampling = "     -  " if usage.cpu_pct is None else f"{usage.cpu_pct:6.2f} %"
    versus = ""
    if baseline is not None and usage.cpu_pct is not None:
        versus = (f"{usage.cpu_pct - baseline.cpu_pct:+5.2f} points ({usage.cpu_pct / max(baseline.cpu_pct, 1e-3):4.0f} x)"
                  f"  {usage.rss_mb / baseline.rss_mb:4.2f} x")
    elif baseline is not None:
        versus = f"{'':<24}{usage.rss_mb / baseline.rss_mb:4.2f} x"
    return f"{name:<48} {sampling} {usage.total_cpu_pct:7.2f} % {usage.rss_mb:7.1f} MB  {versus}"


def sampler_args(out: Path, interval: int, *extra: str):
    return lambda seconds: ["--out", str(out), "--interval-ms", str(interval), "--duration", str(seconds), *extra]


def sampler_runs(base: Path, seconds: float) -> dict:
    results = {}
    for interval in (100, 500):
        results[f"idle {interval}"] = measure("-c", IDLE, lambda s, i=interval: [str(s), str(i / 1000)], environment(),
                                              seconds, base)
        results[f"sampler {interval}"] = measure("-m", SAMPLER, sampler_args(base / f"out-{interval}", interval),
                                                 environment(), seconds, base)
    fake = fake_host(base / "fake", 96, 8)
    results["fake 500"] = measure("-m", SAMPLER, sampler_args(base / "out-fake", 500), environment(**fake), seconds,
                                  base)
    return results


def gpu_health_runs(base: Path, seconds: float) -> dict:
    """8 GPUs through NVML (fake libraries): the sampler with health fields, and the in-process cost with and
    without them (the utilisation-only library has no health functions, so the health reader adds nothing)."""
    health, plain = compile_health_nvml(base / "nvml-health"), compile_fake_nvml(base / "nvml-plain")
    if health is None or plain is None:
        return {}
    gpus = {"FAKE_NVML_GPUS": "8"}
    env = environment(CDK_SAGEMAKER_SAMPLER_NVML_LIBRARY=str(health), **gpus)
    return {"run": measure("-m", SAMPLER, sampler_args(base / "out-health", 100), env, seconds, base),
            "health_us": per_sample_us(base / "in-health", gpus, nvml=str(health)),
            "plain_us": per_sample_us(base / "in-plain", gpus, nvml=str(plain))}


def per_step_us(base: Path, steps: int = 20000) -> dict:
    """In-process cost per step: ``step()`` alone, with two ``phase()`` blocks, and iterating ``wrap(loader)``."""
    from cdk_sagemaker_debugger.runtime.sampler import api
    from cdk_sagemaker_debugger.runtime.sampler.loader import wrap
    from cdk_sagemaker_debugger.runtime.sampler.phases import phase

    saved = dict(os.environ)
    os.environ["CDK_SAGEMAKER_SAMPLER_LOCAL_DIR"] = str(base / "phase-steps")
    api._state.update(settings=None, writer=None, checked=False, counters={})
    loader = list(range(steps))

    def bare() -> None:
        for _ in loader:
            pass

    def stepped() -> None:
        for _ in loader:
            with api.step():
                pass

    def phased() -> None:
        for _ in loader:
            with api.step(), phase("forward"), phase("backward"):
                pass

    def wrapped() -> None:
        for _ in wrap(loader):
            with api.step():
                pass

    try:
        timings = {}
        for name, loop in (("bare", bare), ("step", stepped), ("phase", phased), ("wrap", wrapped)):
            best = float("inf")
            for _ in range(3):
                started = time.perf_counter()
                loop()
                best = min(best, time.perf_counter() - started)
                api.flush()  # what is queued is written between runs (a full queue would drop events)
            timings[name] = 1e6 * best / steps
        api.stop()
        return timings
    finally:
        os.environ.clear()
        os.environ.update(saved)


def upload_client_runs(base: Path, seconds: float) -> dict:
    """With an upload client loaded (its uploads fail fast: nothing listens on the endpoint)."""
    results = {}
    for client in ("boto3", "stdlib"):
        env = environment(CDK_SAGEMAKER_SAMPLER_UPLOADER=client, AWS_ENDPOINT_URL_S3="http://127.0.0.1:9",
                          AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x", AWS_DEFAULT_REGION="us-east-1",
                          AWS_MAX_ATTEMPTS="1")
        args = sampler_args(base / f"up-{client}", 500, "--s3-uri", "s3://bucket/p", "--job-name", "bench")
        results[client] = measure("-m", SAMPLER, args, env, seconds, base, sampling=False)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each measured run")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sampler-bench-") as folder:
        base = Path(folder)
        runs = sampler_runs(base, args.seconds)
        uploads = upload_client_runs(base, args.seconds)
        small = per_sample_us(base / "in-process", {})
        large = per_sample_us(base / "in-process-fake", fake_host(base / "fake2", 96, 8))
        health = gpu_health_runs(base, args.seconds)
        step_us, empty_us, step_cpu_us = step_cost(base / "steps")
        steps = per_step_us(base)
    print(f"sampler overhead, {os.cpu_count()} cores here, {args.seconds:.0f} s runs, each a child process (with what "
          "it runs): CPU (user + system) as % of one core while sampling, and over the whole run with start and "
          "stop; peak RSS")
    print(f"{'run':<48} {'sampling':>8} {'total':>9} {'peak RSS':>10}  vs the idle loop: CPU, RSS")
    print(row("idle loop, 100 ms cadence", runs["idle 100"]))
    print(row("sampler, 100 ms, this machine", runs["sampler 100"], runs["idle 100"]))
    print(row("idle loop, 500 ms cadence", runs["idle 500"]))
    print(row("sampler, 500 ms, this machine", runs["sampler 500"], runs["idle 500"]))
    print(row("sampler, 500 ms, 96 cores + 8 GPUs (simulated)", runs["fake 500"], runs["idle 500"]))
    print(row("sampler, 500 ms, boto3 upload client loaded", uploads["boto3"], runs["idle 500"]))
    print(row("sampler, 500 ms, stdlib upload client loaded", uploads["stdlib"], runs["idle 500"]))
    if health:
        print(row("sampler, 100 ms, 8 GPUs with health fields (NVML)", health["run"], runs["idle 100"]))
    print(f"one sample in-process: {small:.0f} us on this machine, {large:.0f} us with 96 cores + 8 GPUs (simulated)")
    print(f"step(): {step_us:.2f} us per call on the training thread against {empty_us:.2f} us for an empty with "
          f"({step_us / max(empty_us, 1e-9):.1f} x, +{step_us - empty_us:.2f} us); {step_cpu_us:.2f} us of process CPU "
          "per call with the writer thread")
    if health:
        added = health["health_us"] - health["plain_us"]
        print(f"8 GPUs through NVML, one sample: {health['plain_us']:.0f} us utilisation only, {health['health_us']:.0f} "
              f"us with the health fields (+{added:.0f} us = {added / 1000:.2f} % of one core at 100 ms)")
    print(f"per step in-process: bare loop {steps['bare']:.2f} us; step() {steps['step']:.1f} us; step() + 2 phase() "
          f"{steps['phase']:.1f} us (+{(steps['phase'] - steps['step']) / 2:.1f} us per phase); wrap(loader) + step() "
          f"{steps['wrap']:.1f} us (+{steps['wrap'] - steps['step']:.1f} us per batch)")
    for name, usage in (("sampler, 100 ms", runs["sampler 100"]), ("8 GPUs + health, 100 ms", health.get("run"))):
        if usage is None:
            continue
        met = usage.cpu_pct <= CPU_TARGET_PCT and usage.rss_mb <= RSS_TARGET_MB
        print(f"targets for {name}: CPU <= {CPU_TARGET_PCT:.0f} % of one core ({usage.cpu_pct:.2f} %), RSS <= "
              f"{RSS_TARGET_MB:.0f} MB ({usage.rss_mb:.1f} MB): {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
