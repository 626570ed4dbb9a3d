"""Parsers for the profiler's files: system metrics (JSON lines) and framework traces (Chrome trace arrays).

Both tolerate damage: a truncated or invalid line is counted and skipped, never fatal, because one bad upload must not
cost a whole job's verdict.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .contract_shared import reported_text

SYSTEM_KEY = re.compile(r"(?:^|/)system/.+/(\d{10})\.(algo-\d+)\.json(?:\.gz)?$")
FRAMEWORK_KEY = re.compile(
    r"(?:^|/)framework/pevents/(?:.+/)?(\d+)_([^/]+)_(pythontimeline|model_timeline|horovod_timeline|smdataparallel_timeline)"
    r"\.json(?:\.gz)?$"
)
END_MARKERS = ("system/training_job_end.ts", "framework/training_job_end.ts")

# Event order inside a window follows the reference reader: python timeline, model timeline, (TF), Horovod, SMDDP.
FRAMEWORK_KINDS = {
    "pythontimeline": (0, "PythontimelineMetrics"),
    "model_timeline": (1, "DetailedframeworkMetrics"),
    "horovod_timeline": (3, ""),
    "smdataparallel_timeline": (4, "SMDataParallelMetrics"),
}
_ALGO_NODE = re.compile(r"^(.+)-(algo-\d+)$")
# The layout the profiler and the sampler write: a key of this shape holds only digits and fixed words, so problems
# may name it; any other key is named by a hash of it (its text is whatever the writer chose, see label_key).
_CANONICAL_KEY = re.compile(
    r"(?:system/incremental/\d{10}/\d{10}\.algo-\d{1,6}\.json"
    r"|framework/pevents/\d{10}/\d{1,20}_\d{1,10}-algo-\d{1,6}_"
    r"(?:pythontimeline|model_timeline|horovod_timeline|smdataparallel_timeline)\.json"
    r"|algo-\d{1,6}/\d{5}/\d{12}\.jsonl"  # the tensor collector's step files (tensor_layout.py)
    r"|system/training_job_end\.ts|framework/training_job_end\.ts)(?:\.gz)?")
#: The longest problem line kept (each is one line: see ParseStats.note).
MAX_PROBLEM_CHARS = 500


GZIP_MAGIC = b"\x1f\x8b"


def inflate(data: bytes, limit: int) -> bytes:
    """A gzip-compressed profiler file (a ``.json.gz`` key, or ``Content-Encoding: gzip``, which S3 returns as
    stored) as its JSON bytes; other bytes unchanged. Raises ValueError past ``limit`` bytes (a decompression bomb)
    or when the stream is damaged."""
    if not data.startswith(GZIP_MAGIC):
        return data
    out, rest = bytearray(), data
    try:
        while rest.startswith(GZIP_MAGIC):  # concatenated members are one file, as gzip itself reads them
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out += inflater.decompress(rest, limit + 1 - len(out))
            if len(out) > limit:
                raise ValueError(f"more than {limit >> 20} MB once decompressed")
            if not inflater.eof:
                raise ValueError("the gzip stream is truncated")
            rest = inflater.unused_data
    except zlib.error as exc:
        raise ValueError(f"not a valid gzip stream ({exc})") from exc
    return bytes(out)


def label_key(key: str) -> str:
    """How problems, summaries and messages name a file: its key when it has the profiler's layout (digits and fixed
    words only), else ``file sha256:<12 hex digits of the key>``, never text the writer of the key chose."""
    if _CANONICAL_KEY.fullmatch(key):
        return key
    return f"file sha256:{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


@dataclass(frozen=True, order=True)
class SystemFile:
    timestamp_us: int
    key: str
    node: str


@dataclass(frozen=True, order=True)
class FrameworkFile:
    timestamp_us: int
    key: str
    node: str
    kind: str


def parse_system_key(key: str) -> SystemFile | None:
    match = SYSTEM_KEY.search(key)
    if not match:
        return None
    return SystemFile(int(match.group(1)) * 1_000_000, key, match.group(2))


def framework_node_id(token: str) -> str:
    """``51-algo-1`` (rank-host as written) becomes ``algo-1-51``, as the reference reader names nodes."""
    match = _ALGO_NODE.match(token)
    return f"{match.group(2)}-{match.group(1)}" if match else token


def parse_framework_key(key: str) -> FrameworkFile | None:
    match = FRAMEWORK_KEY.search(key)
    if not match:
        return None
    name = key.rsplit("/", 1)[-1]
    node_token = name.split("_")[1]
    return FrameworkFile(int(match.group(1)), key, framework_node_id(node_token), match.group(3))


@dataclass
class ParseStats:
    """Damage found while reading, reported with the verdicts."""

    files: int = 0
    bytes: int = 0
    records: int = 0
    bad_lines: int = 0
    bad_files: int = 0
    problems: list[str] = field(default_factory=list)
    #: records whose NodeId is not the node their file is named for: never evaluated (see reading.NodeAdmission)
    foreign_records: int = 0
    #: files named for a node outside the job's cluster (algo-1..algo-<instance count>): never read
    foreign_files: int = 0

    def note(self, message: str) -> None:
        """Keep a problem (at most 50, each once), as one line without control characters (see reported_text)."""
        message = reported_text(message, MAX_PROBLEM_CHARS)
        if len(self.problems) < 50 and message not in self.problems:
            self.problems.append(message)

    def merge(self, other: ParseStats) -> None:
        self.files += other.files
        self.bytes += other.bytes
        self.records += other.records
        self.bad_lines += other.bad_lines
        self.bad_files += other.bad_files
        self.foreign_records += other.foreign_records
        self.foreign_files += other.foreign_files
        for p in other.problems:
            self.note(p)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "bytes": self.bytes,
            "records": self.records,
            "bad_lines": self.bad_lines,
            "bad_files": self.bad_files,
            "problems": list(self.problems),
            "foreign_records": self.foreign_records,
            "foreign_files": self.foreign_files,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ParseStats:
        return cls(data["files"], data["bytes"], data["records"], data["bad_lines"], data["bad_files"],
                   [reported_text(p, MAX_PROBLEM_CHARS) for p in data["problems"]],
                   int(data.get("foreign_records", 0)), int(data.get("foreign_files", 0)))


class NonFiniteNumber(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity`` in a profiler file: not JSON, and poison for every statistic."""


