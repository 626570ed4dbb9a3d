"""Node shards: the system-metrics files of some nodes read elsewhere, merged into the job's evaluation as if read here.

A node shard reads, decodes and validates its nodes' files and groups their records into the evaluation's windows
exactly as the job's own run would (the same ``reading.consume`` into an evaluator with the job's clock and window
tests), one file at a time. What it hands back per file (a :class:`FileDigest`) is that file's per-window, per-node
partial window: the GPU values, the per-timestamp network and memory sums, and each run of one node and timestamp in
the layout an open window keeps (window.py): closed, as its value counts, the counts past the rules' thresholds
(``WindowTests``) and its per-column sum; plus the file's counters (records, damaged lines, problems noted).

The job's run merges the digests file by file, at each file's turn in the time order it reads everything else in:
runs, per-timestamp sums, dictionary orders and counters come out as the single-process reading gives them, and the
rules see the same windows. The sums stay exact because a run that may continue one the job's window holds open (the
first of each window in a file, the last one, and any whose node and timestamp this shard met before) is handed back
with its values, and closed at the merge as reading it here would; a closed run adds its sum to a timestamp the job's
window has not summed yet (only a timestamp split between files read by different runs of the job is summed in
another grouping). Records for windows the job already evaluated are counted late at the merge, as they would be
when read here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .engine import Evaluator
from .progress import Progress
from .readers import ParseStats, SystemFile
from .reading import Budget, Version, _prefetch, consume, note_foreign_records
from .rules import Facts
from .storage import Store
from .window import RUN_COLUMNS, SystemWindow, WindowTests

RAW, CLOSED = 0, 1  # a digest window's steps: [RAW, run with its values] or [CLOSED, closed run, per-column sums]


def thresholds(evaluator: Evaluator) -> WindowTests:
    """What the configured rules count in a window's runs (engine's window tests): the shards count the same."""
    return dict(evaluator.window_tests)


@dataclass
class ShardFile:
    """One listed system file as the job's run listed it."""

    key: str
    etag: str | None = None
    known: Version = None  # what the job consumed of it before (a key uploaded again)
    reread: bool = False

    def to_state(self) -> list[Any]:
        return [self.key, self.etag, self.known, self.reread]

    @classmethod
    def from_state(cls, state: list[Any]) -> ShardFile:
        return cls(str(state[0]), state[1], state[2], bool(state[3]))


@dataclass
class FileDigest:
    key: str
    version: Version
    windows: list[dict[str, Any]] = field(default_factory=list)  # partial SystemWindow states, reduced
    counters: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    newest: dict[str, float] = field(default_factory=dict)  # node -> newest record (progress.py)

    def to_state(self) -> dict[str, Any]:
        return {"key": self.key, "version": self.version, "windows": self.windows, "counters": self.counters,
                "problems": self.problems, "newest": self.newest}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> FileDigest:
        return cls(state["key"], state["version"], list(state["windows"]), dict(state["counters"]),
                   list(state["problems"]), dict(state["newest"]))


