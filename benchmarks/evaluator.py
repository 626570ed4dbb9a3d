"""Benchmark of the rule evaluator on a realistic job, against baselines run in the same process.

    python benchmarks/evaluator.py [--nodes 1] [--minutes 60] [--root DIR] [--skip-smdebug]

Writes a job in the real S3 layout (8 GPUs, 96 cores, 100 ms sampling per node) to local disk, then prints:
  * the parse-only floor: reading and JSON-decoding every file once and nothing else;
  * the full ProfilerReport evaluation (all eleven rules, report JSONs and the HTML report rendered);
  * their ratio (target: at most 2x) and records per second;
  * peak RSS of the process after the floor and the evaluation (target: under 256 MB at 1 node x 60 minutes);
  * the smdebug-like approach for comparison: every 60-second window re-reads and re-decodes its +-3 minutes of files
    line by line and filters them by time (without evaluating any rule), as the managed rules' readers do.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from cdk_sagemaker_debugger.runtime.evaluator.engine import RuleConfig, evaluate_store
from cdk_sagemaker_debugger.runtime.evaluator.html_report import render
from cdk_sagemaker_debugger.runtime.evaluator.readers import ParseStats, parse_system_key, parse_system_lines
from cdk_sagemaker_debugger.runtime.evaluator.report import report_files
from cdk_sagemaker_debugger.runtime.evaluator.storage import LocalStore
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import JobSpec, StepSpec, write_job


def realistic(nodes: int, minutes: int) -> JobSpec:
    """Busy but imperfect training: GPUs mostly high with dips, CPUs moderate, memory creeping up, 0.3 s steps."""

    def gpu(node: int, device: int, sample: int, t: float) -> float:
        return 15.0 if (sample // 50) % 9 == 0 else 80.0 + (sample * 7 + device * 13) % 20

    def memory(node: int, device: int, sample: int, t: float) -> float:
        return min(95.0, 30.0 + t / 120.0 + device % 3)

    def cpu(node: int, core: int, sample: int, t: float) -> float:
        return float((sample * 31 + core * 17) % 100)

    def io(node: int, core: int, sample: int, t: float) -> float:
        return float((sample + core) % 7)

    steps = StepSpec(first_step_s=45.0, duration_s=0.3, gap_s=0.02, count=int((minutes * 60 - 60) / 0.32))
    return JobSpec(nodes=nodes, minutes=minutes, gpus=8, cores=96, interval_ms=100, gpu_util=gpu, gpu_memory=memory,
                   cpu_util=cpu, io_wait=io, steps=steps)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def parse_only(root: Path) -> tuple[float, int]:
    """Read and decode every file once (the same decoding the evaluator uses), nothing else."""
    store = LocalStore(root)
    stats = ParseStats()
    records = 0
    start = time.perf_counter()
    for obj in store.list("system/"):
        if parse_system_key(obj.key):
            records += len(parse_system_lines(store.read(obj.key), obj.key, stats))
    for obj in store.list("framework/pevents/"):
        records += len(json.loads(store.read(obj.key)))
    return time.perf_counter() - start, records


def full_evaluation(root: Path, out: Path) -> tuple[float, int, int]:
    start = time.perf_counter()
    evaluator = evaluate_store(LocalStore(root), [RuleConfig("ProfilerReport", "ProfilerReport", {})], read_workers=1)
    results = evaluator.results(final=True)
    out.mkdir(parents=True, exist_ok=True)
    for relative, text in report_files(results).items():
        (out / relative).parent.mkdir(parents=True, exist_ok=True)
        (out / relative).write_text(text)
    (out / "profiler-report.html").write_text(
        render(results, evaluator.timeline, evaluator.diagnostics(), title="benchmark", source=str(root)))
    elapsed = time.perf_counter() - start
    return elapsed, evaluator.windows_evaluated, evaluator.stats.records


def smdebug_like(root: Path, windows: int) -> float:
    """Per window, re-read the system files from the last one at or before start-3min to the first at or after
    end+3min, decode them line by line and keep the records inside the window."""
    files = sorted((f.timestamp_us, str(p)) for p in (root / "system").rglob("*.json")
                   if (f := parse_system_key(p.relative_to(root).as_posix())))
    stamps = sorted({ts for ts, _ in files})
    origin = stamps[0]
    start = time.perf_counter()
    for k in range(windows):
        s, e = origin + k * 60_000_000, origin + (k + 1) * 60_000_000
        lo, hi = s - 180_000_000, e + 180_000_000
        first = max((t for t in stamps if t <= lo), default=stamps[0])
        last = min((t for t in stamps if t >= hi), default=stamps[-1])
        kept = 0
        for ts, path in files:
            if first <= ts <= last:
                with open(path, "rb") as fh:
                    for line in fh.read().split(b"\n"):
                        if line:
                            record = json.loads(line)
                            if s <= record["Timestamp"] * 1e6 <= e:
                                kept += 1
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--root", help="where to write the job (default: a temporary folder, removed afterwards)")
    parser.add_argument("--skip-smdebug", action="store_true", help="skip the slow smdebug-like comparison")
    args = parser.parse_args(argv)

    base = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="evaluator-bench-"))
    root = base / "profiler-output"
    try:
        t0 = time.perf_counter()
        if not (root / "system").exists():
            write_job(root, realistic(args.nodes, args.minutes))
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        print(f"job: {args.nodes} node(s) x {args.minutes} min, 8 GPUs, 96 cores, 100 ms: "
              f"{size / 1e6:.0f} MB (written in {time.perf_counter() - t0:.1f} s)")
        baseline_rss = peak_rss_mb()

        floor_s, floor_records = parse_only(root)
        eval_s, windows, records = full_evaluation(root, base / "out")
        rss = peak_rss_mb()
        print(f"parse-only floor:            {floor_s:8.2f} s  ({floor_records / floor_s:,.0f} records/s)")
        print(f"ProfilerReport evaluation:   {eval_s:8.2f} s  ({records / eval_s:,.0f} records/s, {windows} windows)")
        print(f"evaluation / floor:          {eval_s / floor_s:8.2f} x   (target <= 2.00)")
        print(f"peak RSS:                    {rss:8.0f} MB  (interpreter and imports {baseline_rss:.0f} MB; "
              f"target < 256 MB)")
        if not args.skip_smdebug:
            smdebug_s = smdebug_like(root, windows)
            print(f"smdebug-like re-reading:     {smdebug_s:8.2f} s  ({smdebug_s / eval_s:.1f} x the evaluation, "
                  f"{smdebug_s / floor_s:.1f} x the floor; parsing and filtering only, no rules)")
        ok = eval_s / floor_s <= 2.0 and rss < 256
        print("targets met" if ok else "TARGETS MISSED")
        return 0 if ok else 1
    finally:
        if not args.root:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
