"""One analysis window's data, aggregated once while the files stream by and shared by every rule.

The managed rules each walk the raw records of a window; here a single pass groups them into the shapes the rules
need (per-GPU value lists, per-timestamp sums, timestamp runs for the bottleneck snapshots), which is what keeps the
evaluation close to the cost of merely decoding the files.

An open window is kept as aggregates, not as the per-core values: each run of records of one node and timestamp is
reduced, as soon as the next run starts, to its per-timestamp sums (the built-in ``sum`` over the run's values in file
order, exactly what the rules read) and to the counts of values past the thresholds the configured rules test
(``WindowTests``). Only the run still being read keeps its values. So an open window of a 192-core node holds a few
numbers per timestamp instead of 384 values, in memory and in the state a Lambda run carries over to the next.
"""

from __future__ import annotations

import math
from typing import Any

from .readers import TraceEvent

# OverallSystemUsage's metric groups, in the order of its report.
USAGE_METRICS = ("Network", "GPU", "CPU", "CPU memory", "GPU memory", "I/O")
# The sampler's per-GPU health dimensions (runtime/sampler/gpu_health.py), kept per node and GPU for GPUHealth.
GPU_HEALTH_DIMENSIONS = frozenset({"GPUPowerDraw", "GPUPowerLimit", "GPUSMClock", "GPUMemoryClock", "GPUTemperature",
                                   "GPUThrottleReasons", "GPUXid", "GPUEccUncorrected", "GPURemappedRowsPending",
                                   "GPURemappedRowsFailure"})
# The value columns of a run and the per-timestamp sum each one feeds: [timestamp, GPU, CPU, I/O wait, GPU memory, node].
RUN_COLUMNS = (("GPU", 1), ("CPU", 2), ("I/O", 3), ("GPU memory", 4))
GPU_COLUMN, CPU_COLUMN, IO_COLUMN, GPU_MEMORY_COLUMN = 1, 2, 3, 4
# column -> the (operator, limit) tests whose counts a closed run keeps: {2: ((">", 90),), 1: (("<", 10),)}
WindowTests = dict[int, tuple[tuple[str, int | float], ...]]


def numeric_limit(limit: Any) -> bool:
    return isinstance(limit, (int, float)) and not isinstance(limit, bool)


def window_tests(tests: list[tuple[int, str, Any]]) -> WindowTests:
    """The (column, operator, limit) tests of the configured rules, grouped by column, each once, numeric limits only
    (a rule whose limit is not a number fails when it asks for its count, as it failed comparing values before)."""
    grouped: dict[int, list[tuple[str, Any]]] = {}
    for column, op, limit in tests:
        if op not in (">", "<") or column not in (1, 2, 3, 4):
            raise ValueError(f"a window test is (column 1-4, '>' or '<', limit), not {(column, op, limit)!r}")
        found = grouped.setdefault(column, [])
        # told apart as the window looks them up (90 and 90.0 are two tests: each rule reads its own)
        if numeric_limit(limit) and _test_key(op, limit) not in {_test_key(*t) for t in found}:
            found.append((op, limit))
    return {column: tuple(found) for column, found in sorted(grouped.items())}


def _count(values: list[float], op: str, limit: float) -> int:
    if op == ">":
        return len([v for v in values if v > limit])
    return len([v for v in values if v < limit])