def digest_files(store: Store, files: Iterable[ShardFile], *, origin_us: int, scan_us: int,
                 limits: WindowTests, read_workers: int = 4,
                 sizes: dict[str, int] | None = None) -> list[FileDigest]:
    """Read ``files`` (one or more nodes' system files, in the job's time order) into digests; ``limits``: the job's
    window tests (:func:`thresholds`)."""
    files = list(files)
    scratch = _Scratch([], scan_interval_us=scan_us, strict=False)
    scratch.window_tests = dict(limits)
    scratch.origin_us = origin_us  # next_window stays 0: the merge counts what came too late for the job's windows
    seen: set[tuple[int, str, float]] = set()
    scratch.seen = seen
    budget = Budget()
    digests = []
    for file, (_, data) in zip(files, _prefetch(store, [f.key for f in files], read_workers, sizes), strict=True):
        item = _system_file(file.key)
        scratch.stats, scratch.facts, scratch.progress = ParseStats(), Facts(), Progress()
        scratch.pending_system, scratch.early_records, scratch.misplaced_records = {}, 0, 0
        foreign = budget.foreign_records
        version = consume(scratch, item, data, file.etag, file.known, file.reread, budget)
        del data
        stats = scratch.stats
        counters = {"files": stats.files, "bytes": stats.bytes, "records": stats.records,
                    "bad_lines": stats.bad_lines, "bad_files": stats.bad_files,
                    "system_files": scratch.facts.system_files, "system_records": scratch.facts.system_records,
                    "early_records": scratch.early_records, "misplaced_records": scratch.misplaced_records,
                    "foreign_records": budget.foreign_records - foreign}
        windows = [_digest_window(w, seen) for w in scratch.pending_system.values()]
        digests.append(FileDigest(file.key, version, windows, counters, list(stats.problems),
                                  dict(scratch.progress.nodes)))
    return digests


class _ShardWindow(SystemWindow):
    """A window of one file read in a shard: each run closed as the next starts is kept as a step (window.py's closed
    layout and its per-column sums, or its values where the merge must close it itself)."""

    __slots__ = ("seen", "steps")

    def __init__(self, index: int, start_us: int, end_us: int, tests: WindowTests | None, seen: set[Any]):
        super().__init__(index, start_us, end_us, tests)
        self.seen = seen
        self.steps: list[list[Any]] = []

    def _close(self, run: list[Any]) -> None:
        key = (self.index, run[5], run[0])
        raw = not self.steps or key in self.seen
        self.seen.add(key)
        if raw:
            self.steps.append([RAW, run])
            return
        ts, node = run[0], run[5]
        closed: list[Any] = [ts, None, None, None, None, node]
        sums: list[float] = [0.0, 0.0, 0.0, 0.0]
        for _, column in RUN_COLUMNS:
            values = run[column]
            tests = self.tests.get(column, ())
            closed[column] = [len(values), *[_count(values, op, limit) for op, limit in tests]] if values else [0]
            sums[column - 1] = sum(values, 0.0)
        self.steps.append([CLOSED, closed, sums])


def _count(values: list[float], op: str, limit: float) -> int:
    if op == ">":
        return len([v for v in values if v > limit])
    return len([v for v in values if v < limit])


class _Scratch(Evaluator):
    """The shard's evaluator: the job's clock and window tests, windows that keep their steps."""

    seen: set[Any]

    def _window(self, k: int) -> SystemWindow:
        window = self.pending_system.get(k)
        if window is None:
            start, end = self._window_bounds(k)
            window = self.pending_system[k] = _ShardWindow(k, start, end, self.window_tests, self.seen)
        return window


def _system_file(key: str) -> SystemFile:
    from .readers import parse_system_key

    parsed = parse_system_key(key)
    if parsed is None:
        raise ValueError(f"{key}: not a system metrics file name")
    return parsed


def _digest_window(window: SystemWindow, seen: set[Any]) -> dict[str, Any]:
    """The file's part of one window: its steps, the open run last (with its values), and what add() kept per record."""
    steps = list(getattr(window, "steps", []))
    if window._run is not None:
        run = window._run
        seen.add((window.index, run[5], run[0]))
        steps.append([RAW, run])
    return {
        "index": window.index,
        "tests": [[column, [list(t) for t in found]] for column, found in window.tests.items()],
        "gpu_util": window.gpu_util,
        "gpu_mem": window.gpu_mem,
        "health": window.health,
        "cpu_names": sorted(n for n in window.cpu_names if n is not None),
        "gpu_names": sorted(n for n in window.gpu_names if n is not None),
        "sums": {m: {node: list(d.items()) for node, d in window.sums[m].items()} for m in ("Network", "CPU memory")},
        "steps": steps,
        "min_ts": window.min_ts,
        "max_ts": window.max_ts,
        "records": window.records,
    }


