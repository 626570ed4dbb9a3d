"""One analysis window's data, aggregated once while the files stream by and shared by every rule.

The managed rules each walk the raw records of a window; here a single pass groups them into the shapes the rules
need (per-GPU value lists, per-timestamp sums, timestamp runs for the bottleneck snapshots), which is what keeps the
evaluation close to the cost of merely decoding the files.
"""

from __future__ import annotations

from typing import Any

from .readers import TraceEvent

# OverallSystemUsage's metric groups, in the order of its report.
USAGE_METRICS = ("Network", "GPU", "CPU", "CPU memory", "GPU memory", "I/O")


class SystemWindow:
    """System records of window ``[start_us, end_us]`` (both ends inclusive, like the reference reader)."""

    __slots__ = (
        "index",
        "start_us",
        "end_us",
        "gpu_util",
        "gpu_mem",
        "cpu_names",
        "gpu_names",
        "sums",
        "runs",
        "min_ts",
        "max_ts",
        "records",
        "_last_ts",
        "_run",
    )

    def __init__(self, index: int, start_us: int, end_us: int):
        self.index = index
        self.start_us = start_us
        self.end_us = end_us
        self.gpu_util: dict[str, dict[str, list[float]]] = {}
        self.gpu_mem: dict[str, dict[str, list[float]]] = {}
        self.cpu_names: set[str] = set()
        self.gpu_names: set[str] = set()
        # metric -> node -> {timestamp: sum of values}, insertion ordered like the reference's dicts
        self.sums: dict[str, dict[str, dict[float, float]]] = {m: {} for m in USAGE_METRICS}
        # consecutive records with one timestamp: [timestamp, gpu utilisation values, cpu values, io-wait values]
        self.runs: list[list[Any]] = []
        self.min_ts: float | None = None
        self.max_ts: float | None = None
        self.records = 0
        self._last_ts: float | None = None
        self._run: list[Any] | None = None

    def add(self, records: list[dict[str, Any]]) -> None:
        """Add records (already known to fall inside this window) in file order."""
        if not records:
            return
        gpu_util = self.gpu_util
        gpu_mem = self.gpu_mem
        sums = self.sums
        s_net, s_gpu, s_cpu = sums["Network"], sums["GPU"], sums["CPU"]
        s_mem, s_gmem, s_io = sums["CPU memory"], sums["GPU memory"], sums["I/O"]
        runs = self.runs
        last_ts = self._last_ts
        run = self._run
        cpu_names = self.cpu_names
        gpu_names = self.gpu_names
        node = None
        n_cpu = n_gpu = n_gmem = n_mem = n_net = n_io = None
        lo = hi = records[0]["Timestamp"]
        for r in records:
            ts = r["Timestamp"]
            if ts != last_ts:
                run = [ts, [], [], []]
                runs.append(run)
                last_ts = ts
                if ts < lo:
                    lo = ts
                elif ts > hi:
                    hi = ts
            rnode = r.get("NodeId")
            if rnode != node:
                node = rnode
                n_cpu = s_cpu.setdefault(node, {})
                n_gpu = s_gpu.setdefault(node, {})
                n_gmem = s_gmem.setdefault(node, {})
                n_mem = s_mem.setdefault(node, {})
                n_net = s_net.setdefault(node, {})
                n_io = s_io.setdefault(node, {})
            dim = r["Dimension"]
            v = r["Value"]
            if dim == "CPUUtilization":
                run[2].append(v)
                n_cpu[ts] = n_cpu.get(ts, 0.0) + v
                cpu_names.add(r.get("Name"))
            elif dim == "I/OWaitPercentage":
                run[3].append(v)
                n_io[ts] = n_io.get(ts, 0.0) + v
            elif dim == "GPUUtilization":
                run[1].append(v)
                n_gpu[ts] = n_gpu.get(ts, 0.0) + v
                name = r.get("Name")
                gpu_names.add(name)
                gpu_util.setdefault(node, {}).setdefault(name, []).append(v)
            elif dim == "GPUMemoryUtilization":
                n_gmem[ts] = n_gmem.get(ts, 0.0) + v
                name = r.get("Name")
                gpu_mem.setdefault(node, {}).setdefault(name, []).append(v)
            elif dim == "Algorithm":
                n_net[ts] = n_net.get(ts, 0.0) + v
            elif r.get("Name") == "MemoryUsedPercent":
                n_mem[ts] = n_mem.get(ts, 0.0) + v
        self._last_ts = last_ts
        self._run = run
        self.records += len(records)
        self.min_ts = lo if self.min_ts is None or lo < self.min_ts else self.min_ts
        self.max_ts = hi if self.max_ts is None or hi > self.max_ts else self.max_ts

    # ---- persistence between Lambda runs (a window can be half filled when a run ends)
    def to_state(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "start_us": self.start_us,
            "end_us": self.end_us,
            "gpu_util": self.gpu_util,
            "gpu_mem": self.gpu_mem,
            "cpu_names": sorted(n for n in self.cpu_names if n is not None),
            "gpu_names": sorted(n for n in self.gpu_names if n is not None),
            "sums": {m: {node: list(d.items()) for node, d in nodes.items()} for m, nodes in self.sums.items()},
            "runs": self.runs,
            "min_ts": self.min_ts,
            "max_ts": self.max_ts,
            "records": self.records,
            "last_ts": self._last_ts,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SystemWindow:
        w = cls(state["index"], state["start_us"], state["end_us"])
        # copies: the window keeps growing and must never write through into the state it was loaded from
        w.gpu_util = {node: {gpu: list(v) for gpu, v in gpus.items()} for node, gpus in state["gpu_util"].items()}
        w.gpu_mem = {node: {gpu: list(v) for gpu, v in gpus.items()} for node, gpus in state["gpu_mem"].items()}
        w.cpu_names = set(state["cpu_names"])
        w.gpu_names = set(state["gpu_names"])
        w.sums = {m: {node: dict((float(t), v) for t, v in pairs) for node, pairs in nodes.items()}
                  for m, nodes in state["sums"].items()}
        w.runs = [[run[0], list(run[1]), list(run[2]), list(run[3])] for run in state["runs"]]
        w.min_ts = state["min_ts"]
        w.max_ts = state["max_ts"]
        w.records = state["records"]
        w._last_ts = state["last_ts"]
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
