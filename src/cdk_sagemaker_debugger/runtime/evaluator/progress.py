"""Progress per rank and liveness per node, gathered while files are read rather than window by window.

Windows close only as far as every stream has data: when training hangs its framework traces stop, so the windows
after the hang never close while the job runs. What TrainingHang and the silent-node report need is therefore kept
here, updated from every file as it is read: per rank the first and last progress event and the longest pause seen
between two of them; per node the newest system record. Per GPU, utilisation and power by minute (the signature of a
hang: busy at low power, or idle) come from every window, closed or still open. Everything is counts, sums and maxima, so two states merge.
"""

from __future__ import annotations

from typing import Any

from .readers import TraceEvent
from .window import SystemWindow

#: Events that show a rank progressing: steps, phases and the data loader's batches.
PROGRESS_PREFIXES = ("Step:ModeKeys", "Phase:", "DataLoaderIter", "Process:exit")
#: What a training process writes when it exits normally (runtime/sampler/api.py).
EXIT_PHASE = "Process:exit"
GPU_MINUTES_KEPT = 30


def is_progress(phase: str) -> bool:
    return phase.startswith(PROGRESS_PREFIXES) and phase != "DataLoaderIterInitialize"


def rank_label(rank_node: str) -> str:
    """``algo-1-3`` (the readers' name for rank 3's traces on algo-1) -> ``rank 3 (algo-1)``."""
    host, _, rank = rank_node.rpartition("-")
    return f"rank {rank} ({host})" if host.startswith("algo-") and rank.isdigit() else rank_node


def host_of(rank_node: str) -> str:
    host, _, rank = rank_node.rpartition("-")
    return host if host.startswith("algo-") and rank.isdigit() else rank_node


class Progress:
    def __init__(self) -> None:
        #: rank node id -> [first end us, last end us, events, longest pause us, exited normally (0/1)]
        self.ranks: dict[str, list[int]] = {}
        #: node -> newest system record (epoch seconds)
        self.nodes: dict[str, float] = {}
        #: node -> gpu -> minute (epoch s // 60) -> [util sum, util n, power sum, power n, power limit]
        self.gpus: dict[str, dict[str, dict[int, list[float]]]] = {}

    # ---- input
    def add_events(self, events: list[TraceEvent]) -> None:
        for ev in sorted((e for e in events if is_progress(e.phase)), key=lambda e: e.end_us):
            entry = self.ranks.get(ev.node)
            if entry is None:
                entry = self.ranks[ev.node] = [ev.end_us, ev.end_us, 0, 0, 0]
            if ev.phase == EXIT_PHASE:
                entry[4] = 1
                entry[1] = max(entry[1], ev.end_us)
                continue
            if len(entry) < 5:
                entry.append(0)
            entry[4] = 0  # progress after an exit: a new process of the same rank (a restart)
            if ev.end_us > entry[1]:
                entry[3] = max(entry[3], ev.end_us - entry[1])
                entry[1] = ev.end_us
            entry[0] = min(entry[0], ev.end_us)
            entry[2] += 1

    def add_system(self, node: str, records: list[dict[str, Any]]) -> None:
        """The newest record of ``node`` (records come in time order; two lookups per chunk, not per record)."""
        if not records:
            return
        newest = max(records[0]["Timestamp"], records[-1]["Timestamp"])
        if newest > self.nodes.get(node, 0.0):
            self.nodes[node] = newest

    def add_window(self, window: SystemWindow) -> None:
        """The GPU utilisation and power of a window (closed, or still open when a hang keeps it open), by minute."""
        minute = int(window.start_us // 60_000_000)
        for node, gpus in window.gpu_util.items():
            health = window.health.get(node, {})
            per_node = self.gpus.setdefault(node, {})
            for gpu, values in gpus.items():
                minutes = per_node.setdefault(gpu, {})
                bucket = minutes.get(minute)
                if bucket is None:
                    bucket = minutes[minute] = [0.0, 0, 0.0, 0, 0.0]
                    for old in sorted(minutes)[:-GPU_MINUTES_KEPT]:
                        del minutes[old]
                power, limit = health.get(gpu, {}).get("GPUPowerDraw", ()), health.get(gpu, {}).get("GPUPowerLimit", ())
                bucket[0] += sum(values)
                bucket[1] += len(values)
                bucket[2] += sum(power)
                bucket[3] += len(power)
                if limit:
                    bucket[4] = max(limit)

    def with_windows(self, windows: list[SystemWindow]) -> Progress:
        """A copy that also holds the GPU data of the windows still open (a hang keeps them open)."""
        view = Progress.from_state(self.to_state())
        for window in windows:
            view.add_window(window)
        return view

    # ---- questions
    def newest_s(self) -> float | None:
        return max(self.nodes.values(), default=None)

    def gpu_signature(self, node: str, since_s: float) -> dict[str, dict[str, float]]:
        """Per GPU of ``node``: mean utilisation and power (and power / limit) over the minutes from ``since_s``."""
        result = {}
        for gpu, minutes in self.gpus.get(node, {}).items():
            kept = [b for m, b in minutes.items() if (m + 1) * 60 > since_s]
            util_n, power_n = sum(b[1] for b in kept), sum(b[3] for b in kept)
            if not util_n:
                continue
            entry = {"utilization": sum(b[0] for b in kept) / util_n}
            if power_n:
                entry["power_w"] = sum(b[2] for b in kept) / power_n
                limit = max((b[4] for b in kept), default=0.0)
                if limit > 0:
                    entry["power_share"] = entry["power_w"] / limit
            result[gpu] = entry
        return result

    # ---- persistence
    def to_state(self) -> dict[str, Any]:
        return {"ranks": self.ranks, "nodes": self.nodes,
                "gpus": {n: {g: [[m, *b] for m, b in ms.items()] for g, ms in gs.items()} for n, gs in self.gpus.items()}}

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> Progress:
        progress = cls()
        if not state:
            return progress
        progress.ranks = {k: list(v) for k, v in state.get("ranks", {}).items()}
        progress.nodes = dict(state.get("nodes", {}))
        progress.gpus = {n: {g: {int(row[0]): list(row[1:]) for row in rows} for g, rows in gs.items()}
                         for n, gs in state.get("gpus", {}).items()}
        return progress
