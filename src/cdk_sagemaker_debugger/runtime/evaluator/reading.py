"""Reading a store of profiler files: listing new keys with a cursor, prefetching reads within a byte budget, and
feeding the window loop (engine.py) in time order; :func:`evaluate_store` evaluates a whole store at once."""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Protocol

from .caps import CapExceeded, Caps, cap_reason
from .contract_shared import reported_text
from .engine import (
    FRAMEWORK_LOOKAHEAD_US,
    STATUS_ERROR,
    Evaluator,
    RuleConfig,
    iso_us,
)
from .readers import (
    END_MARKERS,
    FrameworkFile,
    ParseStats,
    SystemFile,
    inflate,
    iter_system_records,
    label_key,
    parse_framework_key,
    parse_system_key,
    parse_trace,
)
from .storage import EvaluationInputError, Store, StoredObject

#: What a cursor remembers of a key it consumed: [size listed, ETag, sha256 and length of the JSON bytes evaluated],
#: or None (never re-read).
Version = list[Any] | None


@dataclass
class Cursor:
    """Which keys under one prefix were consumed: everything up to ``start_after`` plus the ``seen`` keys after it,
    each with the version that was read (size, ETag, digest), so a key uploaded again (a minute that was flushed early
    and then completed) is read again for what was added.

    Listing restarts a few minutes behind the newest key, so files that arrive late for another node are still found.
    """

    start_after: str | None = None
    seen: dict[str, Version] = field(default_factory=dict)

    def to_state(self) -> dict[str, Any]:
        return {"start_after": self.start_after, "seen": dict(sorted(self.seen.items()))}

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> Cursor:
        if not state:
            return cls()
        start_after, seen = state.get("start_after"), state.get("seen", {})
        if isinstance(seen, list):
            seen = dict.fromkeys(seen)
        if (not (start_after is None or isinstance(start_after, str)) or not isinstance(seen, dict)
                or not all(isinstance(k, str) and (v is None or isinstance(v, list)) for k, v in seen.items())):
            raise TypeError(f"a cursor holds keys (strings) and versions, not {start_after!r} and {seen!r:.80}")
        return cls(start_after, dict(seen))

    def changed(self, key: str, size: int, etag: str | None) -> bool | None:
        """None: never consumed; False: consumed in this version (or not to be re-read); True: a new version."""
        if key not in self.seen:
            return None
        known = self.seen[key]
        if not known:
            return False
        return known[0] != size or (etag is not None and known[1] is not None and known[1] != etag)

    def advance(self, consumed: list[tuple[int, str]], trailing_us: int = 300_000_000,
                versions: dict[str, Version] | None = None) -> None:
        """``consumed``: (timestamp, key) pairs read in this run, in order; ``versions``: what was read of each."""
        versions = versions or {}
        self.seen.update((key, versions.get(key)) for _, key in consumed)
        if not consumed:
            return
        newest = max(ts for ts, _ in consumed)
        keep_from = newest - trailing_us
        behind = sorted(key for ts, key in consumed if ts <= keep_from)
        if behind:
            candidate = behind[-1]
            if self.start_after is None or candidate > self.start_after:
                self.start_after = candidate
        if self.start_after is not None:
            self.seen = {k: v for k, v in self.seen.items() if k > self.start_after}


@dataclass
class Listing:
    system: list[SystemFile]
    framework: list[FrameworkFile]
    ended: bool
    sizes: dict[str, int] = field(default_factory=dict)
    etags: dict[str, str | None] = field(default_factory=dict)
    #: keys read before in another version: what was evaluated of them (only what was appended since is evaluated)
    reread: dict[str, Version] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)  # keys named with a time in the future: never read
    problems: list[str] = field(default_factory=list)  # what the store could not list (unreadable folders)
    foreign: int = 0  # files named for a node outside the job's cluster: ignored (never read) and counted
    nodes: int | None = None  # the job's instance count (None: any node)


