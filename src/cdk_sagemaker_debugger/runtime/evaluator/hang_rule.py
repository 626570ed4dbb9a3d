"""TrainingHang: no step or phase on some rank for ``minutes`` while the job's nodes still write system metrics, and
the nodes that stopped writing while others go on.

Judged from :class:`~.progress.Progress` (every file as it is read), not from windows: a hang stops the framework
traces, and with them the windows. The clock is the newest system record of any node: the sampler keeps sampling
while training hangs, so the gap between a rank's last progress and that clock is how long the rank has been stuck.
"""

from __future__ import annotations

import time
from typing import Any

from .progress import Progress, host_of, rank_label
from .rules import Facts, ProfilerRule, _some
from .window import WindowContext

#: The ranks that stopped within this long of the first one are named as "stopped first". The others waited in a
#: collective for it, and finished at least one more phase (the forward pass) before they blocked.
FIRST_STOP_SLACK_US = 1_000
BUSY_UTILIZATION = 50.0
IDLE_UTILIZATION = 10.0


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def signature(gpus: dict[str, dict[str, float]], low_power_share: float) -> str:
    """How the GPUs of a stuck node look: busy at low power (a hung collective spinning), idle, or busy."""
    if not gpus:
        return "no GPU metrics"
    utils = [g["utilization"] for g in gpus.values()]
    shares = [g["power_share"] for g in gpus.values() if "power_share" in g]
    mean_util = sum(utils) / len(utils)
    if mean_util >= BUSY_UTILIZATION and shares and max(shares) <= low_power_share:
        return (f"busy at low power (utilisation {mean_util:.0f} %, power {100 * max(shares):.0f} % of the limit "
                "at most): the signature of a hung collective")
    if mean_util <= IDLE_UTILIZATION:
        return f"idle (utilisation {mean_util:.0f} %)"
    return f"busy (utilisation {mean_util:.0f} %)"


class TrainingHang(ProfilerRule):
    name = "TrainingHang"
    PARAMETERS = (("minutes", 10), ("pause_factor", 2), ("silent_minutes", 5), ("low_power_percent", 40))
    CLOUDWATCH_GAP = "progress comes from the sampler's step and phase events, which CloudWatch does not have"
    summary = "No step or phase progress on a rank for `minutes` while the job still runs (a hang), or a silent node"

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.seen_progress = False

    def evaluate(self, ctx: WindowContext) -> bool:
        return self.triggered()  # judged in observe(), from what every file read showed

    def observe(self, progress: Progress) -> None:
        """Re-judge from the progress so far (idempotent: the report is rebuilt each time)."""
        self.seen_progress = bool(progress.ranks)
        now_s = progress.newest_s()
        if now_s is None or not progress.ranks:
            return
        stuck = self._stuck(progress, now_s)
        silent = self._silent(progress, now_s)
        details: dict[str, Any] = {"clock": now_s, "ranks": len(progress.ranks)}
        if stuck:
            first = min(last for _, last, _ in stuck)
            details["stopped_first"] = sorted(r for r, last, _ in stuck if last - first <= FIRST_STOP_SLACK_US)
            details["stuck"] = {r: {"last_progress": last / 1e6, "stalled_minutes": round((now_s - last / 1e6) / 60, 2),
                                    "limit_minutes": round(limit / 60e6, 2)} for r, last, limit in stuck}
            hosts = sorted({host_of(r) for r in details["stopped_first"]})
            details["gpus"] = {h: progress.gpu_signature(h, first / 1e6) for h in hosts}
            details["signature"] = {h: signature(details["gpus"][h], self.params["low_power_percent"] / 100)
                                    for h in hosts}
        if silent:
            details["silent_nodes"] = silent
        self.report["Details"] = details
        self.report["Datapoints"] = sum(entry[2] for entry in progress.ranks.values())
        # minutes since the longest-stalled rank last progressed (the dashboard draws it against `minutes`)
        oldest = min(entry[1] for entry in progress.ranks.values())
        self.report["Gauge"] = round(max(now_s - oldest / 1e6, 0.0) / 60, 2)
        violations = len(stuck) + len(silent)
        self.report["RuleTriggered"] = 1 if violations else 0
        self.report["Violations"] = violations

    def _stuck(self, progress: Progress, now_s: float) -> list[tuple[str, int, float]]:
        stuck = []
        for rank, (_first, last, _events, longest, *exited) in progress.ranks.items():
            if exited and exited[0]:
                continue  # the process exited normally: the silence after it is not a hang
            limit_us = max(float(self.params["minutes"]) * 60e6, float(self.params["pause_factor"]) * longest)
            if now_s * 1e6 - last > limit_us:
                stuck.append((rank, last, limit_us))
        return stuck

    def _silent(self, progress: Progress, now_s: float) -> dict[str, dict[str, float]]:
        limit = float(self.params["silent_minutes"]) * 60
        return {node: {"last_record": newest, "silent_minutes": round((now_s - newest) / 60, 2)}
                for node, newest in sorted(progress.nodes.items()) if now_s - newest > limit}

    def explain(self) -> str | None:
        d = self.report["Details"]
        parts = []
        if d.get("stuck"):
            first = d["stopped_first"]
            stalled = max(v["stalled_minutes"] for v in d["stuck"].values())
            last = min(v["last_progress"] for v in d["stuck"].values())
            parts.append(f"no progress on {len(d['stuck'])} of {d['ranks']} rank(s) for up to {stalled:.1f} minutes "
                         f"(limit {self.params['minutes']}); stopped first: {_some([rank_label(r) for r in first])} "
                         f"at {_iso(last)}; GPUs: " + "; ".join(f"{h} {s}" for h, s in d["signature"].items()))
        if d.get("silent_nodes"):
            parts.append("node(s) stopped writing samples while others go on: " + _some(
                [f"{n} (silent {v['silent_minutes']:.1f} minutes, since {_iso(v['last_record'])})"
                 for n, v in d["silent_nodes"].items()]))
        return "; ".join(parts) or None

    def not_applicable(self, facts: Facts) -> str | None:
        if facts.system_records == 0:
            return "the job produced no system metrics"
        if not self.seen_progress:
            return ("the job recorded no step or phase events (sampler.step(), sampler.phase(), sampler.wrap() or the "
                    "Lightning / Hugging Face callbacks)")
        return None
