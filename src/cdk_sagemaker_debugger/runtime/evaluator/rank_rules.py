"""DataWait and Straggler: per-rank phase timings from the sampler (``sampler.phase()``, ``sampler.wrap(loader)``).

Under synchronous data parallelism the gradient all-reduce is a barrier, so every rank's step lasts as long as the
slowest one and step time cannot name a straggler. What differs between ranks is the work *before* the first
collective: waiting for data and the forward pass. Both rules read those phases, window by window, per rank (the
readers name rank r on host algo-h ``algo-h-r``). Their state is sums, counts and maxima per rank.
"""

from __future__ import annotations

from typing import Any

from .progress import host_of, rank_label
from .readers import TraceEvent
from .rules import Facts, ProfilerRule, _some
from .window import WindowContext

DATA_PHASES = ("DataLoaderIter", "Phase:data")
FORWARD_PHASES = ("Phase:forward",)
MAX_RANKS = 4096


def rank_phases(events: list[TraceEvent]) -> dict[str, dict[str, Any]]:
    """Per rank in one window: data and forward totals and counts, and the time its events span."""
    ranks: dict[str, dict[str, Any]] = {}
    for ev in events:
        phase = ev.phase
        if not (phase.startswith(("Step:ModeKeys", "Phase:")) or phase == "DataLoaderIter"):
            continue
        entry = ranks.get(ev.node)
        if entry is None:
            entry = ranks[ev.node] = {"data": 0, "data_n": 0, "forward": 0, "forward_n": 0,
                                      "start": ev.start_us, "end": ev.end_us}
        if isinstance(ev.args.get("local_rank"), int):
            entry["local_rank"] = ev.args["local_rank"]
        entry["start"] = min(entry["start"], ev.start_us)
        entry["end"] = max(entry["end"], ev.end_us)
        duration = ev.end_us - ev.start_us
        if phase in DATA_PHASES:
            entry["data"] += duration
            entry["data_n"] += 1
        elif phase in FORWARD_PHASES:
            entry["forward"] += duration
            entry["forward_n"] += 1
    return ranks


def _gpu(host: str, gpu: str | None) -> str:
    """`` on algo-1/gpu1`` (local rank r drives GPU r, by the launchers' convention), or nothing when unknown."""
    return f" on {host}/{gpu}" if gpu else ""


class DataWait(ProfilerRule):
    name = "DataWait"
    PARAMETERS = (("threshold", 25), ("min_batches", 10))
    CLOUDWATCH_GAP = "data waits come from the sampler's DataLoader and phase events, which CloudWatch does not have"
    summary = "A rank spends more than `threshold` % of its time blocked waiting for the next batch"

    def __init__(self, **params: Any):
        super().__init__(**params)
        #: rank -> [data us, span us, batches, windows over threshold, worst window share]
        self.ranks: dict[str, list[float]] = {}

    def evaluate(self, ctx: WindowContext) -> bool:
        threshold = float(self.params["threshold"]) / 100
        latest = 0.0
        for rank, entry in rank_phases(ctx.framework).items():
            span = entry["end"] - entry["start"]
            if not entry["data_n"] or span <= 0:
                continue
            sums = self.ranks.get(rank)
            if sums is None:
                if len(self.ranks) >= MAX_RANKS:
                    continue
                sums = self.ranks[rank] = [0, 0, 0, 0, 0.0]
            share = min(entry["data"] / span, 1.0)
            latest = max(latest, share)
            sums[0] += entry["data"]
            sums[1] += span
            sums[2] += entry["data_n"]
            self.report["Datapoints"] += entry["data_n"]
            if entry["data_n"] >= self.params["min_batches"] and share > threshold:
                sums[3] += 1
                sums[4] = max(sums[4], share)
                self._violation()
        self.report["Details"] = {
            rank: {"share_percent": round(100 * s[0] / s[1], 1) if s[1] else 0.0, "batches": s[2],
                   "windows_over_threshold": s[3], "worst_window_percent": round(100 * s[4], 1)}
            for rank, s in sorted(self.ranks.items())}
        if self.ranks:
            self.report["Gauge"] = round(100 * latest, 1)  # the highest share of this window, in percent
        return self.triggered()

    def explain(self) -> str | None:
        waiting = [f"{rank_label(r)}: {d['worst_window_percent']:.0f} % at worst, {d['share_percent']:.0f} % overall"
                   for r, d in self.report["Details"].items() if d["windows_over_threshold"]]
        return f"waiting for data above {self.params['threshold']} % of the time on {_some(waiting)}"

    def not_applicable(self, facts: Facts) -> str | None:
        if facts.framework_files == 0:
            return "the job wrote no framework traces"
        if not self.ranks:
            return "no data loading was timed (use sampler.wrap(loader) or `with sampler.phase(\"data\"):`)"
        return None