def _reject_constant(name: str) -> Any:
    raise NonFiniteNumber(name)


def loads_finite(text: bytes | str) -> Any:
    """``json.loads`` that refuses NaN and infinities (C speed: only the three literals reach the hook)."""
    return json.loads(text, parse_constant=_reject_constant)


class FileDamage:
    """What was skipped in one file, reported as one problem line naming the file, the lines and why."""

    __slots__ = ("key", "reasons", "lines")

    def __init__(self, key: str):
        self.key = key
        self.reasons: dict[str, int] = {}
        self.lines: list[int] = []

    def add(self, reason: str, line: int | None = None, count: int = 1) -> None:
        self.reasons[reason] = self.reasons.get(reason, 0) + count
        if line is not None and len(self.lines) < 5:
            self.lines.append(line)

    @property
    def count(self) -> int:
        return sum(self.reasons.values())

    def report(self, stats: ParseStats, what: str = "line(s)") -> None:
        if not self.reasons:
            return
        stats.bad_lines += self.count
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(self.reasons.items(), key=lambda item: -item[1]))
        where = f" (line {', '.join(map(str, self.lines))}{', ...' if self.count > len(self.lines) else ''})" \
            if self.lines else ""
        stats.note(f"{label_key(self.key)}: skipped {self.count} {what}{where}: {why}")


SYSTEM_CHUNK_BYTES = 1 << 20  # ~8,000 records: a 15 MB minute file is never 130,000 dicts at once
SYSTEM_FIELDS = ("Dimension", "Value", "Timestamp", "NodeId", "Name")
NOT_JSON = "not valid JSON (truncated upload?)"
NON_FINITE = "with NaN or Infinity"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def system_record_problem(r: Any) -> str | None:
    """Why a decoded line is not a usable system record, or None."""
    if not isinstance(r, dict):
        return "not a JSON object"
    missing = [f for f in SYSTEM_FIELDS if f not in r]
    if missing:
        return "without " + "/".join(missing)
    if not (_is_number(r["Value"]) and _is_number(r["Timestamp"])):
        return "with a Value or Timestamp that is not a number"
    if not (math.isfinite(r["Value"]) and math.isfinite(r["Timestamp"])):
        return NON_FINITE
    if not all(isinstance(r[f], str) for f in ("Dimension", "NodeId", "Name")):
        return "with a Dimension, NodeId or Name that is not a string"
    return None


