"""One analysis window's data, aggregated once while the files stream by and shared by every rule.

The managed rules each walk the raw records of a window; here a single pass groups them into the shapes the rules
need (per-GPU value lists, per-timestamp sums, timestamp runs for the bottleneck snapshots), which is what keeps the
evaluation close to the cost of merely decoding the files.
"""

from __future__ import annotations

import math
from typing import Any

from .columns import column_from_state, column_state
from .readers import TraceEvent

# OverallSystemUsage's metric groups, in the order of its report.
USAGE_METRICS = ("Network", "GPU", "CPU", "CPU memory", "GPU memory", "I/O")
# The sampler's per-GPU health dimensions (runtime/sampler/gpu_health.py), kept per node and GPU for GPUHealth.
GPU_HEALTH_DIMENSIONS = frozenset({"GPUPowerDraw", "GPUPowerLimit", "GPUSMClock", "GPUMemoryClock", "GPUTemperature",
                                   "GPUThrottleReasons", "GPUXid", "GPUEccUncorrected", "GPURemappedRowsPending",
                                   "GPURemappedRowsFailure"})


class SystemWindow:
    """System records of window ``[start_us, end_us]`` (both ends inclusive, like the reference reader)."""

    __slots__ = (
        "index",
        "start_us",
        "end_us",
        "gpu_util",
        "gpu_mem",
        "health",
        "cpu_names",
        "gpu_names",
        "sums",
        "runs",
        "min_ts",
        "max_ts",
        "records",
        "_run",
    )

    def __init__(self, index: int, start_us: int, end_us: int):
        self.index = index
        self.start_us = start_us
        self.end_us = end_us
        self.gpu_util: dict[str, dict[str, list[float]]] = {}
        self.gpu_mem: dict[str, dict[str, list[float]]] = {}
        # node -> gpu -> health dimension -> values
        self.health: dict[str, dict[str, dict[str, list[float]]]] = {}
        self.cpu_names: set[str] = set()
        self.gpu_names: set[str] = set()
        # metric -> node -> {timestamp: sum of values}, insertion ordered like the reference's dicts
        self.sums: dict[str, dict[str, dict[float, float]]] = {m: {} for m in USAGE_METRICS}
        # consecutive records of one node and timestamp:
        # [timestamp, gpu utilisation values, cpu values, io-wait values, gpu memory values, node]; the cpu and io-wait
        # values of a node shard's partial window come reduced (columns.Column)
        self.runs: list[list[Any]] = []
        self.min_ts: float | None = None
        self.max_ts: float | None = None
        self.records = 0
        self._run: list[Any] | None = None

    def add(self, records: list[dict[str, Any]], lo: float = -math.inf, hi: float = math.inf) -> list[dict[str, Any]]:
        """Add, in file order, the records with ``lo <= Timestamp <= hi`` (seconds); return the others, plus those exactly
        on ``lo`` or ``hi``, which a neighbouring window reads as well. Records come validated from the reader; the hot
        loop touches each once, and per-timestamp sums are taken later from the runs, at C speed."""
        outside: list[dict[str, Any]] = []
        if not records:
            return outside
        gpu_util, gpu_mem, cpu_names, gpu_names = self.gpu_util, self.gpu_mem, self.cpu_names, self.gpu_names
        s_net, s_mem = self.sums["Network"], self.sums["CPU memory"]
        runs, run = self.runs, self._run
        run_ts, run_node = (run[0], run[5]) if run else (None, None)
        seen_ts = low = high = None
        inside = edge = False
        added = 0
        for r in records:
            ts = r["Timestamp"]
            if ts != seen_ts:
                seen_ts = ts
                inside = lo <= ts <= hi
                edge = ts == lo or ts == hi
            if not inside:
                outside.append(r)
                continue
            if edge:
                outside.append(r)
            node = r["NodeId"]
            if ts != run_ts or node != run_node:
                run = [ts, [], [], [], [], node]
                runs.append(run)
                run_ts, run_node = ts, node
                if low is None or ts < low:
                    low = ts
                if high is None or ts > high:
                    high = ts
            added += 1
            dim = r["Dimension"]
            if dim == "CPUUtilization":
                run[2].append(r["Value"])
                cpu_names.add(r["Name"])
            elif dim == "I/OWaitPercentage":
                run[3].append(r["Value"])
            elif dim == "GPUUtilization":
                v = r["Value"]
                run[1].append(v)
                name = r["Name"]
                gpu_names.add(name)
                gpu_util.setdefault(node, {}).setdefault(name, []).append(v)
            elif dim == "GPUMemoryUtilization":
                v = r["Value"]
                run[4].append(v)
                gpu_mem.setdefault(node, {}).setdefault(r["Name"], []).append(v)
            elif dim in GPU_HEALTH_DIMENSIONS:
                self.health.setdefault(node, {}).setdefault(r["Name"], {}).setdefault(dim, []).append(r["Value"])
            elif dim == "Algorithm":
                d = s_net.setdefault(node, {})
                d[ts] = d.get(ts, 0.0) + r["Value"]
            elif r["Name"] == "MemoryUsedPercent":
                d = s_mem.setdefault(node, {})
                d[ts] = d.get(ts, 0.0) + r["Value"]
        self._added(run, added, low, high)
        return outside

    def _added(self, run: list[Any] | None, added: int, low: float | None, high: float | None) -> None:
        self._run = run
        self.records += added
        if low is not None and high is not None:
            self.min_ts = low if self.min_ts is None or low < self.min_ts else self.min_ts
            self.max_ts = high if self.max_ts is None or high > self.max_ts else self.max_ts

    def finalize(self) -> None:
        """Per-node, per-timestamp sums of the run values, accumulated in event order like the reference's dicts."""
        sums = self.sums
        columns = (("GPU", 1), ("CPU", 2), ("I/O", 3), ("GPU memory", 4))
        for run in self.runs:
            ts, node = run[0], run[5]
            for metric, column in columns:
                values = run[column]
                if values:
                    d = sums[metric].setdefault(node, {})
                    d[ts] = sum(values, d.get(ts, 0.0))
        for metric in ("GPU", "CPU", "I/O", "GPU memory"):
            for node in list(sums["CPU"]) + list(sums["GPU"]):
                sums[metric].setdefault(node, {})

    # ---- persistence between Lambda runs (a window can be half filled when a run ends)
    def to_state(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "start_us": self.start_us,
            "end_us": self.end_us,
            "gpu_util": self.gpu_util,
            "gpu_mem": self.gpu_mem,
            "health": self.health,
            "cpu_names": sorted(n for n in self.cpu_names if n is not None),
            "gpu_names": sorted(n for n in self.gpu_names if n is not None),
            "sums": {m: {node: list(d.items()) for node, d in self.sums[m].items()} for m in ("Network", "CPU memory")},
            "runs": [[r[0], r[1], column_state(r[2]), column_state(r[3]), r[4], r[5]] for r in self.runs],
            "min_ts": self.min_ts,
            "max_ts": self.max_ts,
            "records": self.records,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SystemWindow:
        w = cls(state["index"], state["start_us"], state["end_us"])
        # copies: the window keeps growing and must never write through into the state it was loaded from
        w.gpu_util = {node: {gpu: list(v) for gpu, v in gpus.items()} for node, gpus in state["gpu_util"].items()}
        w.gpu_mem = {node: {gpu: list(v) for gpu, v in gpus.items()} for node, gpus in state["gpu_mem"].items()}
        w.health = {node: {gpu: {d: list(v) for d, v in dims.items()} for gpu, dims in gpus.items()}
                    for node, gpus in state.get("health", {}).items()}
        w.cpu_names = set(state["cpu_names"])
        w.gpu_names = set(state["gpu_names"])
        for m, nodes in state["sums"].items():
            w.sums[m] = {node: {float(t): v for t, v in pairs} for node, pairs in nodes.items()}
        w.runs = [[run[0], list(run[1]), column_from_state(run[2]), column_from_state(run[3]), list(run[4]), run[5]]
                  for run in state["runs"]]
        w.min_ts = state["min_ts"]
        w.max_ts = state["max_ts"]
        w.records = state["records"]
        w._run = w.runs[-1] if w.runs else None
        return w


class WindowContext:
    """What a rule sees for one window."""

    __slots__ = ("index", "start_us", "end_us", "origin_us", "system", "framework", "in_report")

    def __init__(
        self,
        index: int,
        start_us: int,
        end_us: int,
        origin_us: int,
        system: SystemWindow,
        framework: list[TraceEvent],
        in_report: bool,
    ):
        self.index = index
        self.start_us = start_us
        self.end_us = end_us
        self.origin_us = origin_us
        self.system = system
        self.framework = framework
        self.in_report = in_report