def apply(evaluator: Evaluator, file: SystemFile, digest: FileDigest) -> Version:
    """Merge one file's digest into ``evaluator`` at the file's turn: what reading the file here would have done."""
    counters = digest.counters
    stats = evaluator.stats
    stats.files += counters["files"]
    stats.bytes += counters["bytes"]
    stats.records += counters["records"]
    stats.bad_lines += counters["bad_lines"]
    stats.bad_files += counters["bad_files"]
    for problem in digest.problems:
        stats.note(problem)
    evaluator.facts.system_files += counters["system_files"]
    evaluator.facts.system_records += counters["system_records"]
    evaluator.early_records += counters["early_records"]
    evaluator.misplaced_records += counters["misplaced_records"]
    note_foreign_records(evaluator, counters.get("foreign_records", 0))
    nodes = evaluator.progress.nodes
    for node, newest in digest.newest.items():
        if newest > nodes.get(node, 0.0):
            nodes[node] = newest
    for partial in digest.windows:
        index = partial["index"]
        if index < evaluator.next_window:
            evaluator.late_records += partial["records"]
            evaluator._late[file.key] = evaluator._late.get(file.key, 0) + partial["records"]
            continue
        merge_window(evaluator._window(index), partial)
    evaluator.flush_problems()
    return digest.version


def merge_window(target: SystemWindow, partial: dict[str, Any]) -> None:
    """``target`` as if the partial window's records had been added to it after its own (SystemWindow.add)."""
    tests = {int(column): tuple((str(op), limit) for op, limit in found) for column, found in partial["tests"]}
    if tests != target.tests:
        raise ValueError(f"window {target.index}: a node shard counted the tests {tests}, the job's window keeps "
                         f"{target.tests}; the shard's plan must carry the evaluator's window tests")
    for step in partial["steps"]:
        open_run = target._run
        if step[0] == RAW:
            run = step[1]
            if open_run is not None and open_run[0] == run[0] and open_run[5] == run[5]:
                for column in (1, 2, 3, 4):
                    open_run[column].extend(run[column])
                continue
            if open_run is not None:
                target._close(open_run)
            target._run = [run[0], list(run[1]), list(run[2]), list(run[3]), list(run[4]), run[5]]
            continue
        if open_run is not None:
            target._close(open_run)
            target._run = None
        closed, sums = step[1], step[2]
        ts, node = closed[0], closed[5]
        for metric, column in RUN_COLUMNS:
            if closed[column][0]:
                d = target.sums[metric].setdefault(node, {})
                d[ts] = d.get(ts, 0.0) + sums[column - 1]
        target.runs.append([ts, list(closed[1]), list(closed[2]), list(closed[3]), list(closed[4]), node])
    for mine, theirs in ((target.gpu_util, partial["gpu_util"]), (target.gpu_mem, partial["gpu_mem"])):
        for node, gpus in theirs.items():
            per_node = mine.setdefault(node, {})
            for gpu, values in gpus.items():
                per_node.setdefault(gpu, []).extend(values)
    for node, gpus in partial["health"].items():
        per_node = target.health.setdefault(node, {})
        for gpu, dims in gpus.items():
            per_gpu = per_node.setdefault(gpu, {})
            for dim, values in dims.items():
                per_gpu.setdefault(dim, []).extend(values)
    target.cpu_names.update(partial["cpu_names"])
    target.gpu_names.update(partial["gpu_names"])
    for metric, nodes in partial["sums"].items():
        for node, pairs in nodes.items():
            per_node = target.sums[metric].setdefault(node, {})
            for ts, total in pairs:
                ts = float(ts)
                per_node[ts] = per_node.get(ts, 0.0) + total
    low, high = partial["min_ts"], partial["max_ts"]
    if low is not None:
        target.min_ts = low if target.min_ts is None else min(target.min_ts, low)
    if high is not None:
        target.max_ts = high if target.max_ts is None else max(target.max_ts, high)
    target.records += partial["records"]