def _all_valid(records: list[Any]) -> bool:
    """The fast path: every record complete, finite and typed (Values made floats on the way). False: check one by
    one. ``x - x`` is 0 for a finite number and NaN (truthy) for NaN or an infinity; it raises for anything else."""
    text = str
    try:
        for r in records:
            v = r["Value"]
            t = r["Timestamp"]
            if v - v or t - t or type(r["NodeId"]) is not text or type(r["Name"]) is not text \
                    or type(r["Dimension"]) is not text:
                return False
            if type(v) is not float:
                if type(v) is bool:
                    return False
                r["Value"] = float(v)  # the agent writes 0 and 0.0
    except (KeyError, TypeError):
        return False
    return True


def _valid_records(records: list[Any], damage: FileDamage) -> list[dict[str, Any]]:
    if _all_valid(records):
        return records
    good = []
    for r in records:
        problem = system_record_problem(r)
        if problem:
            damage.add(problem)
        else:
            r["Value"] = float(r["Value"])
            good.append(r)
    return good


def _decode_lines(chunk: bytes, first_line: int, damage: FileDamage) -> list[Any]:
    """A damaged chunk, line by line: only the damaged lines are lost."""
    records = []
    for number, line in enumerate(chunk.split(b"\n"), start=first_line):
        line = line.strip()
        if not line:
            continue
        try:
            records.append(loads_finite(line))
        except NonFiniteNumber:
            damage.add(NON_FINITE, number)
        except ValueError:
            damage.add(NOT_JSON, number)
    return records


def iter_system_records(data: bytes, key: str, stats: ParseStats,
                        chunk_bytes: int = SYSTEM_CHUNK_BYTES) -> Iterator[list[dict[str, Any]]]:
    """Decode a JSON-lines system file a chunk of lines at a time (one ``json.loads`` per chunk), yielding the usable
    records of each chunk.

    Damage never costs more than the damaged lines: an undecodable line, NaN/Infinity, a missing field or a field of
    the wrong type skips that line only, and the file's damage is reported as one problem naming the file.
    """
    stats.files += 1
    stats.bytes += len(data)
    damage = FileDamage(key)
    size = len(data)
    pos = 0
    while pos < size:
        cut = data.find(b"\n", pos + chunk_bytes)
        end = size if cut < 0 else cut + 1
        chunk = data[pos:end].strip()
        records: list[Any] = []
        if chunk:
            try:
                records = loads_finite(b"[" + chunk.replace(b"\n", b",") + b"]")
            except ValueError:
                records = _decode_lines(data[pos:end], data.count(b"\n", 0, pos) + 1, damage)
        good = _valid_records(records, damage)
        pos = end
        if good:
            stats.records += len(good)
            yield good
    damage.report(stats)


def parse_system_lines(data: bytes, key: str, stats: ParseStats) -> list[dict[str, Any]]:
    """Every usable record of a JSON-lines system file (see ``iter_system_records``)."""
    records: list[dict[str, Any]] = []
    for chunk in iter_system_records(data, key, stats):
        records.extend(chunk)
    return records


@dataclass(slots=True)
class TraceEvent:
    """One framework event with absolute times in microseconds since the epoch."""

    phase: str
    name: str
    start_us: int
    end_us: int
    node: str
    args: dict[str, Any]
    file_type: str
    order: tuple[int, int, str, int]