FUTURE_TOLERANCE_US = 86_400_000_000  # a file named more than a day after now is a stray, not profiler output
# A minute of a 192-vCPU node sampled every 100 ms is about 30 MB and framework files rotate at 10 MB; a file many
# times larger would only exhaust the memory of the Lambda.
MAX_FILE_BYTES = 256 << 20
# A framework file named more than this before the first system file does not move T0 (a stray, not the job's start).
MAX_ORIGIN_LEAD_US = 86_400_000_000


_CLUSTER_NODE = re.compile(r"algo-(\d{1,9})(?:-\d+)?")


def in_cluster(node: str, nodes: int | None) -> bool:
    """Whether a file's node (``algo-3``, or ``algo-3-51`` for rank 51's traces) is one of the job's ``nodes``
    instances, ``algo-1`` .. ``algo-<nodes>``; with ``nodes`` None (a folder evaluated on its own) any node is."""
    if nodes is None:
        return True
    match = _CLUSTER_NODE.fullmatch(node)
    return match is not None and 1 <= int(match.group(1)) <= nodes


def list_new_files(store: Store, system_cursor: Cursor, framework_cursor: Cursor, *,
                   now_us: float | None = None, nodes: int | None = None) -> Listing:
    """The files not consumed yet, in time order. Files named with a time more than a day in the future are listed
    as ``ignored``: read, one would hold the job's clock (its last window) in the future forever. With ``nodes``
    (the job's instance count), files of any other node are ``ignored`` too, and counted in ``foreign``."""
    limit = (time.time() * 1e6 if now_us is None else now_us) + FUTURE_TOLERANCE_US
    listing = Listing([], [], False, nodes=nodes)
    for obj in store.list("system/", system_cursor.start_after):
        parsed = parse_system_key(obj.key)
        if parsed:
            _admit_version(listing, listing.system, parsed, obj, system_cursor, limit)
    for obj in store.list("framework/pevents/", framework_cursor.start_after):
        parsed_fw = parse_framework_key(obj.key)
        if parsed_fw:
            _admit_version(listing, listing.framework, parsed_fw, obj, framework_cursor, limit)
    listing.system.sort()
    listing.framework.sort()
    listing.ended = any(store.exists(marker) for marker in END_MARKERS)
    listing.problems += store_problems(store)
    return listing


def _admit_version(listing: Listing, files: list[Any], parsed: SystemFile | FrameworkFile, obj: StoredObject,
                   cursor: Cursor, limit: float) -> None:
    """List a key never consumed, or consumed in another version (then remembered in ``listing.reread``)."""
    changed = cursor.changed(obj.key, obj.size, obj.etag)
    if changed is False:
        return
    if changed:
        listing.reread[obj.key] = cursor.seen[obj.key]
    listing.etags[obj.key] = obj.etag
    _admit(listing, files, parsed, obj.size, limit)


def _admit(listing: Listing, files: list[Any], parsed: SystemFile | FrameworkFile, size: int, limit: float) -> None:
    problem = None
    if not in_cluster(parsed.node, listing.nodes):
        listing.ignored.append(parsed.key)
        listing.foreign += 1
        return
    if parsed.timestamp_us > limit:
        problem = f"named with a time in the future ({iso_us(parsed.timestamp_us)})"
    elif size > MAX_FILE_BYTES:
        problem = f"{size / 1e6:,.0f} MB, more than any profiler file ({MAX_FILE_BYTES >> 20} MB at most)"
    if problem:
        listing.ignored.append(parsed.key)
        listing.problems.append(f"{label_key(parsed.key)}: {problem}; not read")
        return
    files.append(parsed)
    listing.sizes[parsed.key] = size


def store_problems(store: Store) -> list[str]:
    """What the store could not list since it was last asked (a folder it cannot read), emptied on reading."""
    problems = getattr(store, "problems", None)
    if not problems:
        return []
    taken = list(problems)
    problems.clear()
    return taken


