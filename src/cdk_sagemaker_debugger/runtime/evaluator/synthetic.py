"""Write a synthetic ``profiler-output/`` tree in the real layout: for tests, benchmarks and trying the CLI offline.

System files hold one minute per node (named by the minute's epoch seconds, in UTC hour folders); each sample writes
the cpu, gpu, memory, i/o and network groups with timestamps a few milliseconds apart, as the profiler agent does.
Framework traces are Chrome-trace arrays named by the end time of their last event.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# value(node index, device index, sample index, seconds since start) -> percent
Signal = Callable[[int, int, int, float], float]


def constant(value: float) -> Signal:
    return lambda node, device, sample, t: value


def hour_folder(epoch_seconds: float) -> str:
    return time.strftime("%Y%m%d%H", time.gmtime(epoch_seconds))


@dataclass
class StepSpec:
    """Training steps written to the python timeline (one file per node per minute, rank 0)."""

    first_step_s: float = 30.0  # seconds after the job start
    duration_s: float = 0.5
    gap_s: float = 0.05
    count: int = 200
    phase: str = "Step:ModeKeys.TRAIN"
    slow_steps: dict[int, float] = field(default_factory=dict)  # step number -> duration override


@dataclass
class DataloaderSpec:
    """PyTorch DataLoader events: ``workers`` parallel pids, each loading a batch every ``every_s`` seconds."""

    workers: int = 2
    every_s: float = 0.5
    duration_s: float = 0.1
    num_workers: int = 2
    pin_memory: bool = True


@dataclass
class JobSpec:
    nodes: int = 1
    minutes: int = 5
    gpus: int = 8
    cores: int = 96
    interval_ms: int = 100
    start: int = 1_764_400_020  # a minute boundary (epoch seconds)
    gpu_util: Signal = field(default_factory=lambda: constant(85.0))
    gpu_memory: Signal = field(default_factory=lambda: constant(40.0))
    cpu_util: Signal = field(default_factory=lambda: constant(35.0))
    io_wait: Signal = field(default_factory=lambda: constant(1.0))
    memory_used: Signal = field(default_factory=lambda: constant(12.0))
    network: Signal = field(default_factory=lambda: constant(1000.0))
    partial_last_minute_s: float = 20.0  # the last file of a job is usually partial
    steps: StepSpec | None = None
    dataloader: DataloaderSpec | None = None
    end_marker: bool = True


# group offsets within one sample, as observed in real files
_OFFSETS = {"i/o": 0.008990, "cpu": 0.009090, "memory": 0.009163, "gpu": 0.010120, "network": 0.013693}


def _fmt(value: float) -> str:
    return repr(round(float(value), 2))


def _add_sample(add: Callable[[str], None], spec: JobSpec, node_index: int, sample: int, base: float) -> None:
    """One sample of every group on one node, each group at its observed offset from ``base`` (epoch seconds)."""
    node = f"algo-{node_index + 1}"
    t = base - spec.start
    ts = repr(round(base + _OFFSETS["i/o"], 6))
    add(f'{{"Type":"i/o","Name":"IOPS","Dimension":"","Value":120.0,"NodeId":"{node}","Timestamp":{ts}}}')
    add(f'{{"Type":"i/o","Name":"ReadThroughputInBytesPerSecond","Dimension":"","Value":5000.0,'
        f'"NodeId":"{node}","Timestamp":{ts}}}')
    add(f'{{"Type":"i/o","Name":"WriteThroughputInBytesPerSecond","Dimension":"","Value":700.0,'
        f'"NodeId":"{node}","Timestamp":{ts}}}')
    ts = repr(round(base + _OFFSETS["cpu"], 6))
    for c in range(spec.cores):
        add(f'{{"Type":"cpu","Name":"cpu{c}","Dimension":"CPUUtilization",'
            f'"Value":{_fmt(spec.cpu_util(node_index, c, sample, t))},"NodeId":"{node}","Timestamp":{ts}}}')
    for c in range(spec.cores):
        add(f'{{"Type":"cpu","Name":"cpu{c}","Dimension":"I/OWaitPercentage",'
            f'"Value":{_fmt(spec.io_wait(node_index, c, sample, t))},"NodeId":"{node}","Timestamp":{ts}}}')
    ts = repr(round(base + _OFFSETS["memory"], 6))
    add(f'{{"Type":"memory","Name":"MemoryUsedPercent","Dimension":"",'
        f'"Value":{_fmt(spec.memory_used(node_index, 0, sample, t))},"NodeId":"{node}","Timestamp":{ts}}}')
    if spec.gpus:
        ts = repr(round(base + _OFFSETS["gpu"], 6))
        for g in range(spec.gpus):
            add(f'{{"Type":"gpu","Name":"gpu{g}","Dimension":"GPUUtilization",'
                f'"Value":{_fmt(spec.gpu_util(node_index, g, sample, t))},"NodeId":"{node}",'
                f'"Timestamp":{ts}}}')
        for g in range(spec.gpus):
            add(f'{{"Type":"gpu","Name":"gpu{g}","Dimension":"GPUMemoryUtilization",'
                f'"Value":{_fmt(spec.gpu_memory(node_index, g, sample, t))},"NodeId":"{node}",'
                f'"Timestamp":{ts}}}')
    ts = repr(round(base + _OFFSETS["network"], 6))
    net = _fmt(spec.network(node_index, 0, sample, t))
    add(f'{{"Type":"network","Name":"ReceiveBytesPerSecond","Dimension":"Algorithm","Value":{net},'
        f'"NodeId":"{node}","Timestamp":{ts}}}')
    add(f'{{"Type":"network","Name":"TransmitBytesPerSecond","Dimension":"Algorithm","Value":{net},'
        f'"NodeId":"{node}","Timestamp":{ts}}}')
    add(f'{{"Type":"network","Name":"ReceiveBytesPerSecond","Dimension":"Platform","Value":1.0,'
        f'"NodeId":"{node}","Timestamp":{ts}}}')


def write_system(root: Path, spec: JobSpec) -> list[Path]:
    """Write the system minute files; returns their paths."""
    paths = []
    step = spec.interval_ms / 1000.0
    per_minute = int(round(60.0 / step))
    total_minutes = spec.minutes + (1 if spec.partial_last_minute_s > 0 else 0)
    for node_index in range(spec.nodes):
        node = f"algo-{node_index + 1}"
        sample = 0
        for minute in range(total_minutes):
            minute_start = spec.start + 60 * minute
            folder = root / "system" / "incremental" / hour_folder(minute_start)
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{minute_start}.{node}.json"
            samples = per_minute if minute < spec.minutes else int(spec.partial_last_minute_s / step)
            lines: list[str] = []
            add = lines.append
            skew = 0.0031 * node_index  # each node's agent samples on its own clock
            for i in range(samples):
                _add_sample(add, spec, node_index, sample, minute_start + i * step + skew)
                sample += 1
            path.write_text("\n".join(lines) + "\n" if lines else "")
            paths.append(path)
    if spec.end_marker:
        (root / "system" / "training_job_end.ts").write_text("")
    return paths


def _trace_file(root: Path, node_token: str, suffix: str, events: list[dict[str, Any]], origin_us: int,
                phases: dict[int, str]) -> Path:
    end_us = max(origin_us + e["ts"] + e.get("dur", 0) for e in events)
    folder = root / "framework" / "pevents" / hour_folder(end_us / 1e6)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{end_us}_{node_token}_{suffix}"
    lines = ['[', json.dumps({"name": "process_name", "ph": "M", "pid": 0,
                              "args": {"start_time_since_epoch_in_micros": origin_us}}) + ","]
    for pid, phase in phases.items():
        lines.append(json.dumps({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": phase}}) + ",")
    lines += [json.dumps(e) + "," for e in events]
    lines[-1] = lines[-1].rstrip(",")
    lines.append("]")
    path.write_text("\n".join(lines) + "\n")
    return path


def write_framework(root: Path, spec: JobSpec) -> list[Path]:
    """Python-timeline step events and DataLoader events, rotated into one file per node per minute."""
    paths: list[Path] = []
    origin_us = spec.start * 1_000_000
    for node_index in range(spec.nodes):
        token = f"0-algo-{node_index + 1}"
        by_minute: dict[int, list[dict[str, Any]]] = {}
        phases: dict[int, str] = {}
        if spec.steps:
            s = spec.steps
            phases[1] = s.phase
            t = s.first_step_s
            for n in range(s.count):
                dur = s.slow_steps.get(n, s.duration_s)
                ev = {"name": s.phase, "pid": 1, "ph": "X", "ts": int(t * 1e6), "dur": int(dur * 1e6),
                      "args": {"pid": 4242, "step_num": str(n)}}
                by_minute.setdefault(int((t + dur) // 60), []).append(ev)
                t += dur + s.gap_s
        if spec.dataloader:
            d = spec.dataloader
            phases[2] = "DataLoaderIterInitialize"
            phases[3] = "DataLoaderWorker"
            by_minute.setdefault(0, []).append({"name": "DataLoaderIterInitialize", "pid": 2, "ph": "X", "ts": 1000,
                                                "dur": 100, "args": {"pin_memory": d.pin_memory,
                                                                     "num_workers": d.num_workers}})
            t = 1.0
            while t + d.duration_s < spec.minutes * 60:
                for w in range(d.workers):
                    ev = {"name": "DataLoaderWorker", "pid": 3, "ph": "X", "ts": int(t * 1e6),
                          "dur": int(d.duration_s * 1e6), "args": {"pid": 9000 + w}}
                    by_minute.setdefault(int((t + d.duration_s) // 60), []).append(ev)
                t += d.every_s
        for minute in sorted(by_minute):
            events = sorted(by_minute[minute], key=lambda e: e["ts"] + e.get("dur", 0))
            paths.append(_trace_file(root, token, "pythontimeline.json", events, origin_us, phases))
    if spec.end_marker and (spec.steps or spec.dataloader):
        (root / "framework").mkdir(parents=True, exist_ok=True)
        (root / "framework" / "training_job_end.ts").write_text("")
    return paths


def write_job(root: str | Path, spec: JobSpec) -> Path:
    """Write a whole ``profiler-output/`` tree under ``root`` and return it."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    write_system(root, spec)
    if spec.steps or spec.dataloader:
        write_framework(root, spec)
    return root
