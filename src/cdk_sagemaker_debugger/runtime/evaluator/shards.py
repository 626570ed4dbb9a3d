"""Node shards: the system-metrics files of some nodes read elsewhere, merged into the job's evaluation as if read here.

A node shard reads, decodes and validates its nodes' files and groups their records into the evaluation's windows
exactly as the job's own run would (the same ``reading.consume`` into an evaluator with the job's clock), one file at
a time. What it hands back per file (a :class:`FileDigest`) is that file's per-window, per-node partial summaries: the
GPU values, the per-timestamp network and memory sums, and each timestamp's per-core CPU and I/O-wait values reduced
to a count, a sum and a count above each threshold the configured rules compare them with (columns.Column), plus the
file's counters (records, damaged lines, problems noted).

The job's run merges the digests file by file, at each file's turn in the time order it reads everything else in:
window contents, dictionary orders and counters come out as the single-process reading gives them, and the rules see
the same windows. The per-timestamp sums stay exact because a run whose node and timestamp was seen before in the
shard keeps its raw values (only a timestamp split between files read by different runs of the job is summed in
another grouping). Records for windows the job already evaluated are counted late at the merge, as they would be when
read here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .columns import Column
from .engine import Evaluator
from .progress import Progress
from .readers import ParseStats, SystemFile
from .reading import Version, _prefetch, consume
from .rules import Facts, _BottleneckRule
from .storage import Store
from .window import USAGE_METRICS, SystemWindow

CPU_COLUMN, IO_COLUMN = 2, 3


def thresholds(evaluator: Evaluator) -> dict[int, list[float]]:
    """What the configured rules compare a run's CPU and I/O-wait values with: the columns are reduced for these."""
    found: dict[int, set[float]] = {CPU_COLUMN: set(), IO_COLUMN: set()}
    for run in evaluator.runs:
        for rule in run.rules:
            if isinstance(rule, _BottleneckRule):
                found[rule.HIGH_COLUMN].add(float(rule.params[rule.HIGH_PARAMETER]))
    return {column: sorted(values) for column, values in found.items()}


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
                 limits: dict[int, list[float]], read_workers: int = 4,
                 sizes: dict[str, int] | None = None) -> list[FileDigest]:
    """Read ``files`` (one or more nodes' system files, in the job's time order) into digests."""
    files = list(files)
    scratch = Evaluator([], scan_interval_us=scan_us, strict=False)
    scratch.origin_us = origin_us  # next_window stays 0: the merge counts what came too late for the job's windows
    seen: set[tuple[int, str, float]] = set()
    digests = []
    for file, (_, data) in zip(files, _prefetch(store, [f.key for f in files], read_workers, sizes), strict=True):
        item = _system_file(file.key)
        scratch.stats, scratch.facts, scratch.progress = ParseStats(), Facts(), Progress()
        scratch.pending_system, scratch.early_records, scratch.misplaced_records = {}, 0, 0
        version = consume(scratch, item, data, file.etag, file.known, file.reread)
        del data
        stats = scratch.stats
        counters = {"files": stats.files, "bytes": stats.bytes, "records": stats.records,
                    "bad_lines": stats.bad_lines, "bad_files": stats.bad_files,
                    "system_files": scratch.facts.system_files, "system_records": scratch.facts.system_records,
                    "early_records": scratch.early_records, "misplaced_records": scratch.misplaced_records}
        windows = [_reduced(w, limits, seen) for w in scratch.pending_system.values()]
        digests.append(FileDigest(file.key, version, windows, counters, list(stats.problems),
                                  dict(scratch.progress.nodes)))
    return digests


def _system_file(key: str) -> SystemFile:
    from .readers import parse_system_key

    parsed = parse_system_key(key)
    if parsed is None:
        raise ValueError(f"{key}: not a system metrics file name")
    return parsed


def _reduced(window: SystemWindow, limits: dict[int, list[float]], seen: set[tuple[int, str, float]]
             ) -> dict[str, Any]:
    """The window's state with the CPU and I/O-wait values of its runs reduced, except where the merge needs them
    raw: the first run (the job's open run of that node and timestamp may continue in it) and any run whose node and
    timestamp this shard met before (finalize then sums them onto an earlier run's total, value by value)."""
    for position, run in enumerate(window.runs):
        key = (window.index, run[5], run[0])
        repeated = key in seen
        seen.add(key)
        if position == 0 or repeated:
            continue
        for column in (CPU_COLUMN, IO_COLUMN):
            if run[column]:
                run[column] = Column.of(run[column], tuple(limits.get(column, ())))
    return window.to_state()


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
    nodes = evaluator.progress.nodes
    for node, newest in digest.newest.items():
        if newest > nodes.get(node, 0.0):
            nodes[node] = newest
    for state in digest.windows:
        partial = SystemWindow.from_state(state)
        if partial.index < evaluator.next_window:
            evaluator.late_records += partial.records
            evaluator._late[file.key] = evaluator._late.get(file.key, 0) + partial.records
            continue
        merge_window(evaluator._window(partial.index), partial)
    evaluator.flush_problems()
    return digest.version


def merge_window(target: SystemWindow, partial: SystemWindow) -> None:
    """``target`` as if the partial window's records had been added to it after its own (SystemWindow.add)."""
    runs = partial.runs
    open_run = target._run
    if runs and open_run is not None and open_run[0] == runs[0][0] and open_run[5] == runs[0][5]:
        head, runs = runs[0], runs[1:]
        for column in (1, 2, 3, 4):
            open_run[column].extend(head[column])  # a list or a Column; the head itself is never reduced (_reduced)
    target.runs.extend(runs)
    if target.runs:
        target._run = target.runs[-1]
    for mine, theirs in ((target.gpu_util, partial.gpu_util), (target.gpu_mem, partial.gpu_mem)):
        for node, gpus in theirs.items():
            per_node = mine.setdefault(node, {})
            for gpu, values in gpus.items():
                per_node.setdefault(gpu, []).extend(values)
    for node, gpus in partial.health.items():
        per_node = target.health.setdefault(node, {})
        for gpu, dims in gpus.items():
            per_gpu = per_node.setdefault(gpu, {})
            for dim, values in dims.items():
                per_gpu.setdefault(dim, []).extend(values)
    target.cpu_names |= partial.cpu_names
    target.gpu_names |= partial.gpu_names
    for metric in USAGE_METRICS:
        for node, sums in partial.sums[metric].items():
            per_node = target.sums[metric].setdefault(node, {})
            for ts, total in sums.items():
                per_node[ts] = per_node.get(ts, 0.0) + total
    if partial.min_ts is not None:
        target.min_ts = partial.min_ts if target.min_ts is None else min(target.min_ts, partial.min_ts)
    if partial.max_ts is not None:
        target.max_ts = partial.max_ts if target.max_ts is None else max(target.max_ts, partial.max_ts)
    target.records += partial.records
