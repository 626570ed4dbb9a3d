"""Reading the tensor collector's step files and combining them into one view per step.

Each process writes its own file per recorded step (``<node>/<rank>/<step>.jsonl``, tensor_layout.py). Combining:

* weights, gradients, updates and allclose margins of replicated parameters (DDP, one process): every recording
  process holds the same values, so the first source (by node and rank) is taken;
* the same of sharded parameters (FSDP, ``"shard": true``): partial sums are added, min/max combined, margins maxed;
* activations, inputs and labels: every process saw its own batch, so counts and sums are added.

The files are written by the training code's container, so every line is checked: damaged lines are counted and
skipped, never trusted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .readers import FileDamage, ParseStats, loads_finite
from .tensor_layout import parse_step_file

PARAMETER_KINDS = ("gradient", "weight", "update", "unchanged")
ADDED = ("n", "sum", "sumsq", "abs_sum", "zero", "nan", "inf", "images")
LISTS = ("counts", "sums", "pairs")
MAX_LIST = 1_000_000
MAX_LINE_BYTES = 64 * 1024 * 1024


def number(value: Any) -> float:
    """A field's number: the collector writes non-finite values as "nan", "inf", "-inf"."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    if isinstance(value, (int, float)):
        return float(value)
    if value in ("nan", "inf", "-inf"):
        return float(value)
    raise ValueError(f"{value!r} is not a number")


def _check(record: Any) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    for key in ("kind", "name"):
        if not isinstance(record.get(key), str) or not record[key]:
            raise ValueError(f"no {key}")
    if isinstance(record.get("step"), bool) or not isinstance(record.get("step"), int) or record["step"] < 0:
        raise ValueError("no step")
    out = dict(record)
    for key, value in record.items():
        if key in LISTS:
            if not isinstance(value, list) or len(value) > MAX_LIST:
                raise ValueError(f"{key} is not a list of at most {MAX_LIST} numbers")
            out[key] = [number(v) for v in value]
        elif key in ADDED or key in ("min", "max", "margin", "p5", "p95", "rtol", "classes"):
            if key in ("nan", "inf") and value == "unknown":
                continue
            out[key] = number(value)
    return out


def parse_step_lines(data: bytes, key: str, stats: ParseStats) -> list[dict[str, Any]]:
    """The valid records of one step file; damaged lines are counted in ``stats`` with the key."""
    damage = FileDamage(key)
    records = []
    for line_number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(_check(loads_finite(line)))
        except (ValueError, TypeError, RecursionError) as exc:
            damage.add(f"{type(exc).__name__}: {exc}", line_number)
    damage.report(stats)
    return records


def _add_lists(into: list[float], more: list[float]) -> list[float]:
    if len(into) != len(more):
        raise ValueError(f"lists of {len(into)} and {len(more)} numbers")
    return [a + b for a, b in zip(into, more, strict=True)]


def _merge(into: dict[str, Any], record: dict[str, Any]) -> None:
    for key in ADDED:
        if key in record:
            into[key] = into.get(key, 0.0) + record[key]
    for key in LISTS:
        if key in record:
            into[key] = _add_lists(into[key], record[key]) if key in into else list(record[key])
    if "min" in record:
        into["min"] = min(into.get("min", math.inf), record["min"])
    if "max" in record:
        into["max"] = max(into.get("max", -math.inf), record["max"])
    if "margin" in record:
        into["margin"] = max(into.get("margin", -math.inf), record["margin"])
    for key in ("p5", "p95"):  # percentiles do not add up: the element-weighted mean of the sources' percentiles
        if key in record:
            into[f"{key}_weighted"] = into.get(f"{key}_weighted", 0.0) + record[key] * record.get("n", 1.0)
            into[key] = into[f"{key}_weighted"] / max(into.get("n", 1.0), 1.0)


def _first(record: dict[str, Any]) -> dict[str, Any]:
    first = {k: (list(v) if isinstance(v, list) else v) for k, v in record.items() if k != "step"}
    first["sources"] = 1
    for key in ("p5", "p95"):
        if key in record:
            first[f"{key}_weighted"] = record[key] * record.get("n", 1.0)
    return first


@dataclass
class StepData:
    """Everything recorded at one step: kind -> tensor name -> combined record."""

    step: int
    kinds: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    sources: set[tuple[str, int]] = field(default_factory=set)

    def get(self, kind: str) -> dict[str, dict[str, Any]]:
        return self.kinds.get(kind, {})


def combine(step: int, files: list[tuple[tuple[str, int], list[dict[str, Any]]]], stats: ParseStats) -> StepData:
    """One StepData from the records of every source's file for ``step`` (sources in node, rank order)."""
    data = StepData(step)
    for source, records in sorted(files, key=lambda item: item[0]):
        data.sources.add(source)
        for record in records:
            kind, name = record["kind"], record["name"]
            if record.get("step") != step:
                stats.note(f"a record of step {record.get('step')} in the file of step {step} ({source}) was skipped")
                continue
            names = data.kinds.setdefault(kind, {})
            replicated = kind in PARAMETER_KINDS and not record.get("shard")
            if replicated and name in names:
                continue  # another process's copy of the same replicated values
            try:
                if name not in names:
                    names[name] = _first(record)
                else:
                    _merge(names[name], record)
                    names[name]["sources"] += 1
            except ValueError as exc:
                stats.note(f"step {step}, {kind} {name} from {source}: {exc}; skipped")
    return data


def step_of(relative: str) -> tuple[tuple[str, int], int] | None:
    """((node, rank), step) of a step file's path relative to tensor-output/, or None."""
    parsed = parse_step_file(relative)
    if parsed is None:
        return None
    node, rank, step = parsed
    return (node, rank), step
