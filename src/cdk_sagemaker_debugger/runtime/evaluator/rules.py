"""The profiler rules, window by window, with the managed rules' semantics (see docs/evaluator.md for every deviation).

Each rule keeps cumulative state across windows and writes the same report object as the managed container:
``{"RuleTriggered", "Violations", "Details", "Datapoints", "RuleParameters"}`` in that key order.
"""

from __future__ import annotations

import ast
import math
from collections import deque
from typing import Any, ClassVar

from .codec import decode, encode, stateful
from .numerics import (
    box_plot,
    histogram,
    jensen_shannon_distance,
    load_balancing_bin,
    np_mean,
    np_std,
    quantile_sorted,
)
from .readers import TraceEvent
from .stats import ExactHistogram, key_sum
from .window import CPU_COLUMN, GPU_COLUMN, IO_COLUMN, USAGE_METRICS, WindowContext

MAX_DATAPOINTS = 1_000_000
STEP_MARKER = "Step:ModeKeys"
DATALOADER_PHASES = ("DataLoaderWorker", "DataLoaderIter")


class RuleConfigError(ValueError):
    """A rule name or parameter the evaluator cannot use."""


def coerce_parameter(value: Any) -> Any:
    """RuleParameters arrive as strings ("70", "0.2", "None", "True"); turn them back into Python values. The CLI's
    ``--rule Name:param=value`` values too, where ``true`` and ``false`` are written lower case."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text == "None":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    if text in ("True", "False", "true", "false"):
        return text in ("True", "true")
    return text


def format_parameter(value: Any) -> str:
    return str(value)


class Facts:
    """What the job produced, collected over the whole evaluation; decides "not applicable"."""

    def __init__(self) -> None:
        self.system_files = 0  # system metrics files read (damaged or not)
        self.system_records = 0
        self.gpus: set[tuple[str, str]] = set()
        self.gpu_memory: set[tuple[str, str]] = set()
        self.io_wait_records = 0
        self.framework_files = 0
        self.framework_events = 0
        self.step_events = 0
        self.dataloader_events = 0

    def to_state(self) -> dict[str, Any]:
        return encode(vars(self))

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Facts:
        facts = cls()
        facts.__dict__.update(decode(state))
        return facts


class ProfilerRule:
    name: ClassVar[str]
    # Container defaults in the order of the report's RuleParameters string.
    PARAMETERS: ClassVar[tuple[tuple[str, Any], ...]] = ()
    # Parameters the container accepts but does not print in RuleParameters.
    HIDDEN_PARAMETERS: ClassVar[tuple[tuple[str, Any], ...]] = ()
    # Accepted and ignored (sent by the SDK for every rule).
    IGNORED_PARAMETERS: ClassVar[frozenset[str]] = frozenset({"scan_interval_us", "rule_to_invoke"})
    summary: ClassVar[str] = ""
    # Why the rule cannot run on CloudWatch's per-host minute averages (None: it can).
    CLOUDWATCH_GAP: ClassVar[str | None] = None
    # Parameters counted in samples; they are rescaled when the samples are CloudWatch minutes.
    COUNT_PARAMETERS: ClassVar[dict[str, int]] = {}

    def __init__(self, **params: Any):
        known = dict(self.PARAMETERS) | dict(self.HIDDEN_PARAMETERS)
        resolved = dict(known)
        for key, value in params.items():
            if key in self.IGNORED_PARAMETERS:
                continue
            if key not in known:
                accepted = ", ".join(known) or "none"
                raise RuleConfigError(f"{self.name}: unknown parameter {key!r}. Accepted parameters: {accepted}.")
            resolved[key] = coerce_parameter(value)
        self.params = resolved
        self.source = "profiler"
        self.report: dict[str, Any] = {
            "RuleTriggered": 0,
            "Violations": 0,
            "Details": {},
            "Datapoints": 0,
            "RuleParameters": self.rule_parameters(),
        }

    def rule_parameters(self) -> str:
        return "\n".join(f"{key}:{format_parameter(self.params[key])}" for key, _ in self.PARAMETERS)

    def use_cloudwatch(self, seconds_per_profiler_sample: float, seconds_per_cloudwatch_sample: float) -> None:
        """Evaluate on CloudWatch minutes: sample counts keep their duration (the report still shows the configured
        values)."""
        self.source = "cloudwatch"
        scale = seconds_per_profiler_sample / seconds_per_cloudwatch_sample
        for name, minimum in self.COUNT_PARAMETERS.items():
            self.params[name] = max(minimum, math.ceil(float(self.params[name]) * scale))

    def gap(self, facts: Facts) -> str | None:
        """not_applicable(), plus the data CloudWatch lacks when the rule runs on CloudWatch metrics."""
        if self.source == "cloudwatch" and self.CLOUDWATCH_GAP:
            return self.CLOUDWATCH_GAP
        return self.not_applicable(facts)

    def evaluate(self, ctx: WindowContext) -> bool:
        raise NotImplementedError

    def window_tests(self) -> list[tuple[int, str, Any]]:
        """(column, operator, limit): the counts of a window run's values this rule reads with ``SystemWindow.count``
        (the window keeps counts, not the values; window.py)."""
        return []

    def settle(self) -> None:
        """Bring report details that are costly per window, and only ever read with the results, up to date."""

    def not_applicable(self, facts: Facts) -> str | None:
        """Why this rule cannot judge the job (missing data), or None."""
        return None

    def explain(self) -> str | None:
        """One sentence on why the rule fired, from its report (None: the generic summary is used)."""
        return None

    def triggered(self) -> bool:
        return self.report["RuleTriggered"] > 0

    def to_state(self) -> dict[str, Any]:
        return encode(vars(self))

    def load_state(self, state: dict[str, Any]) -> None:
        self.__dict__.update(decode(state))

    # helpers
    def _violation(self, count: int = 1) -> None:
        self.report["RuleTriggered"] += 1
        self.report["Violations"] += count


def _needs_gpu(facts: Facts) -> str | None:
    if facts.system_records == 0:
        return "the job produced no system metrics"
    if not facts.gpus:
        return "the job recorded no GPU utilisation (CPU-only instance or no GPU metrics)"
    return None


@stateful
class _Recent:
    """Full history as a multiset (for box plots) plus the most recent values (for the rolling test)."""

    __slots__ = ("history", "recent")
    STATE_TAG = "recent"

    def __init__(self, keep: int):
        self.history = ExactHistogram()
        self.recent: deque[float] = deque(maxlen=max(int(keep), 1))

    def extend(self, values: list[float], history: list[float] | None = None) -> None:
        """Append ``values`` to the rolling window and ``history`` (the values as keyed, default ``values``) to the
        full history."""
        self.history.extend(values if history is None else history)
        self.recent.extend(values)

    def __len__(self) -> int:
        return self.history.n

    def to_state(self) -> dict[str, Any]:
        return {"h": self.history, "r": list(self.recent), "m": self.recent.maxlen}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> _Recent:
        series = cls(state["m"])
        series.history = state["h"]
        series.recent.extend(state["r"])
        return series


def _extend_series(target: dict[str, dict[str, _Recent]], source: dict[str, dict[str, list[float]]], keep: int
                   ) -> None:
    """Append a window's per-(node, GPU) values to the rule's series, creating series on first sight."""
    for node, gpus in source.items():
        per_node = target.setdefault(node, {})
        for gpu, values in gpus.items():
            series = per_node.get(gpu)
            if series is None:
                series = per_node[gpu] = _Recent(keep)
            series.extend(values)


class LowGPUUtilization(ProfilerRule):
    name = "LowGPUUtilization"
    PARAMETERS = (("threshold_p95", 70), ("threshold_p5", 10), ("window", 500), ("patience", 1000))
    COUNT_PARAMETERS = {"window": 3, "patience": 1}
    summary = "GPU utilisation low (p95 below threshold_p95) or fluctuating (p5 below threshold_p5) per GPU"

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.values: dict[str, dict[str, _Recent]] = {}

    def evaluate(self, ctx: WindowContext) -> bool:
        window = int(self.params["window"])
        _extend_series(self.values, ctx.system.gpu_util, window)
        p95_limit, p5_limit = self.params["threshold_p95"], self.params["threshold_p5"]
        for node, gpus in self.values.items():
            for gpu, series in gpus.items():
                self.report["Datapoints"] = len(series)
                if len(series) > MAX_DATAPOINTS:
                    self._reset(window)
                    return self.triggered()
                if len(series) <= self.params["patience"]:
                    continue
                recent = sorted(series.recent)
                q95 = quantile_sorted(recent, 0.95)
                q5 = quantile_sorted(recent, 0.05)
                if q95 < p95_limit or (q95 > p95_limit and q5 < p5_limit):
                    self._violation()
                    details = self.report["Details"]
                    box = box_plot(series.history)
                    details.setdefault(node, {})[gpu] = {
                        "gpu_max": series.history.max(),
                        "gpu_95": q95,
                        "gpu_5": q5,
                        **{k: box[k] for k in ("p25", "p50", "p75", "p95", "upper", "lower")},
                    }
                    details["last_timestamp"] = ctx.start_us
        return self.triggered()

    def _reset(self, window: int) -> None:
        for gpus in self.values.values():
            for gpu in gpus:
                gpus[gpu] = _Recent(window)

    def explain(self) -> str | None:
        items = [f"{node}/{gpu} (p95 {d['gpu_95']:.3g}, p5 {d['gpu_5']:.3g})"
                 for node, gpus in self.report["Details"].items() if isinstance(gpus, dict)
                 for gpu, d in gpus.items()]
        return (f"GPU utilisation low or fluctuating on {_some(items)}; thresholds p95 {self.params['threshold_p95']}, "
                f"p5 {self.params['threshold_p5']}")

    def not_applicable(self, facts: Facts) -> str | None:
        return _needs_gpu(facts)


class BatchSize(ProfilerRule):
    name = "BatchSize"
    PARAMETERS = (
        ("cpu_threshold_p95", 70),
        ("gpu_threshold_p95", 70),
        ("gpu_memory_threshold_p95", 70),
        ("patience", 1000),
        ("window", 500),
    )
    COUNT_PARAMETERS = {"window": 3, "patience": 1}
    summary = "CPU, GPU and GPU memory all underused: a larger batch would use the instance better"

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.cpu: dict[str, _Recent] = {}
        self.util: dict[str, dict[str, _Recent]] = {}
        self.mem: dict[str, dict[str, _Recent]] = {}
        self.core_ids: set[str] = set()

    def evaluate(self, ctx: WindowContext) -> bool:
        window = int(self.params["window"])
        system = ctx.system
        _extend_series(self.util, system.gpu_util, window)
        _extend_series(self.mem, system.gpu_mem, window)
        self.core_ids |= {n for n in system.cpu_names if n is not None}
        cores = len(self.core_ids)
        for node, sums in system.sums["CPU"].items():
            if not sums:
                continue
            series = self.cpu.get(node)
            if series is None:
                series = self.cpu[node] = _Recent(window)
            # the rolling test (the verdict) reads the exact means; the box plots' history keys the sums (stats.key_sum)
            totals = list(sums.values())
            series.extend([total / cores for total in totals], [key_sum(total) / cores for total in totals])
        # The managed rule reports the window start under a standalone run and the first window's start
        # (its never-advanced clock) under ProfilerReport.
        last_timestamp = ctx.origin_us if ctx.in_report else ctx.start_us
        for node, cpu in self.cpu.items():
            self.report["Datapoints"] = len(cpu)
            if len(cpu) > MAX_DATAPOINTS:
                self.cpu[node] = _Recent(window)
                self.util.pop(node, None)
                self.mem.pop(node, None)
                continue
            if not (len(cpu) > window and len(cpu) > self.params["patience"]):
                continue
            cpu_p95 = quantile_sorted(sorted(cpu.recent), 0.95)
            if not cpu_p95 < self.params["cpu_threshold_p95"]:
                continue
            for gpu, util in self.util.get(node, {}).items():
                mem = self.mem.get(node, {}).get(gpu)
                if len(util) <= window or mem is None or len(mem) == 0:
                    continue
                gpu_p95 = quantile_sorted(sorted(util.recent), 0.95)
                mem_p95 = quantile_sorted(sorted(mem.recent), 0.95)
                if gpu_p95 < self.params["gpu_threshold_p95"] and mem_p95 < self.params["gpu_memory_threshold_p95"]:
                    self._violation()
                    details = self.report["Details"]
                    node_details = details.setdefault(node, {})
                    node_details["cpu"] = box_plot(cpu.history)
                    node_details[gpu] = box_plot(util.history)
                    # Intended box plot of the memory values; the managed rule mixes in the utilisation p25 here.
                    node_details[gpu + "_memory"] = box_plot(mem.history)
                    details["last_timestamp"] = last_timestamp
        return self.triggered()

    def explain(self) -> str | None:
        nodes = [node for node, d in self.report["Details"].items() if isinstance(d, dict)]
        return (f"CPU, GPU and GPU memory p95 all below {self.params['cpu_threshold_p95']}/"
                f"{self.params['gpu_threshold_p95']}/{self.params['gpu_memory_threshold_p95']} % on {_some(nodes)}: "
                "a larger batch would use the instance better")

    def not_applicable(self, facts: Facts) -> str | None:
        return _needs_gpu(facts)


class GPUMemoryIncrease(ProfilerRule):
    name = "GPUMemoryIncrease"
    PARAMETERS = (("increase", 5), ("patience", 1000), ("window", 10))
    COUNT_PARAMETERS = {"window": 3, "patience": 1}
    summary = "GPU memory use rising: mean of the last `window` samples exceeds the previous mean by `increase` points"

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.values: dict[str, dict[str, _Recent]] = {}

    def evaluate(self, ctx: WindowContext) -> bool:
        window = int(self.params["window"])
        increase = self.params["increase"]
        patience = self.params["patience"]
        details = self.report["Details"]
        for node, gpus in ctx.system.gpu_mem.items():
            per_node = self.values.setdefault(node, {})
            for gpu, vals in gpus.items():
                series = per_node.get(gpu)
                if series is None:
                    series = per_node[gpu] = _Recent(window + 1)
                for value in vals:
                    if len(series) >= MAX_DATAPOINTS:
                        series = per_node[gpu] = _Recent(window + 1)
                    series.history.add(value)
                    series.recent.append(value)
                    n = len(series)
                    self.report["Datapoints"] = n
                    if n <= window + 1 or n <= patience:
                        continue
                    recent = list(series.recent)
                    # numpy slices v[-window:] and v[-window-1:-2], copied exactly (the second holds window-1 values)
                    diff = np_mean(recent[-window:]) - np_mean(recent[-window - 1 : -2])
                    if diff > increase:
                        self._violation()
                        h = series.history
                        details.setdefault(node, {})[gpu] = {
                            "increase": diff, "gpu_max": h.max(), "p05": h.quantile(0.05), **box_plot(h)}
                        details["last_timestamp"] = ctx.start_us
        return self.triggered()

    def explain(self) -> str | None:
        items = [f"{node}/{gpu} (+{d['increase']:.3g} points)" for node, gpus in self.report["Details"].items()
                 if isinstance(gpus, dict) for gpu, d in gpus.items()]
        return (f"GPU memory use rose by more than {self.params['increase']} points over {self.params['window']} "
                f"samples on {_some(items)}")

    def not_applicable(self, facts: Facts) -> str | None:
        if facts.system_records == 0:
            return "the job produced no system metrics"
        if not facts.gpu_memory:
            return "the job recorded no GPU memory utilisation (CPU-only instance or no GPU metrics)"
        return None


class LoadBalancing(ProfilerRule):
    name = "LoadBalancing"
    PARAMETERS = (("threshold", 0.2), ("patience", 1000))
    CLOUDWATCH_GAP = "CloudWatch reports one utilisation per host (the sum over its GPUs), not per GPU"
    summary = "GPU workloads differ: Jensen-Shannon distance between two GPUs' utilisation histograms above threshold"

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.histograms: dict[str, dict[str, list[int]]] = {}
        self.counts: dict[str, dict[str, int]] = {}

    def evaluate(self, ctx: WindowContext) -> bool:
        for node, gpus in ctx.system.gpu_util.items():
            hists = self.histograms.setdefault(node, {})
            counts = self.counts.setdefault(node, {})
            for gpu, vals in gpus.items():
                if counts.get(gpu, 0) + len(vals) > MAX_DATAPOINTS:
                    hists[gpu] = [0] * 49
                    counts[gpu] = 0
                hist = hists.setdefault(gpu, [0] * 49)
                for v in vals:
                    b = load_balancing_bin(v)
                    if b is not None:
                        hist[b] += 1
                counts[gpu] = counts.get(gpu, 0) + len(vals)
                self.report["Datapoints"] = counts[gpu]
        details = self.report["Details"]
        for node, hists in self.histograms.items():
            details.setdefault(node, {})["workloads"] = {gpu: list(h) for gpu, h in hists.items()}
        threshold, patience = self.params["threshold"], self.params["patience"]
        for node, hists in self.histograms.items():
            names = list(hists)
            for i, gpu1 in enumerate(names):
                if self.counts[node][gpu1] <= patience:
                    continue
                for gpu2 in names[i + 1 :]:
                    distance = jensen_shannon_distance(hists[gpu1], hists[gpu2])
                    if distance > threshold:
                        self._violation()
                        details[node].setdefault("distances", {}).setdefault(gpu1, {})[gpu2] = distance
        return self.triggered()

    def explain(self) -> str | None:
        pairs = [f"{node} {a}/{b} ({d:.2f})" for node, nd in self.report["Details"].items()
                 for a, others in nd.get("distances", {}).items() for b, d in others.items()]
        return f"GPU workloads differ (Jensen-Shannon distance above {self.params['threshold']}): {_some(pairs)}"

    def not_applicable(self, facts: Facts) -> str | None:
        reason = _needs_gpu(facts)
        if reason:
            return reason
        per_node: dict[str, int] = {}
        for node, _gpu in facts.gpus:
            per_node[node] = per_node.get(node, 0) + 1
        if max(per_node.values()) < 2:
            return "every node has a single GPU, so there is no pair of GPUs to compare"
        return None


@stateful
class FrameworkBreakdown:
    """Time per framework phase and operator, as the managed rules' ``aggregate_framework_metrics`` reports it.

    OverallFrameworkMetrics adds an ``others`` phase: the time between steps. It is measured per process (rank), each
    on its own step log (its first step's start to its last step's end, minus its steps), and summed over the ranks;
    the managed rule takes one span over all processes and subtracts every process's steps from it, so with two or
    more ranks the steps outweigh the span and TRAIN shows 100 %. The CPU/IO bottleneck and StepOutlier breakdowns
    have no ``others`` (the managed helper has none)."""

    STATE_TAG = "breakdown"

    def __init__(self) -> None:
        self.cpu: dict[str, dict[str, float]] = {}
        self.gpu: dict[str, dict[str, float]] = {}
        self.step_phases: dict[str, float] = {}
        self.forward = 0.0
        self.backward = 0.0
        self.general: dict[str, float] = {}
        self.horovod: dict[str, float] = {}
        #: Per process (the trace's node id, ``algo-1-51``): [first step start, last step end, time in steps], us.
        self.ranks: dict[str, list[float]] = {}

    def add(self, ev: TraceEvent) -> None:
        dur = ev.end_us - ev.start_us
        phase = ev.phase
        lowered = phase.lower()
        if "cpu" in lowered:
            ops = self.cpu.setdefault(phase, {})
            ops[ev.name] = ops.get(ev.name, 0) + dur
        elif "gpu" in lowered:
            ops = self.gpu.setdefault(phase, {})
            ops[ev.name] = ops.get(ev.name, 0) + dur
        elif "Step" in phase:
            self.step_phases[phase] = self.step_phases.get(phase, 0) + dur
            rank = self.ranks.get(ev.node)
            if rank is None:
                self.ranks[ev.node] = [ev.start_us, ev.end_us, dur]
            else:
                rank[0], rank[1], rank[2] = min(rank[0], ev.start_us), max(rank[1], ev.end_us), rank[2] + dur
        elif phase == "Forward-SubModuleInternal":
            self.forward += dur
        elif phase == "Backward-SubModuleInternal":
            self.backward += dur
        elif ev.file_type != "" and ":CPU" not in phase and ":GPU" not in phase:
            self.general[phase] = self.general.get(phase, 0) + dur
        elif ev.file_type == "":
            self.horovod[ev.name] = self.horovod.get(ev.name, 0) + dur

    @staticmethod
    def _percent(values: dict[str, float], minimum: float | None = None) -> dict[str, float]:
        """Shares in percent; with ``minimum``, only the entries above it, re-normalised."""
        total = sum(values.values())
        if total <= 0:
            return {}
        kept = {k: v for k, v in values.items() if minimum is None or 100 * v / total > minimum}
        kept_total = sum(kept.values())
        return {k: 100 * v / kept_total for k, v in kept.items()} if kept_total > 0 else {}

    @staticmethod
    def _by_name(phases: dict[str, dict[str, float]]) -> dict[str, float]:
        totals: dict[str, float] = {}
        for ops in phases.values():
            for name, dur in ops.items():
                totals[name] = totals.get(name, 0) + dur
        return totals

    def details(self, *, framework_rule: bool) -> dict[str, Any]:
        gpu_phase_totals = {p: sum(ops.values()) for p, ops in self.gpu.items()}
        cpu_phase_totals = {p: sum(ops.values()) for p, ops in self.cpu.items()}
        ratio = self._percent({**gpu_phase_totals, **cpu_phase_totals})
        phases = dict(self.step_phases)
        if framework_rule and phases:
            # between steps, per rank on its own step log (a rank whose steps overlap has none)
            phases["others"] = sum(max(0.0, end - start - in_steps) for start, end, in_steps in self.ranks.values())
        phase = self._percent(phases)
        cpu_names = self._by_name(self.cpu)
        gpu_names = self._by_name(self.gpu)
        cpu_pct = self._percent(cpu_names, 2.0)
        gpu_pct = self._percent(gpu_names, 2.0)
        out: dict[str, Any] = {"ratio": ratio}
        if framework_rule:
            out["phase"] = phase
            out["phase_time"] = {}
        if cpu_pct:
            out["CPU"] = cpu_pct
            out["CPU_total"] = {k: cpu_names[k] for k in cpu_pct}
        if gpu_pct:
            out["GPU"] = gpu_pct
            out["GPU_total"] = {k: gpu_names[k] for k in gpu_pct}
        if not framework_rule:
            out["phase"] = phase
            out["phase_time"] = {}
        if self.general:
            out["general"] = self._percent(self.general)
        if self.forward or self.backward:
            out["forward_backward"] = self._percent({"forward": self.forward, "backward": self.backward})
        if self.horovod:
            out["horovod"] = self._percent(self.horovod, 2.0)
        return out

    def to_state(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> FrameworkBreakdown:
        b = cls()
        b.__dict__.update(state)
        return b


def _events_containing(events: list[TraceEvent], instants_us: list[float]) -> list[TraceEvent]:
    """Events with start < t < end for some instant t (each event once), by a sweep over sorted starts."""
    if not events or not instants_us:
        return []
    ordered = sorted(events, key=lambda e: e.start_us)
    hit: dict[int, TraceEvent] = {}
    active: list[TraceEvent] = []
    index = 0
    for t in sorted(instants_us):
        while index < len(ordered) and ordered[index].start_us < t:
            active.append(ordered[index])
            index += 1
        # instants ascend, so an event that ended before this one cannot contain any later instant
        active = [ev for ev in active if ev.end_us > t]
        for ev in active:
            hit[id(ev)] = ev
    return list(hit.values())


class _BottleneckRule(ProfilerRule):
    """CPUBottleneck and IOBottleneck: the share of snapshots where GPUs idle while cores are busy (or waiting)."""

    HIGH_COLUMN: ClassVar[int]
    HIGH_PARAMETER: ClassVar[str]
    SNAPSHOT_GAP_S = 0.02
    CLOUDWATCH_GAP = "CloudWatch has per-host minute averages, not per-core samples at the profiler's interval"

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.timestamp = 0.0
        self.datapoints = 0
        self.low_gpu = 0
        self.bottlenecks: dict[float, dict[str, int]] = {}
        self.breakdown = FrameworkBreakdown()
        self.breakdown_used = False

    def window_tests(self) -> list[tuple[int, str, Any]]:
        return [(GPU_COLUMN, "<", self.params["gpu_threshold"]),
                (self.HIGH_COLUMN, ">", self.params[self.HIGH_PARAMETER])]

    def evaluate(self, ctx: WindowContext) -> bool:
        gpu_limit = self.params["gpu_threshold"]
        high_limit = self.params[self.HIGH_PARAMETER]
        column = self.HIGH_COLUMN
        gap = self.SNAPSHOT_GAP_S
        count = ctx.system.count
        gpu_low: dict[float, int] = {}
        high: dict[float, int] = {}
        snapshot = self.timestamp
        datapoints = self.datapoints
        for run in ctx.system.runs:
            ts = run[0]
            if abs(snapshot - ts) > gap:
                snapshot = ts
                datapoints += 1
            low = count(run, GPU_COLUMN, "<", gpu_limit)
            if low:
                if snapshot not in gpu_low:
                    gpu_low[snapshot] = 0
                    self.low_gpu += 1
                gpu_low[snapshot] += low
            busy = count(run, column, ">", high_limit)
            if busy:
                high[snapshot] = high.get(snapshot, 0) + busy
        self.timestamp = snapshot
        self.datapoints = datapoints
        this_window = []
        for snap, low in gpu_low.items():
            if snap in high:
                self.bottlenecks[snap] = {"GPUs": low, "CPUs": high[snap]}
                this_window.append(snap)
        if len(self.bottlenecks) > MAX_DATAPOINTS:
            self.bottlenecks = {}
        report = self.report
        report["Violations"] = len(self.bottlenecks)
        report["Datapoints"] = datapoints
        details = report["Details"]
        details["low_gpu_utilization"] = self.low_gpu
        details["bottlenecks"] = self.bottlenecks
        fired = datapoints > self.params["patience"] and 100 * len(self.bottlenecks) / datapoints > self.params["threshold"]
        if fired:
            report["RuleTriggered"] += 1
            if ctx.framework and this_window:
                for ev in _events_containing(ctx.framework, [t * 1e6 for t in this_window]):
                    self.breakdown.add(ev)
                    self.breakdown_used = True
            if self.breakdown_used:
                details.update(self.breakdown.details(framework_rule=False))
        return fired

    def explain(self) -> str | None:
        r = self.report
        share = 100 * r["Violations"] / r["Datapoints"]
        busy = "CPU cores were busy" if self.HIGH_COLUMN == 2 else "cores waited on I/O"
        return (f"in {share:.0f} % of {r['Datapoints']} samples GPUs were idle while {busy} "
                f"(threshold {self.params['threshold']} %)")

    def not_applicable(self, facts: Facts) -> str | None:
        return _needs_gpu(facts)


class CPUBottleneck(_BottleneckRule):
    name = "CPUBottleneck"
    PARAMETERS = (("threshold", 50), ("cpu_threshold", 90), ("gpu_threshold", 10), ("patience", 1000))
    HIGH_COLUMN = CPU_COLUMN
    HIGH_PARAMETER = "cpu_threshold"
    summary = "GPUs idle while CPU cores are saturated in more than `threshold` percent of the samples"


class IOBottleneck(_BottleneckRule):
    name = "IOBottleneck"
    PARAMETERS = (("threshold", 50), ("io_threshold", 50), ("gpu_threshold", 10), ("patience", 1000))
    HIGH_COLUMN = IO_COLUMN
    HIGH_PARAMETER = "io_threshold"
    summary = "GPUs idle while cores wait on I/O in more than `threshold` percent of the samples"

    def not_applicable(self, facts: Facts) -> str | None:
        return _needs_gpu(facts) or (None if facts.io_wait_records else "the job recorded no I/O wait metrics")


class StepOutlier(ProfilerRule):
    name = "StepOutlier"
    PARAMETERS = (("stddev", 3), ("mode", None), ("n_outliers", 10))
    MIN_STEPS = 100
    CLOUDWATCH_GAP = "step durations come from framework traces, which CloudWatch does not have"
    summary = "More than n_outliers steps took longer than mean + stddev standard deviations"

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.report["Details"] = {"step_details": {}}
        self.durations: dict[str, dict[str, list[float]]] = {}
        self.step_numbers: dict[str, dict[str, list[str]]] = {}
        self.breakdown = FrameworkBreakdown()

    def rule_parameters(self) -> str:
        # The managed report prints stddev twice, first under the name "threshold".
        p = self.params
        return f"threshold:{p['stddev']}\nmode:{p['mode']}\nn_outliers:{p['n_outliers']}\nstddev:{p['stddev']}"

    def evaluate(self, ctx: WindowContext) -> bool:
        mode = self.params["mode"]
        intervals: dict[str, dict[str, tuple[int, int]]] = {}
        for ev in ctx.framework:
            if STEP_MARKER not in ev.name and not (mode and ev.name == mode):
                continue
            self.report["Datapoints"] += 1
            self.durations.setdefault(ev.node, {}).setdefault(ev.name, []).append((ev.end_us - ev.start_us) / 1e6)
            step = str(ev.args.get("step_num"))
            self.step_numbers.setdefault(ev.node, {}).setdefault(ev.name, []).append(step)
            intervals.setdefault(ev.node, {}).setdefault(step, (ev.start_us, ev.end_us))
        stddev, limit = self.params["stddev"], self.params["n_outliers"]
        step_details = self.report["Details"]["step_details"]
        fired_steps: list[tuple[int, int]] = []
        for node, phases in self.durations.items():
            for phase, values in phases.items():
                if len(values) > MAX_DATAPOINTS:
                    phases[phase] = values[-1:]
                    self.step_numbers[node][phase] = self.step_numbers[node][phase][-1:]
                    continue
                if len(values) <= self.MIN_STEPS:
                    continue
                mean = np_mean(values)
                sigma = np_std(values)
                cutoff = mean + stddev * sigma
                numbers = self.step_numbers[node][phase]
                outliers = [numbers[i] for i, v in enumerate(values) if v > cutoff]
                ordered = sorted(values)
                probs, edges = histogram([v for v in values if v < cutoff])
                step_details[node] = {
                    "step_stats": {
                        "mean": mean,
                        "max": ordered[-1],
                        "p99": quantile_sorted(ordered, 0.99),
                        "p95": quantile_sorted(ordered, 0.95),
                        "p50": quantile_sorted(ordered, 0.5),
                        "min": ordered[0],
                    },
                    "number_of_outliers": len(outliers),
                    "phase": phase,
                    "stddev": round(sigma, 2),
                    "probs": probs,
                    "binedges": edges,
                    "step_numbers": outliers,
                }
                if len(outliers) > limit:
                    self._violation(len(outliers))
                    seen = intervals.get(node, {})
                    fired_steps.extend(seen[s] for s in outliers if s in seen)
        if fired_steps and ctx.framework:
            for start, end in fired_steps:
                for ev in ctx.framework:
                    if ev.end_us >= start and ev.start_us <= end:
                        self.breakdown.add(ev)
            self.report["Details"].update(self.breakdown.details(framework_rule=False))
        return self.triggered()

    def explain(self) -> str | None:
        nodes = [f"{node}: {d['number_of_outliers']} of them ({d['phase']})"
                 for node, d in self.report["Details"]["step_details"].items()]
        return f"more than {self.params['n_outliers']} steps slower than mean + {self.params['stddev']} std; {_some(nodes)}"

    def not_applicable(self, facts: Facts) -> str | None:
        if facts.framework_files == 0:
            return "the job wrote no framework traces (framework profiling off or unsupported by the framework version)"
        if facts.step_events == 0:
            return "the framework traces contain no step events"
        return None


class MaxInitializationTime(ProfilerRule):
    name = "MaxInitializationTime"
    PARAMETERS = (("threshold", 20),)
    summary = "No training step started within `threshold` minutes of the job start"

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.report["Details"] = {"step_num": {}}
        self.job_start: float | None = None
        self.job_end: float | None = None
        self.steps_seen = False
        self.transitions_seen = False

    def apply_status_transitions(self, transitions: list[dict[str, Any]], now_s: float) -> bool:
        """CloudWatch variant: initialisation = from the first secondary status to "Training" (or to now)."""
        starts = [(t.get("Status"), epoch_seconds(t.get("StartTime"))) for t in transitions]
        starts = [(status, at) for status, at in starts if at is not None]
        if not starts:
            return self.triggered()
        self.transitions_seen = True
        begin = min(at for _, at in starts)
        training = min((at for status, at in starts if status == "Training"), default=None)
        seconds = (training if training is not None else now_s) - begin
        details = self.report["Details"]
        details["job_start"] = begin
        details["initialization_seconds"] = seconds
        details["training_started"] = training is not None
        if seconds > self.params["threshold"] * 60 and self.report["RuleTriggered"] == 0:
            self._violation()
        return self.triggered()

    def gap(self, facts: Facts) -> str | None:
        if self.source == "cloudwatch":
            return None if self.transitions_seen else "the job has no secondary status transitions yet"
        return self.not_applicable(facts)

    def evaluate(self, ctx: WindowContext) -> bool:
        if self.source == "cloudwatch":
            return self.triggered()  # judged from the status transitions, not from windows
        system = ctx.system
        if system.min_ts is not None:
            self.job_start = system.min_ts if self.job_start is None else min(self.job_start, system.min_ts)
            self.job_end = system.max_ts if self.job_end is None else max(self.job_end, system.max_ts)
        details = self.report["Details"]
        for ev in ctx.framework:
            if STEP_MARKER in ev.name:
                self.report["Datapoints"] += 1
                if not self.steps_seen:
                    details["step_num"]["first"] = ev.start_us
                    self.steps_seen = True
                else:
                    details["step_num"]["last"] = ev.start_us
        if self.job_start is not None:
            details["job_start"] = self.job_start
            details["job_end"] = self.job_end
        # The window start is the rule's clock in both modes; under ProfilerReport the managed rule's clock never
        # advances, so it could not fire there (a documented deviation).
        if ctx.start_us - ctx.origin_us > self.params["threshold"] * 60 * 1_000_000 and not self.steps_seen:
            self._violation()
            return True
        return self.triggered()

    def explain(self) -> str | None:
        seconds = self.report["Details"].get("initialization_seconds")
        if seconds is not None:
            return f"{seconds / 60:.1f} minutes before training started (threshold {self.params['threshold']})"
        return f"no training step in the first {self.params['threshold']} minutes"

    def not_applicable(self, facts: Facts) -> str | None:
        if facts.framework_files == 0:
            return "the job wrote no framework traces, so the first training step cannot be seen"
        return None


class Dataloader(ProfilerRule):
    name = "Dataloader"
    PARAMETERS = (("min_threshold", 70), ("max_threshold", 200))
    HIDDEN_PARAMETERS = (("patience", 10),)
    PARALLEL_RESET = 1000
    CLOUDWATCH_GAP = "data loader events come from framework traces, which CloudWatch does not have"
    summary = "Number of parallel data loader processes far below or above the number of CPU cores"

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.cores = 0
        self.pin_memory: Any = None
        self.num_workers: Any = None
        self.prefetch: bool | None = None
        self.loading_times: list[float] = []
        self.parallel: list[int] = []

    def evaluate(self, ctx: WindowContext) -> bool:
        if not self.cores:
            self.cores = len({n for n in ctx.system.cpu_names if n is not None})
        buckets: dict[int, set[Any]] = {}
        for ev in ctx.framework:
            if ev.phase == "DataLoaderIterInitialize":
                self.pin_memory = ev.args.get("pin_memory")
                self.num_workers = ev.args.get("num_workers")
            if ev.phase in DATALOADER_PHASES:
                self.report["Datapoints"] += 1
                if len(self.loading_times) >= MAX_DATAPOINTS:
                    self.loading_times = []
                self.loading_times.append((ev.end_us - ev.start_us) / 1e6)
                if isinstance(ev.args.get("pid"), (str, int, float)):  # a list or object pid is not a process
                    buckets.setdefault(int(ev.start_us / 1e6), set()).add(ev.args["pid"])
                self.prefetch = None
            if "Prefetch" in ev.name:
                self.prefetch = True
        if buckets:
            if len(self.parallel) > self.PARALLEL_RESET:
                self.parallel = []
            self.parallel.extend(len(pids) for pids in buckets.values())
            ordered = sorted(self.parallel)
            med = int(quantile_sorted(ordered, 0.5))
            patience = self.params["patience"]
            if len(self.parallel) > patience and med < self.cores * self.params["min_threshold"] / 100:
                self.report["Violations"] += 1
            if len(self.parallel) > patience and med > self.cores * self.params["max_threshold"] / 100:
                self.report["Violations"] += 1
            times = sorted(self.loading_times)
            probs, edges = histogram(self.loading_times)
            details: dict[str, Any] = {"pin_memory": self.pin_memory, "num_workers": self.num_workers}
            if self.prefetch is not None:
                details["prefetch"] = self.prefetch
            details["cores"] = self.cores
            details["dataloaders"] = med
            details["dataloading_time"] = {
                "p25": quantile_sorted(times, 0.25),
                "p50": quantile_sorted(times, 0.5),
                "p95": quantile_sorted(times, 0.95),
                "probs": probs,
                "binedges": edges,
            }
            self.report["Details"] = details
        if self.report["Violations"] > 0:
            self.report["RuleTriggered"] = 1
            return True
        return False

    def explain(self) -> str | None:
        d = self.report["Details"]
        return (f"{d['dataloaders']} parallel data loader(s) for {d['cores']} cores; expected between "
                f"{self.params['min_threshold']} % and {self.params['max_threshold']} % of the cores")

    def not_applicable(self, facts: Facts) -> str | None:
        if facts.framework_files == 0:
            return "the job wrote no framework traces (needs PyTorch framework profiling with data loader metrics)"
        if facts.dataloader_events == 0:
            return "the framework traces contain no PyTorch DataLoader events"
        return None


class OverallSystemUsage(ProfilerRule):
    name = "OverallSystemUsage"
    summary = "Percentiles of GPU, CPU, memory, network and I/O use per node (informational, never triggers)"

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.values: dict[str, dict[str, ExactHistogram]] = {m: {} for m in USAGE_METRICS}
        self.carry: dict[str, dict[str, list[float]]] = {m: {} for m in USAGE_METRICS}
        self.cpu_names: set[str] = set()
        self.gpu_names: set[str] = set()
        self.first_node_timestamps = 0
        self.first_node: str | None = None

    def evaluate(self, ctx: WindowContext) -> bool:
        system = ctx.system
        self.cpu_names |= {n for n in system.cpu_names if n is not None}
        self.gpu_names |= {n for n in system.gpu_names if n is not None}
        boundary = ctx.end_us / 1e6
        for metric in USAGE_METRICS:
            store = self.values[metric]
            carry = self.carry[metric]
            for node, sums in system.sums[metric].items():
                if not sums:
                    continue
                counted = store.get(node)
                if counted is None:
                    counted = store[node] = ExactHistogram()
                pending = carry.pop(node, None)
                for ts, total in sums.items():
                    if pending is not None and ts == pending[0]:
                        # a record exactly on a window boundary is read by both windows and summed under one key
                        keyed = key_sum(pending[1])  # (a state saved before the keying holds the exact sum)
                        counted.remove(keyed if keyed in counted.counts else pending[1])
                        total += pending[1]
                        pending = None
                    counted.add(key_sum(total))  # keyed at stats.SUM_RESOLUTION: distinct keys bounded by the range
                    if ts == boundary:
                        carry[node] = [ts, total]
                if metric == "CPU":
                    if self.first_node is None:
                        self.first_node = node
                    if node == self.first_node:
                        self.first_node_timestamps = counted.n
                if counted.n > MAX_DATAPOINTS or len(counted.counts) > MAX_DATAPOINTS:
                    counted.clear()
        self.report["Datapoints"] = self.first_node_timestamps
        return False

    def settle(self) -> None:
        """The percentiles of the whole history, computed when the results are read rather than after every window
        (each computation sorts every history: per window, that made a long job's cost grow with its age)."""
        details: dict[str, Any] = {}
        for metric in USAGE_METRICS:
            if metric in ("GPU", "GPU memory"):
                divisor = len(self.gpu_names) or 1
            elif metric in ("CPU", "I/O"):
                divisor = len(self.cpu_names) or 1
            else:
                divisor = 1
            per_node = {}
            for node, counted in self.values[metric].items():
                if counted.n == 0:
                    continue
                stats = {}
                for label, q in (("max", 1.0), ("p99", 0.99), ("p95", 0.95), ("p50", 0.5), ("min", 0.0)):
                    value = counted.quantile(q) / divisor
                    stats[label] = round(value, 2) if value > 0 else 0
                per_node[node] = stats
            details[metric] = per_node
        self.report["Details"] = details

    def not_applicable(self, facts: Facts) -> str | None:
        return None if facts.system_records else "the job produced no system metrics"


class OverallFrameworkMetrics(ProfilerRule):
    name = "OverallFrameworkMetrics"
    summary = "Time split between training phases, CPU and GPU operators (informational, never triggers)"
    CLOUDWATCH_GAP = "framework phases come from framework traces, which CloudWatch does not have"

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.report["Details"] = {"ratio": {}, "phase": {}, "phase_time": {}}
        self.breakdown = FrameworkBreakdown()

    def evaluate(self, ctx: WindowContext) -> bool:
        for ev in ctx.framework:
            self.breakdown.add(ev)
        if ctx.framework:
            self.report["Details"] = self.breakdown.details(framework_rule=True)
        return False

    def not_applicable(self, facts: Facts) -> str | None:
        return None if facts.framework_files else "the job wrote no framework traces"


# ProfilerReport runs its sub-rules in this order (the order of the managed container).
REPORT_RULES: tuple[type[ProfilerRule], ...] = (
    CPUBottleneck,
    IOBottleneck,
    LowGPUUtilization,
    StepOutlier,
    GPUMemoryIncrease,
    BatchSize,
    MaxInitializationTime,
    LoadBalancing,
    OverallSystemUsage,
    Dataloader,
    OverallFrameworkMetrics,
)
RULE_CLASSES: dict[str, type[ProfilerRule]] = {cls.name: cls for cls in REPORT_RULES}
PROFILER_REPORT = "ProfilerReport"
ALL_RULE_NAMES = (PROFILER_REPORT, *sorted(RULE_CLASSES))


def rule_class(name: str) -> type[ProfilerRule]:
    for known, cls in RULE_CLASSES.items():
        if known.lower() == name.lower():
            return cls
    raise RuleConfigError(f"unknown profiler rule {name!r}. Known rules: {', '.join(ALL_RULE_NAMES)}.")


def split_report_overrides(parameters: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{"LowGPUUtilization_window": "60"}`` (or the newer ``custom_rule_parameters`` string) to per-rule kwargs."""
    flat: dict[str, Any] = {}
    for key, value in parameters.items():
        if key in ("rule_to_invoke", "opt_out_telemetry", "scan_interval_us"):
            continue
        if key == "custom_rule_parameters":
            nested = ast.literal_eval(value) if isinstance(value, str) else value
            if not isinstance(nested, dict):
                raise RuleConfigError("ProfilerReport: custom_rule_parameters must be a dict of <Rule>_<parameter>")
            flat.update(nested)
        else:
            flat[key] = value
    per_rule: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        rule_name, sep, param = key.partition("_")
        if not sep or not param:
            raise RuleConfigError(
                f"ProfilerReport: parameter {key!r} does not follow <RuleName>_<parameter>, e.g. LowGPUUtilization_window"
            )
        cls = rule_class(rule_name)
        per_rule.setdefault(cls.name, {})[param.lower()] = value
    return per_rule


def _some(items: list[str], limit: int = 4) -> str:
    shown = ", ".join(items[:limit])
    return f"{shown} and {len(items) - limit} more" if len(items) > limit else shown


def epoch_seconds(value: Any) -> float | None:
    """DescribeTrainingJob times: datetime from boto3, or epoch seconds (milliseconds) / ISO strings from JSON. The
    evaluator's one time parser (the RuleAlarm's runtime, a separate package, has its own ``parse_time``)."""
    if value is None:
        return None
    if hasattr(value, "timestamp"):
        return float(value.timestamp())
    if isinstance(value, (int, float)):
        return float(value) / 1000 if value > 1e11 else float(value)
    if isinstance(value, str):
        try:
            return epoch_seconds(float(value))
        except ValueError:
            from datetime import datetime

            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                return None
    return None


def finite(value: float) -> bool:
    return not (math.isnan(value) or math.isinf(value))


# The rules for the failures that cost most at scale (evaluator only, not part of ProfilerReport); their modules
# import this one, so they are registered here, at the end of this module.
from .gpu_health_rule import GPUHealth  # noqa: E402
from .hang_rule import TrainingHang  # noqa: E402
from .rank_rules import DataWait, Straggler  # noqa: E402

SCALE_RULES: tuple[type[ProfilerRule], ...] = (TrainingHang, Straggler, GPUHealth, DataWait)
RULE_CLASSES.update({cls.name: cls for cls in SCALE_RULES})
ALL_RULE_NAMES = (PROFILER_REPORT, *sorted(RULE_CLASSES))