class SystemWindow:
    """System records of window ``[start_us, end_us]`` (both ends inclusive, like the reference reader)."""

    __slots__ = (
        "tests",
        "_test_index",
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

    def __init__(self, index: int, start_us: int, end_us: int, tests: WindowTests | None = None):
        self.tests: WindowTests = dict(tests or {})
        self._test_index = {column: {_test_key(op, limit): i + 1 for i, (op, limit) in enumerate(found)}
                            for column, found in self.tests.items()}
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
        # consecutive records of one node and timestamp, closed: [timestamp, gpu, cpu, io-wait, gpu memory, node] where
        # each value column is [how many values, count of each of the column's tests...]; see count()
        self.runs: list[list[Any]] = []
        self.min_ts: float | None = None
        self.max_ts: float | None = None
        self.records = 0
        # the run being read: [timestamp, gpu values, cpu values, io-wait values, gpu memory values, node]
        self._run: list[Any] | None = None

    def count(self, run: list[Any], column: int, op: str, limit: Any) -> int:
        """How many of a closed run's values in ``column`` are ``op`` (``">"`` or ``"<"``) ``limit``."""
        kept = run[column]
        if not kept[0]:
            return 0
        index = self._test_index.get(column, {}).get(_test_key(op, limit))
        if index is None:
            if not numeric_limit(limit):
                raise TypeError(f"'{op}' not supported between instances of 'float' and '{type(limit).__name__}'")
            raise KeyError(f"the window kept no count of column {column} values {op} {limit!r} (kept: "
                           f"{self.tests.get(column, ())}); the evaluator collects its rules' window_tests()")
        return int(kept[index])

    @staticmethod
    def values(run: list[Any], column: int) -> int:
        """How many values a closed run has in ``column``."""
        return int(run[column][0])

    def _close(self, run: list[Any]) -> None:
        """Reduce the run that was being read to its sums and counts (in file order, like the reference's dicts)."""
        ts, node = run[0], run[5]
        sums, tests = self.sums, self.tests
        closed: list[Any] = [ts, None, None, None, None, node]
        for metric, column in RUN_COLUMNS:
            values = run[column]
            if values:
                d = sums[metric].setdefault(node, {})
                d[ts] = sum(values, d.get(ts, 0.0))
                closed[column] = [len(values), *[_count(values, op, limit) for op, limit in tests.get(column, ())]]
            else:
                closed[column] = [0]
        self.runs.append(closed)

    def add(self, records: list[dict[str, Any]], lo: float = -math.inf, hi: float = math.inf) -> list[dict[str, Any]]:
        """Add, in file order, the records with ``lo <= Timestamp <= hi`` (seconds); return the others, plus those exactly
        on ``lo`` or ``hi``, which a neighbouring window reads as well. Records come validated from the reader; the hot
        loop touches each once, and per-timestamp sums are taken later from the runs, at C speed."""
        outside: list[dict[str, Any]] = []
        if not records:
            return outside
        gpu_util, gpu_mem, cpu_names, gpu_names = self.gpu_util, self.gpu_mem, self.cpu_names, self.gpu_names
        s_net, s_mem = self.sums["Network"], self.sums["CPU memory"]
        run = self._run
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
                if run is not None:
                    self._close(run)
                run = [ts, [], [], [], [], node]
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
        """Close the run being read; every node with CPU or GPU sums gets a (maybe empty) dict of each metric."""
        if self._run is not None:
            self._close(self._run)
            self._run = None
        sums = self.sums
        for metric in ("GPU", "CPU", "I/O", "GPU memory"):
            for node in list(sums["CPU"]) + list(sums["GPU"]):
                sums[metric].setdefault(node, {})

    # ---- persistence between Lambda runs (a window can be half filled when a run ends)
    def to_state(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "start_us": self.start_us,
            "end_us": self.end_us,
            "tests": [[column, [list(t) for t in found]] for column, found in self.tests.items()],
            "gpu_util": self.gpu_util,
            "gpu_mem": self.gpu_mem,
            "health": self.health,
            "cpu_names": sorted(n for n in self.cpu_names if n is not None),
            "gpu_names": sorted(n for n in self.gpu_names if n is not None),
            "sums": {m: {node: {"t": list(d), "v": list(d.values())} for node, d in self.sums[m].items()}
                     for m in USAGE_METRICS},
            "runs": self.runs,
            "open": self._run,
            "min_ts": self.min_ts,
            "max_ts": self.max_ts,
            "records": self.records,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], tests: WindowTests | None = None) -> SystemWindow:
        """``tests``: those of the evaluator, for a state written before windows kept their own."""
        saved = state.get("tests")
        if saved is not None:
            tests = {int(column): tuple((str(op), limit) for op, limit in found) for column, found in saved}
        w = cls(state["index"], state["start_us"], state["end_us"], tests)
        # copies: the window keeps growing and must never write through into the state it was loaded from
        w.gpu_util = {node: {gpu: list(v) for gpu, v in gpus.items()} for node, gpus in state["gpu_util"].items()}
        w.gpu_mem = {node: {gpu: list(v) for gpu, v in gpus.items()} for node, gpus in state["gpu_mem"].items()}
        w.health = {node: {gpu: {d: list(v) for d, v in dims.items()} for gpu, dims in gpus.items()}
                    for node, gpus in state.get("health", {}).items()}
        w.cpu_names = set(state["cpu_names"])
        w.gpu_names = set(state["gpu_names"])
        for m, nodes in state["sums"].items():
            w.sums[m] = {node: _sums_from_state(saved_sums) for node, saved_sums in nodes.items()}
        w.min_ts = state["min_ts"]
        w.max_ts = state["max_ts"]
        w.records = state["records"]
        if "open" in state:
            w.runs = [list(run) for run in state["runs"]]
            w._run = _open_run(state["open"]) if state["open"] else None
        else:  # written before runs were closed as they were read: close all but the last, in order
            runs = [_open_run(run) for run in state["runs"]]
            for run in runs[:-1]:
                w._close(run)
            w._run = runs[-1] if runs else None
        return w


def _open_run(run: list[Any]) -> list[Any]:
    return [run[0], list(run[1]), list(run[2]), list(run[3]), list(run[4]), run[5]]


def _sums_from_state(saved: dict[str, list[Any]] | list[list[Any]]) -> dict[float, float]:
    if isinstance(saved, dict):
        return dict(zip((float(t) for t in saved["t"]), saved["v"], strict=True))
    return {float(t): v for t, v in saved}  # the older [[timestamp, sum], ...] layout


def _test_key(op: str, limit: Any) -> str:
    return f"{op}{limit!r}"


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
