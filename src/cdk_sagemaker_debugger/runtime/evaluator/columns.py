"""The per-core values of one node and timestamp (a window run's CPU or I/O-wait column), reduced to what the rules
read of them: how many there are, their sum, and how many are above each threshold a configured rule compares them
with. A 192-core node sampled every 100 ms has 115,200 CPU values a minute; a node shard (fanout.py) hands the
coordinator these three numbers per timestamp instead.

Exact: the count and the per-threshold counts are counts; the sum is the values added one by one from 0.0, in file
order, which is what ``SystemWindow.finalize`` computes for a timestamp first seen in this column (``sum(values, 0.0)``);
``sum(column, start)`` gives ``start + total``. A column can only be reduced for the thresholds it was reduced for.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class Column:
    __slots__ = ("above", "n", "total")

    def __init__(self, n: int = 0, total: float = 0.0, above: dict[float, int] | None = None):
        self.n = n
        self.total = total
        self.above = dict(above or {})

    @classmethod
    def of(cls, values: list[float], thresholds: tuple[float, ...]) -> Column:
        return cls(len(values), sum(values, 0.0), {t: sum(1 for v in values if v > t) for t in thresholds})

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[float]:
        """One item, the sum: so that ``sum(column, start)`` (finalize's per-timestamp sum) adds the column's total."""
        if self.n:
            yield self.total

    def append(self, value: float) -> None:
        """A record added after the column was reduced (a file read in-process later in the same window)."""
        self.n += 1
        self.total += value
        for threshold in self.above:
            if value > threshold:
                self.above[threshold] += 1

    def extend(self, other: list[float] | Column) -> None:
        """The records of the next part of the same run (the coordinator's merge of one file's partial window)."""
        if isinstance(other, Column):
            if set(other.above) != set(self.above):
                raise ValueError("columns reduced for different thresholds cannot be merged")
            self.n += other.n
            self.total += other.total
            for threshold, count in other.above.items():
                self.above[threshold] += count
        else:
            for value in other:
                self.append(value)

    def count_above(self, threshold: float) -> int:
        if threshold not in self.above:
            raise KeyError(f"this column was reduced for the thresholds {sorted(self.above)}, not {threshold}")
        return self.above[threshold]

    def to_state(self) -> dict[str, Any]:
        return {"n": self.n, "sum": self.total, "above": [[t, c] for t, c in self.above.items()]}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Column:
        return cls(int(state["n"]), float(state["sum"]), {float(t): int(c) for t, c in state["above"]})


def count_above(values: list[float] | Column, threshold: float) -> int:
    """How many of a run's values are above ``threshold`` (the bottleneck rules' test), raw or reduced."""
    if isinstance(values, Column):
        return values.count_above(threshold)
    return sum(1 for v in values if v > threshold)


def column_state(values: list[float] | Column) -> list[float] | dict[str, Any]:
    return values.to_state() if isinstance(values, Column) else values


def column_from_state(state: Any) -> list[float] | Column:
    return Column.from_state(state) if isinstance(state, dict) else list(state)