def _decode_trace(data: bytes, key: str, stats: ParseStats, damage: FileDamage) -> list[Any]:
    try:
        events = json.loads(data)
        if isinstance(events, list):
            return events
        stats.bad_files += 1
        stats.note(f"{label_key(key)}: not a JSON array of trace events")
        return []
    except ValueError:
        pass
    # A damaged file: the writer puts one event per line, so salvage line by line.
    salvaged = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        line = line.strip().rstrip(b",")
        if line in (b"", b"[", b"]"):
            continue
        try:
            salvaged.append(json.loads(line))
        except ValueError:
            damage.add(NOT_JSON, number)
    stats.bad_files += 1
    stats.note(f"{label_key(key)}: invalid trace JSON; salvaged {len(salvaged)} event(s) line by line")
    return salvaged


class BadEvent(ValueError):
    """A trace event the evaluator cannot place in time; the message says why."""


def trace_micros(value: Any) -> int:
    """A trace time in microseconds: a finite number (or a numeric string), else ``BadEvent``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, (float, str)):
        try:
            number = float(value)
        except ValueError:
            raise BadEvent("with a time that is not a number") from None
        if not math.isfinite(number):
            raise BadEvent("with a NaN or infinite time")
        return int(number)
    raise BadEvent("with a missing time or one that is not a number")


_PIDS = (str, int, float, type(None))


class _TraceClock:
    """Per-file parser state: the time origin of the latest process_name record, phase names and open B events."""

    def __init__(self) -> None:
        self.origin: int | None = 0
        self.phases: dict[Any, str] = {}
        self.open_begins: dict[Any, list[dict[str, Any]]] = {}

    def metadata(self, ev: dict[str, Any], args: dict[str, Any]) -> None:
        if ev.get("name") != "process_name":
            return
        if "start_time_since_epoch_in_micros" in args:
            self.origin = None  # until it is known to be usable: later events cannot be placed in time
            self.origin = trace_micros(args["start_time_since_epoch_in_micros"])
        elif "name" in args:
            self.phases[ev.get("pid")] = str(args["name"])

    def place(self, ev: dict[str, Any], ph: Any) -> tuple[int, int, dict[str, Any]] | None:
        """(start, end, the event carrying name/pid/args) of an X event or a completed B/E pair; None otherwise."""
        if ph not in ("X", "B", "E"):
            return None
        if self.origin is None:
            raise BadEvent("after a process_name record whose start time is not a number")
        if ph == "X":
            start = self.origin + trace_micros(ev.get("ts"))
            return start, start + (trace_micros(ev["dur"]) if "dur" in ev else 0), ev
        if ph == "B":
            trace_micros(ev.get("ts"))
            self.open_begins.setdefault(ev.get("pid"), []).append(ev)
            return None
        stack = self.open_begins.get(ev.get("pid"))
        if not stack:
            return None
        end = self.origin + trace_micros(ev.get("ts"))
        begin = stack.pop()
        return self.origin + trace_micros(begin["ts"]), end, begin


def parse_trace(data: bytes, file: FrameworkFile, stats: ParseStats) -> list[TraceEvent]:
    """Chrome-trace events to absolute-time events: X as is, B/E paired per pid, M/i and the rest skipped.

    An event without a usable time (missing, not a number, NaN, infinite) or with a pid that is not a number or a
    string is skipped and counted; the file's damage is reported as one problem naming it.
    """
    stats.files += 1
    stats.bytes += len(data)
    rank, file_type = FRAMEWORK_KINDS[file.kind]
    clock = _TraceClock()
    damage = FileDamage(file.key)
    out: list[TraceEvent] = []
    for index, ev in enumerate(_decode_trace(data, file.key, stats, damage)):
        if not isinstance(ev, dict):
            damage.add("not a JSON object")
            continue
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        try:
            if not isinstance(ev.get("pid"), _PIDS):
                raise BadEvent("with a pid that is not a number or a string")
            if ev.get("ph") == "M":
                clock.metadata(ev, args)
                continue
            placed = clock.place(ev, ev.get("ph"))
        except BadEvent as exc:
            damage.add(str(exc))
            continue
        if placed is None:
            continue
        start, end, source = placed
        if source is not ev and isinstance(source.get("args"), dict):
            args = source["args"]
        pid = source.get("pid")
        out.append(TraceEvent(clock.phases.get(pid, str(pid)), str(source.get("name", "")), start, end, file.node,
                              args, file_type, (rank, file.timestamp_us, file.key, index)))
    damage.report(stats, "event(s)")
    stats.records += len(out)
    return out
