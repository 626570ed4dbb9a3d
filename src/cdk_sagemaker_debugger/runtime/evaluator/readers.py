"""Parsers for the profiler's files: system metrics (JSON lines) and framework traces (Chrome trace arrays).

Both tolerate damage: a truncated or invalid line is counted and skipped, never fatal, because one bad upload must not
cost a whole job's verdict.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

SYSTEM_KEY = re.compile(r"(?:^|/)system/.+/(\d{10})\.(algo-\d+)\.json$")
FRAMEWORK_KEY = re.compile(
    r"(?:^|/)framework/pevents/(?:.+/)?(\d+)_([^/]+)_(pythontimeline|model_timeline|horovod_timeline|smdataparallel_timeline)"
    r"\.json$"
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

    def note(self, message: str) -> None:
        if len(self.problems) < 50:
            self.problems.append(message)

    def merge(self, other: ParseStats) -> None:
        self.files += other.files
        self.bytes += other.bytes
        self.records += other.records
        self.bad_lines += other.bad_lines
        self.bad_files += other.bad_files
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
        }


def _valid_system_record(r: Any) -> bool:
    return (
        isinstance(r, dict)
        and isinstance(r.get("Dimension"), str)
        and isinstance(r.get("Timestamp"), (int, float))
        and isinstance(r.get("Value"), (int, float))
        and not isinstance(r.get("Value"), bool)
    )


def parse_system_lines(data: bytes, key: str, stats: ParseStats) -> list[dict[str, Any]]:
    """Decode a JSON-lines system file. One ``json.loads`` for the whole file; line by line only when damaged."""
    stats.files += 1
    stats.bytes += len(data)
    body = data.strip()
    if not body:
        return []
    try:
        records = json.loads(b"[" + body.replace(b"\n", b",") + b"]")
    except ValueError:
        records = []
        for number, line in enumerate(body.split(b"\n"), start=1):
            line = line.strip()
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except ValueError:
                stats.bad_lines += 1
                stats.note(f"{key}: line {number} is not valid JSON (truncated upload?)")
    try:
        # one cheap pass that both checks the fields and makes every Value a float (the agent writes 0 and 0.0)
        for r in records:
            r["Value"] = float(r["Value"])
            r["Timestamp"] + 0.0  # noqa: B018 - raises TypeError unless it is a number
            r["Dimension"]  # noqa: B018
        good = records
    except (KeyError, TypeError, ValueError):
        good = [r for r in records if _valid_system_record(r)]
        stats.bad_lines += len(records) - len(good)
        stats.note(f"{key}: {len(records) - len(good)} record(s) lack Dimension, Value or Timestamp")
        for r in good:
            r["Value"] = float(r["Value"])
    stats.records += len(good)
    return good


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


def _decode_trace(data: bytes, key: str, stats: ParseStats) -> list[Any]:
    try:
        events = json.loads(data)
        if isinstance(events, list):
            return events
        stats.bad_files += 1
        stats.note(f"{key}: not a JSON array of trace events")
        return []
    except ValueError:
        pass
    # A damaged file: the writer puts one event per line, so salvage line by line.
    salvaged = []
    bad = 0
    for line in data.split(b"\n"):
        line = line.strip().rstrip(b",")
        if line in (b"", b"[", b"]"):
            continue
        try:
            salvaged.append(json.loads(line))
        except ValueError:
            bad += 1
    stats.bad_lines += bad
    stats.bad_files += 1
    stats.note(f"{key}: invalid trace JSON; salvaged {len(salvaged)} event(s), skipped {bad} line(s)")
    return salvaged


def parse_trace(data: bytes, file: FrameworkFile, stats: ParseStats) -> list[TraceEvent]:
    """Chrome-trace events to absolute-time events: X as is, B/E paired per pid, M/i and the rest skipped."""
    stats.files += 1
    stats.bytes += len(data)
    rank, file_type = FRAMEWORK_KINDS[file.kind]
    origin = 0
    phases: dict[Any, str] = {}
    open_begins: dict[Any, list[dict[str, Any]]] = {}
    out: list[TraceEvent] = []
    for index, ev in enumerate(_decode_trace(data, file.key, stats)):
        if not isinstance(ev, dict):
            stats.bad_lines += 1
            continue
        ph = ev.get("ph")
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        if ph == "M":
            if ev.get("name") == "process_name":
                if "start_time_since_epoch_in_micros" in args:
                    origin = int(args["start_time_since_epoch_in_micros"])
                elif "name" in args:
                    phases[ev.get("pid")] = str(args["name"])
            continue
        try:
            if ph == "X":
                start = origin + int(ev["ts"])
                end = start + int(ev.get("dur", 0))
            elif ph == "B":
                open_begins.setdefault(ev.get("pid"), []).append(ev)
                continue
            elif ph == "E":
                stack = open_begins.get(ev.get("pid"))
                if not stack:
                    continue
                begin = stack.pop()
                start = origin + int(begin["ts"])
                end = origin + int(ev["ts"])
                args = begin.get("args") if isinstance(begin.get("args"), dict) else args
                ev = begin
            else:
                continue
        except (KeyError, TypeError, ValueError):
            stats.bad_lines += 1
            continue
        pid = ev.get("pid")
        out.append(
            TraceEvent(
                phases.get(pid, str(pid)),
                str(ev.get("name", "")),
                start,
                end,
                file.node,
                args,
                file_type,
                (rank, file.timestamp_us, file.key, index),
            )
        )
    stats.records += len(out)
    return out