class Straggler(ProfilerRule):
    name = "Straggler"
    PARAMETERS = (("threshold", 1.5), ("min_delay_ms", 5), ("min_events", 5), ("clock_drop", 0.15),
                  ("patience", 1))
    CLOUDWATCH_GAP = "per-rank phases and per-GPU clocks come from the sampler, which CloudWatch does not have"
    summary = ("A rank whose data wait + forward pass takes more than `threshold` times the fastest rank's, or a GPU "
               "clocked `clock_drop` below the fastest")

    def __init__(self, **params: Any):
        super().__init__(**params)
        #: rank -> [windows judged, windows slow, worst relative score, best own score us, latest score us]
        self.ranks: dict[str, list[float]] = {}
        #: "node/gpu" -> [windows judged, windows slow, lowest relative clock]
        self.gpus: dict[str, list[float]] = {}

    def evaluate(self, ctx: WindowContext) -> bool:
        self._judge_ranks(ctx)
        self._judge_gpus(ctx)
        self.report["Details"] = {"ranks": {r: self._rank_details(v) for r, v in sorted(self.ranks.items())},
                                  "gpus": {g: {"windows": v[0], "slow_windows": v[1], "lowest_relative_clock":
                                               round(v[2], 3)} for g, v in sorted(self.gpus.items())}}
        return self.triggered()

    @staticmethod
    def _rank_details(v: list[float]) -> dict[str, Any]:
        return {"windows": v[0], "slow_windows": v[1], "worst_relative": round(v[2], 2),
                "individual": round(v[4] / v[3], 2) if v[3] else None, "latest_ms": round(v[4] / 1e3, 2),
                "gpu": None if v[5] is None else f"gpu{v[5]}"}

    def _judge_ranks(self, ctx: WindowContext) -> None:
        scores = {}
        phases = rank_phases(ctx.framework)
        for rank, entry in phases.items():
            n = max(entry["data_n"], entry["forward_n"])
            if n >= self.params["min_events"]:
                data = entry["data"] / entry["data_n"] if entry["data_n"] else 0.0
                forward = entry["forward"] / entry["forward_n"] if entry["forward_n"] else 0.0
                scores[rank] = data + forward
        if len(scores) < 2:
            return
        fastest = min(scores.values())
        if fastest > 0:
            self.report["Gauge"] = round(min(max(scores.values()) / fastest, 1e6), 2)  # this window's slowest ratio
        for rank, score in scores.items():
            v = self.ranks.get(rank)
            if v is None:
                if len(self.ranks) >= MAX_RANKS:
                    continue
                v = self.ranks[rank] = [0, 0, 0.0, score, score, None]
            if "local_rank" in phases[rank]:
                v[5] = phases[rank]["local_rank"]
            relative = score / fastest if fastest > 0 else (1.0 if score == 0 else float("inf"))
            v[0] += 1
            v[2] = max(v[2], min(relative, 1e6))
            v[3] = min(v[3], score) if v[3] else score
            v[4] = score
            self.report["Datapoints"] += 1
            if relative > self.params["threshold"] and score - fastest > self.params["min_delay_ms"] * 1e3:
                v[1] += 1
                if v[1] >= self.params["patience"]:
                    self._violation()

    def _judge_gpus(self, ctx: WindowContext) -> None:
        clocks = {}
        for node, gpus in ctx.system.health.items():
            for gpu, dims in gpus.items():
                values = dims.get("GPUSMClock")
                if values:
                    clocks[f"{node}/{gpu}"] = sum(values) / len(values)
        if len(clocks) < 2:
            return
        fastest = max(clocks.values())
        if fastest <= 0:
            return
        for name, clock in clocks.items():
            v = self.gpus.setdefault(name, [0, 0, 1.0])
            relative = clock / fastest
            v[0] += 1
            v[2] = min(v[2], relative)
            if relative < 1 - self.params["clock_drop"]:
                v[1] += 1
                if v[1] >= self.params["patience"]:
                    self._violation()

    def explain(self) -> str | None:
        d = self.report["Details"]
        slow = [f"{rank_label(r)}{_gpu(host_of(r), v['gpu'])}: {v['worst_relative']:.1f}x the fastest rank"
                for r, v in d["ranks"].items() if v["slow_windows"] >= self.params["patience"]]
        gpus = [f"{g} at {100 * v['lowest_relative_clock']:.0f} % of the fastest GPU's SM clock"
                for g, v in d["gpus"].items() if v["slow_windows"] >= self.params["patience"]]
        parts = []
        if slow:
            parts.append(f"data wait + forward slower than {self.params['threshold']}x the fastest rank: {_some(slow)}")
        if gpus:
            parts.append(f"GPU clocks more than {100 * self.params['clock_drop']:.0f} % below the fastest: {_some(gpus)}")
        return "; ".join(parts) or None

    def not_applicable(self, facts: Facts) -> str | None:
        if not self.ranks and not self.gpus:
            return ("fewer than two ranks with timed data or forward phases, and fewer than two GPUs with SM clocks, "
                    "so there is nothing to compare")
        return None