PREFETCH_BUDGET_BYTES = 48 << 20  # bytes read ahead at most (a 96-core, 100 ms minute file is about 15 MB)


def _prefetch(store: Store, keys: list[str], workers: int, sizes: dict[str, int] | None = None,
              budget: int = PREFETCH_BUDGET_BYTES) -> Iterator[tuple[str, bytes | Exception]]:
    """Read keys in order with a few reads in flight (S3 latency dominates small files), never more than ``budget``
    bytes ahead of the file being evaluated."""
    if workers <= 1:
        for key in keys:
            try:
                yield key, store.read(key)
            except Exception as exc:  # reported per file, never fatal
                yield key, exc
        return
    sizes = sizes or {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        inflight: deque[tuple[str, Future[bytes]]] = deque()
        pending = deque(keys)
        ahead = 0
        while pending or inflight:
            while pending and (not inflight or (len(inflight) < workers * 2
                                                and ahead + sizes.get(pending[0], 0) <= budget)):
                key = pending.popleft()
                ahead += sizes.get(key, 0)
                inflight.append((key, pool.submit(store.read, key)))
            key, fut = inflight.popleft()
            ahead -= sizes.get(key, 0)
            try:
                data: bytes | Exception = fut.result()
            except Exception as exc:
                data = exc
            yield key, data
            del data


@dataclass
class RunOutcome:
    complete: bool  # every listed file was consumed and every complete window evaluated
    windows: int
    system_consumed: list[tuple[int, str]]
    framework_consumed: list[tuple[int, str]]
    ignored: list[str] = field(default_factory=list)
    versions: dict[str, Version] = field(default_factory=dict)  # what was read of each consumed key


#: ``progress(files done, files listed, counters so far)``: the counters give bytes and records read for a progress bar.
ProgressCallback = Callable[[int, int, ParseStats], None]


class _Horizons:
    """How far each stream has been read: windows may close up to there."""

    def __init__(self, evaluator: Evaluator, system: list[SystemFile], framework: list[FrameworkFile], ended: bool):
        self.evaluator = evaluator
        self.system = [f.timestamp_us for f in system]
        self.framework = [f.timestamp_us for f in framework]
        self.sys_pos = self.fw_pos = 0
        self.ended = ended
        self.no_framework_ever = evaluator.newest_framework_us is None

    def __call__(self) -> tuple[float, float]:
        evaluator = self.evaluator
        if self.sys_pos < len(self.system):
            sys_through: float = self.system[self.sys_pos] - 1
        else:
            sys_through = math.inf if self.ended else (evaluator.newest_system_us or 0)
        if self.fw_pos < len(self.framework):
            fw_through: float = self.framework[self.fw_pos] - 1
        elif self.ended or self.no_framework_ever:
            fw_through = math.inf
        else:
            fw_through = evaluator.newest_framework_us or 0
        return sys_through, fw_through


_NODE_ID, _DIMENSION, _NAME = itemgetter("NodeId"), itemgetter("Dimension"), itemgetter("Name")


class Budget:
    """What one run read of each node, held against the job's caps (caps.py): CapExceeded past one. Records whose
    ``NodeId`` is not the node their file is named for are dropped here and counted, never evaluated."""

    def __init__(self, caps: Caps | None = None):
        self.caps = caps or Caps()
        self.series: dict[str, set[tuple[str, str]]] = {}
        self.records: dict[tuple[str, int], int] = {}
        self.events: dict[tuple[str, int], int] = {}
        self.foreign_records = 0

    def system(self, file: SystemFile, chunk: list[dict[str, Any]]) -> list[dict[str, Any]]:
        node = file.node
        if set(map(_NODE_ID, chunk)) != {node}:
            kept = [r for r in chunk if r["NodeId"] == node]
            self.foreign_records += len(chunk) - len(kept)
            chunk = kept
        minute = file.timestamp_us // 60_000_000
        count = self.records[node, minute] = self.records.get((node, minute), 0) + len(chunk)
        if count > self.caps.records_per_node_minute:
            raise CapExceeded(cap_reason(
                f"{node} wrote more than {self.caps.records_per_node_minute:,} system records for the minute "
                f"{iso_us(minute * 60e6)} (the cap per node and minute)"))
        series = self.series.setdefault(node, set())
        series.update(zip(map(_DIMENSION, chunk), map(_NAME, chunk), strict=True))
        if len(series) > self.caps.series_per_node:
            raise CapExceeded(cap_reason(
                f"{node} wrote more than {self.caps.series_per_node:,} distinct system metric series (Dimension and "
                "Name; the cap per node)"))
        return chunk

    def framework(self, file: FrameworkFile, events: list[Any]) -> None:
        host = _CLUSTER_NODE.fullmatch(file.node)
        node = f"algo-{host.group(1)}" if host else reported_text(file.node, 40)
        minute = file.timestamp_us // 60_000_000
        count = self.events[node, minute] = self.events.get((node, minute), 0) + len(events)
        if count > self.caps.events_per_node_minute:
            raise CapExceeded(cap_reason(
                f"{node} wrote more than {self.caps.events_per_node_minute:,} framework events in the files of the "
                f"minute {iso_us(minute * 60e6)} (the cap per node and minute)"))


def _read_into(evaluator: Evaluator, item: SystemFile | FrameworkFile, key: str, data: bytes | Exception,
               budget: Budget) -> None:
    stats = evaluator.stats
    if isinstance(data, Exception):
        stats.bad_files += 1
        stats.note(f"{label_key(key)}: could not be read ({type(data).__name__}: {data})")
        if isinstance(item, SystemFile):
            evaluator.facts.system_files += 1
    elif isinstance(item, SystemFile):
        evaluator.facts.system_files += 1
        for chunk in iter_system_records(data, key, stats):
            chunk = budget.system(item, chunk)
            if chunk:
                evaluator.add_system_records(item, chunk)
        evaluator.flush_problems()
    else:
        events = parse_trace(data, item, stats)
        budget.framework(item, events)
        evaluator.add_framework_events(item, events)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def _appended_part(evaluator: Evaluator, item: SystemFile | FrameworkFile, key: str, data: bytes,
                   known: Version) -> bytes | None:
    """What to evaluate of a key read before in another version: a system file that grew by appending (a minute the
    sampler flushed early, then completed) gives the bytes after those evaluated; any other change is reported and
    not evaluated again (its records would count twice)."""
    size, digest = (known[-1], known[2]) if known and len(known) > 2 else (None, None)  # the JSON bytes evaluated
    if isinstance(item, SystemFile) and size is not None and len(data) > size and _digest(data[:size]) == digest:
        return data[size:]
    evaluator.stats.note(f"{label_key(key)}: uploaded again after it was evaluated ({size or 0:,} bytes, now {len(data):,}) and "
                         "not by appending to what was evaluated; the new version is not evaluated again")
    return None


def _framework_origin(evaluator: Evaluator, first: SystemFile, framework: list[FrameworkFile]) -> int | None:
    """The first framework file's time, which moves T0 when it is earlier than the first system file, unless it is
    named implausibly long before it (then it is reported and T0 stays the first system file)."""
    if not framework:
        return None
    if framework[0].timestamp_us < first.timestamp_us - MAX_ORIGIN_LEAD_US:
        evaluator.stats.note(f"{label_key(framework[0].key)}: named {iso_us(framework[0].timestamp_us)}, more than a "
                             f"day before the first system metrics file ({label_key(first.key)}); not used as the "
                             "job's start (T0)")
        return None
    return framework[0].timestamp_us


class Digests(Protocol):
    """System files a node shard already read (fanout.py): ``covers`` says which, ``apply`` merges one into the
    evaluator in place of reading it (at the file's turn in the time order) and returns what was read of it."""

    def covers(self, file: SystemFile) -> bool: ...

    def apply(self, evaluator: Evaluator, file: SystemFile) -> Version: ...


def prepare(evaluator: Evaluator, listing: Listing) -> bool:
    """Note the listing's problems and newest files and set T0 if unset; False: nothing to evaluate yet (no T0)."""
    for problem in listing.problems:
        evaluator.stats.bad_files += 1
        evaluator.stats.note(problem)
    if listing.foreign:
        evaluator.stats.foreign_files += listing.foreign
        evaluator.stats.note(f"{listing.foreign} file(s) named for a node outside the job's cluster (algo-1 .. "
                             f"algo-{listing.nodes}) were not read")
    system, framework = listing.system, listing.framework
    evaluator.note_listing(system[-1].timestamp_us if system else None,
                           framework[-1].timestamp_us if framework else None)
    if evaluator.origin_us is None:
        if not system:
            return False
        evaluator.set_origin(system[0].timestamp_us, _framework_origin(evaluator, system[0], framework))
    return True


def consume(evaluator: Evaluator, item: SystemFile | FrameworkFile, data: bytes | Exception, etag: str | None,
            known: Version | None, reread: bool, budget: Budget) -> Version:
    """Evaluate the bytes of one listed file (or its read failure); returns what was read of it (None: nothing).
    ``reread``: the key was consumed before in the version ``known``; only what was appended since is evaluated.
    ``budget``: what this run read so far, held against the job's caps (CapExceeded past one)."""
    key = item.key
    version: Version = None
    if not isinstance(data, Exception):
        listed_size = len(data)
        try:
            data = inflate(data, MAX_FILE_BYTES)
        except ValueError as exc:
            data = ValueError(f"{exc}; the file is not evaluated")
    if not isinstance(data, Exception):
        version = [listed_size, etag, _digest(data), len(data)]
        if reread:
            data = _appended_part(evaluator, item, key, data, known)
    if data is not None:
        _read_into(evaluator, item, key, data, budget)
    return version


def note_foreign_records(evaluator: Evaluator, count: int) -> None:
    if count:
        evaluator.stats.foreign_records += count
        evaluator.stats.note(f"{count:,} record(s) whose NodeId is not the node their file is named for were not "
                             "evaluated")


def feed(evaluator: Evaluator, store: Store, listing: Listing, *, final: bool, deadline: float | None = None,
         progress: ProgressCallback | None = None, read_workers: int = 4, caps: Caps | None = None,
         digests: Digests | None = None, prepared: bool = False) -> RunOutcome:
    """Read the listed files in time order into ``evaluator`` and evaluate every window that becomes complete.

    ``final`` says no more files will ever come (a post-hoc run, or training has ended). ``deadline``
    (``time.monotonic()``) stops reading and evaluating; the outcome is then not complete. Raises ``CapExceeded``
    when the files go past one of ``caps`` (caps.py): the job's evaluation ends there. ``digests``: system files
    node shards read (fanout.py), merged at their turn instead of being read here. ``prepared``: :func:`prepare` was
    called already.
    """
    if not prepared and not prepare(evaluator, listing):
        return RunOutcome(True, 0, [], [], list(listing.ignored))
    if evaluator.origin_us is None:
        return RunOutcome(True, 0, [], [], list(listing.ignored))
    budget = Budget(caps)
    try:
        return _feed(evaluator, store, listing, final, deadline, progress, read_workers, budget, digests)
    finally:
        note_foreign_records(evaluator, budget.foreign_records)


def _feed(evaluator: Evaluator, store: Store, listing: Listing, final: bool, deadline: float | None,
          progress: ProgressCallback | None, read_workers: int, budget: Budget,
          digests: Digests | None) -> RunOutcome:
    system, framework = listing.system, listing.framework
    ended = final or listing.ended
    # Interleave: framework files are read up to four minutes ahead of the system clock.
    order: list[tuple[int, int, Any]] = [(f.timestamp_us, 1, f) for f in system]
    order += [(f.timestamp_us - FRAMEWORK_LOOKAHEAD_US - 60_000_000, 0, f) for f in framework]
    order.sort(key=lambda item: (item[0], item[1], item[2].key))
    horizons = _Horizons(evaluator, system, framework, ended)
    outcome = RunOutcome(True, 0, [], [], list(listing.ignored))

    def digested(item: Any) -> bool:
        return digests is not None and isinstance(item, SystemFile) and digests.covers(item)

    keys = [item[2].key for item in order if not digested(item[2])]
    reads = _prefetch(store, keys, read_workers, listing.sizes)
    for done, (_, _, item) in enumerate(order):
        key = item.key
        if digests is not None and digested(item):
            version = digests.apply(evaluator, item)
        else:
            _, data = next(reads)
            version = consume(evaluator, item, data, listing.etags.get(key), listing.reread.get(key),
                              key in listing.reread, budget)
            del data
        if version is not None:
            outcome.versions[key] = version
        if isinstance(item, SystemFile):
            horizons.sys_pos += 1
            outcome.system_consumed.append((item.timestamp_us, item.key))
        else:
            horizons.fw_pos += 1
            outcome.framework_consumed.append((item.timestamp_us, item.key))
        sys_through, fw_through = horizons()
        outcome.windows += evaluator.process(system_through_us=sys_through, framework_through_us=fw_through,
                                             ended=False, deadline=deadline)
        if progress:
            progress(done + 1, len(order), evaluator.stats)
        if deadline is not None and time.monotonic() > deadline and done + 1 < len(order):
            outcome.complete = False
            break
    reads.close()
    sys_through, fw_through = horizons()
    outcome.windows += evaluator.process(system_through_us=sys_through, framework_through_us=fw_through,
                                         ended=ended and outcome.complete, deadline=deadline)
    outcome.complete = outcome.complete and not evaluator.out_of_time
    return outcome


def evaluate_store(store: Store, configs: Iterable[RuleConfig], *, progress: ProgressCallback | None = None,
                   read_workers: int = 4, nodes: int | None = None) -> Evaluator:
    """Evaluate a finished (or still running) job's profiler output in one pass, as the CLI does. ``nodes``: the
    job's instance count, when known (files of other nodes are not read); the caps of caps.py apply.

    Raises ``EvaluationInputError`` when there is nothing to evaluate: no profiler output, or system metrics files
    none of which holds a usable record.
    """
    evaluator = Evaluator(list(configs))
    listing = list_new_files(store, Cursor(), Cursor(), nodes=nodes)
    unreadable = "".join(f"; {p}" for p in listing.problems[:3])
    if not listing.system:
        if listing.framework:
            raise EvaluationInputError(
                f"{store.describe()}: framework traces but no system metrics (system/incremental/...); the rules "
                f"measure time from the first system metrics file, so there is nothing to evaluate{unreadable}"
            )
        raise EvaluationInputError(
            f"{store.describe()}: no profiler output found (expected system/incremental/<hour>/<epoch>.algo-<n>.json "
            "files). Pass the profiler-output/ folder of a training job, or check that the profiler was enabled"
            f"{unreadable}."
        )
    try:
        feed(evaluator, store, listing, final=True, progress=progress, read_workers=read_workers)
    except CapExceeded as exc:
        raise EvaluationInputError(f"{store.describe()}: {exc}") from exc
    stats = evaluator.stats
    if stats.files == 0 and stats.bad_files:  # every read failed: verdicts on no data would pass for a clean run
        raise EvaluationInputError(
            f"{store.describe()}: none of the {stats.bad_files} profiler files could be read; the first failure: "
            f"{stats.problems[0] if stats.problems else 'unknown'}"
        )
    gap = evaluator.input_gap()
    if gap and gap[0] == STATUS_ERROR:
        raise EvaluationInputError(f"{store.describe()}: {gap[1].removeprefix('EvaluationInputError: ')}")
    return evaluator
