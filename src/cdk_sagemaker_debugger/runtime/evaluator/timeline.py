"""Down-sampled time series for the HTML report, collected as windows close so the raw records can be dropped."""

from __future__ import annotations

from typing import Any

from .readers import TraceEvent
from .rules import STEP_MARKER
from .window import SystemWindow

BUCKETS_PER_WINDOW = 6
MAX_POINTS = 1500
MAX_STEPS = 5000


def _append(series: list[list[float]], point: list[float]) -> None:
    series.append(point)
    if len(series) > MAX_POINTS:
        # halve the resolution: average neighbouring points
        merged = [[(a[0] + b[0]) / 2, (a[1] + b[1]) / 2] for a, b in zip(series[0::2], series[1::2], strict=False)]
        if len(series) % 2:
            merged.append(series[-1])
        series[:] = merged


def _chunk_means(values: list[float], chunks: int) -> list[tuple[int, float]]:
    n = len(values)
    out = []
    for i in range(chunks):
        lo, hi = i * n // chunks, (i + 1) * n // chunks
        if hi > lo:
            out.append((i, sum(values[lo:hi]) / (hi - lo)))
    return out


class Timeline:
    def __init__(self) -> None:
        # kind -> node -> device -> [[epoch seconds, value], ...]
        self.series: dict[str, dict[str, dict[str, list[list[float]]]]] = {"gpu": {}, "gpu_memory": {}, "cpu": {}}
        self.cores: set[str] = set()
        self.steps: list[list[Any]] = []  # [end seconds, duration seconds, node, phase, step]
        self.step_count = 0

    def add_window(self, system: SystemWindow, framework: list[TraceEvent]) -> None:
        span = (system.end_us - system.start_us) / 1e6
        start = system.start_us / 1e6
        width = span / BUCKETS_PER_WINDOW
        for kind, source in (("gpu", system.gpu_util), ("gpu_memory", system.gpu_mem)):
            for node, devices in source.items():
                per_node = self.series[kind].setdefault(node, {})
                for device, values in devices.items():
                    series = per_node.setdefault(device, [])
                    for i, mean in _chunk_means(values, BUCKETS_PER_WINDOW):
                        _append(series, [start + (i + 0.5) * width, mean])
        self.cores |= {n for n in system.cpu_names if n is not None}
        cores = max(len(self.cores), 1)
        for node, sums in system.sums["CPU"].items():
            buckets: dict[int, list[float]] = {}
            for ts, total in sums.items():
                i = min(max(int((ts - start) / width), 0), BUCKETS_PER_WINDOW - 1)
                buckets.setdefault(i, []).append(total / cores)
            series = self.series["cpu"].setdefault(node, {}).setdefault("all cores", [])
            for i in sorted(buckets):
                values = buckets[i]
                _append(series, [start + (i + 0.5) * width, sum(values) / len(values)])
        for ev in framework:
            if STEP_MARKER in ev.name:
                self.step_count += 1
                if len(self.steps) < MAX_STEPS:
                    self.steps.append([ev.end_us / 1e6, (ev.end_us - ev.start_us) / 1e6, ev.node, ev.name,
                                       str(ev.args.get("step_num"))])

    def to_state(self) -> dict[str, Any]:
        return {"series": self.series, "cores": sorted(self.cores), "steps": self.steps, "step_count": self.step_count}

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> Timeline:
        t = cls()
        if state:
            t.series = state["series"]
            t.cores = set(state["cores"])
            t.steps = state["steps"]
            t.step_count = state["step_count"]
        return t
