"""Mergeable statistics: what the evaluator keeps of a metric across windows, and what window summaries carry.

Every class here is exact (no sampling, no approximation) and *mergeable*: ``a.merge(b)`` leaves ``a`` equal to what
one object fed with both value streams would hold, whatever way the stream was split (by node shard, by run, by time),
and whatever order the parts are merged in. :func:`merge` does the same for any two objects of one class. Each state
is a small JSON value (``to_state()`` / ``cls.from_state(state)``) whose size is bounded by the range of the values,
not by how many were added:

``ExactHistogram``
    value -> count (a multiset). Quantiles are numpy's default ("linear") quantile of the values, bit for bit; min,
    max. Its size is the number of *distinct* values: bounded by ``range / resolution + 1`` for a metric with a fixed
    resolution (utilisation percentages as integers or with one or two decimals, whose sums over a few GPUs are
    exact in floating point). Sums of many floating-point values (per-timestamp sums over 192 cores) are keyed
    through :func:`key_sum` first, at ``SUM_RESOLUTION`` (docs/evaluator.md, "Incremental, crash-safe, bounded"):
    their exact float sums would each be a new key, their distinct keys grow with the job's age.
``Moments``
    count, exact sum (math.fsum partials, so merging in any order gives the correctly rounded sum), min and max.
``FixedBins``
    counts over fixed bin edges, numpy.histogram's convention (half-open bins, the last one closed).
``ThresholdCounts``
    how many values were above (or below) each of a fixed set of thresholds, and how many values in all.

Not here, on purpose: a floating-point sum in arrival order (the managed rules' per-timestamp sums), which depends on
the order of its terms and so cannot be merged; and the last N samples in order that the rolling tests compare (a
deque is not a summary). Both stay with the window and the rule that need them.

Persistence: every class has ``STATE_TAG`` and a ``to_state()`` that is already plain JSON (lists of numbers), which
the state codec writes without walking it value by value.
"""

from __future__ import annotations

import base64
import bisect
import math
import sys
from array import array
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T", "ExactHistogram", "Moments", "FixedBins", "ThresholdCounts")


def merge(a: T, b: T) -> T:
    """Merge ``b`` into ``a`` (both of one class) and return ``a``; ``b`` is left unchanged."""
    if type(a) is not type(b):
        raise TypeError(f"cannot merge a {type(b).__name__} into a {type(a).__name__}")
    a.merge(b)  # type: ignore[arg-type]
    return a


# The resolution at which per-timestamp sums are keyed in a histogram: 1e-3 of a percentage point of the sum. The
# profiler writes utilisation with at most two decimals, so the exact decimal sum is a multiple of 0.01 and rounding
# the floating-point sum to three decimals gives the double nearest that exact sum (the drift of adding 192 floats in
# arrival order, ~1e-12, is what made every sum a key of its own). Distinct keys: at most range / SUM_RESOLUTION + 1,
# and for two-decimal inputs range / 0.01 + 1. A quantile moves by at most SUM_RESOLUTION / 2 (a linear quantile is
# monotone in each value and moves by no more than the largest move of a value).
SUM_DIGITS = 3
SUM_RESOLUTION = 10.0 ** -SUM_DIGITS


def key_sum(total: float) -> float:
    """A per-timestamp sum as kept in a histogram: ``total`` rounded to ``SUM_DIGITS`` decimals (the double nearest
    that decimal); idempotent, so keys merged or counted twice stay one key."""
    return round(total, SUM_DIGITS)


def _lerp(a: float, b: float, t: float) -> float:
    """numpy's interpolation between neighbouring order statistics (numerics._lerp, repeated to stay import-free)."""
    diff = b - a
    if t >= 0.5:
        return b - diff * (1 - t)
    return a + diff * t


class ExactHistogram:
    """A multiset of numbers as value -> count, with numpy's linear quantiles: exact, mergeable, bounded by the
    number of distinct values.

    ``add``/``extend`` are O(1) per value; the sorted view the quantiles read is rebuilt only when the set of distinct
    values changed (a new value is inserted with bisect, so a long history is never re-sorted), and the cumulative
    counts only when a count changed since the last quantile.
    """

    __slots__ = ("counts", "n", "_keys", "_cumulative")
    STATE_TAG = "cv"

    def __init__(self, counts: dict[float, int] | None = None):
        self.counts: dict[float, int] = {}
        self.n = 0
        self._keys: list[float] | None = None  # sorted distinct values, kept up to date once built
        self._cumulative: list[int] | None = None
        for value, count in (counts or {}).items():
            if count:
                self.counts[value] = self.counts.get(value, 0) + int(count)
                self.n += int(count)

    # ---- adding
    def add(self, value: float, count: int = 1) -> None:
        counts = self.counts
        if value in counts:
            counts[value] += count
        else:
            counts[value] = count
            if self._keys is not None:
                bisect.insort(self._keys, value)
        self.n += count
        self._cumulative = None

    def extend(self, values: Iterable[float]) -> None:
        counts = self.counts
        keys = self._keys
        n = self.n
        for v in values:
            if v in counts:
                counts[v] += 1
            else:
                counts[v] = 1
                if keys is not None:
                    bisect.insort(keys, v)
            n += 1
        self.n = n
        self._cumulative = None

    def remove(self, value: float, count: int = 1) -> None:
        """Take ``count`` occurrences of ``value`` back out (a value counted twice by mistake)."""
        left = self.counts[value] - count
        if left < 0:
            raise ValueError(f"{value!r} occurs fewer than {count} times")
        if left:
            self.counts[value] = left
        else:
            del self.counts[value]
            if self._keys is not None:
                del self._keys[bisect.bisect_left(self._keys, value)]
        self.n -= count
        self._cumulative = None

    def merge(self, other: ExactHistogram) -> None:
        for value, count in other.counts.items():
            self.add(value, count)

    def clear(self) -> None:
        self.counts.clear()
        self.n = 0
        self._keys = None
        self._cumulative = None

    # ---- reading
    def __len__(self) -> int:
        return self.n

    def _sorted_keys(self) -> list[float]:
        if self._keys is None:
            self._keys = sorted(self.counts)
        return self._keys

    def _cumulative_counts(self) -> list[int]:
        if self._cumulative is None:
            counts, total, cumulative = self.counts, 0, []
            for key in self._sorted_keys():
                total += counts[key]
                cumulative.append(total)
            self._cumulative = cumulative
        return self._cumulative

    def _at(self, index: int) -> float:
        """The ``index``-th smallest value (0-based), counting repeats."""
        position = bisect.bisect_right(self._cumulative_counts(), index)
        return float(self._sorted_keys()[position])

    def quantile(self, q: float) -> float:
        """numpy.quantile(values, q) with the default linear method, bit for bit."""
        n = self.n
        if n == 0:
            raise ValueError("quantile of an empty multiset")
        h = (n - 1) * q
        lo = math.floor(h)
        if lo < 0:
            return self.min()
        if lo >= n - 1:
            return self.max()
        return _lerp(self._at(lo), self._at(lo + 1), h - lo)

    def quantiles(self, qs: Sequence[float]) -> list[float]:
        return [self.quantile(q) for q in qs]

    def max(self) -> float:
        return float(self._sorted_keys()[-1])

    def min(self) -> float:
        return float(self._sorted_keys()[0])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExactHistogram) and self.counts == other.counts

    def __repr__(self) -> str:
        return f"ExactHistogram(n={self.n}, distinct={len(self.counts)})"

    # ---- persistence: {"v": [values...], "c": [counts...]}, sorted by value; from PACK_ABOVE distinct values on, the
    # values as base64 of little-endian IEEE doubles under "b" (exact, and encoded and decoded at C speed rather than
    # one float repr at a time). The older [[value, count], ...] layout is read too.
    PACK_ABOVE = 64

    def to_state(self) -> dict[str, Any]:
        keys = self._sorted_keys()
        counts = self.counts
        if len(keys) <= self.PACK_ABOVE:
            return {"v": list(keys), "c": [counts[k] for k in keys]}
        packed = array("d", keys)
        if sys.byteorder != "little":
            packed.byteswap()
        return {"b": base64.b64encode(packed.tobytes()).decode("ascii"), "c": [counts[k] for k in keys]}

    @classmethod
    def from_state(cls, state: dict[str, list[Any]] | list[list[Any]]) -> ExactHistogram:
        h = cls()
        if isinstance(state, dict):
            values, counts = (state["v"] if "v" in state else _unpack(state["b"])), state["c"]
            if len(values) != len(counts):
                raise ValueError(f"a histogram state has {len(values)} values and {len(counts)} counts")
            fast = dict(zip(map(float, values), map(int, counts), strict=True))
            if len(fast) == len(values) and (not fast or min(fast.values()) > 0):  # as written: distinct, counted
                h.counts, h.n = fast, sum(fast.values())
                return h
            pairs: Iterable[tuple[Any, Any]] = zip(values, counts, strict=True)
        else:  # the older layout: one [value, count] pair per distinct value
            pairs = ((p[0], p[1]) for p in state)
        counts = h.counts
        for value, count in pairs:
            if count:
                value = float(value)
                counts[value] = counts.get(value, 0) + int(count)
                h.n += int(count)
        return h


def _unpack(text: str) -> list[float]:
    raw = base64.b64decode(text.encode("ascii"), validate=True)
    if len(raw) % 8:
        raise ValueError(f"packed histogram values are {len(raw)} bytes, not a whole number of doubles")
    packed = array("d")
    packed.frombytes(raw)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tolist()


class Moments:
    """count, sum, min and max of a stream of numbers; the sum is exact (``math.fsum``'s partials are kept, so the
    result is the correctly rounded sum of all values, whichever way they were split and merged)."""

    __slots__ = ("n", "partials", "low", "high")
    STATE_TAG = "mo"

    def __init__(self) -> None:
        self.n = 0
        self.partials: list[float] = []
        self.low: float | None = None
        self.high: float | None = None

    def add(self, value: float) -> None:
        self.extend((value,))

    def extend(self, values: Iterable[float]) -> None:
        values = list(values)
        if not values:
            return
        self.n += len(values)
        self.partials = _fsum_partials([*self.partials, *values])
        low, high = min(values), max(values)
        self.low = low if self.low is None or low < self.low else self.low
        self.high = high if self.high is None or high > self.high else self.high

    def merge(self, other: Moments) -> None:
        if not other.n:
            return
        self.n += other.n
        self.partials = _fsum_partials([*self.partials, *other.partials])
        low, high = other.low, other.high
        if low is not None and (self.low is None or low < self.low):
            self.low = low
        if high is not None and (self.high is None or high > self.high):
            self.high = high

    @property
    def total(self) -> float:
        return math.fsum(self.partials)

    @property
    def mean(self) -> float:
        if not self.n:
            raise ValueError("mean of no values")
        return self.total / self.n

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Moments) and (self.n, self.total, self.low, self.high)
                == (other.n, other.total, other.low, other.high))

    def to_state(self) -> list[Any]:
        return [self.n, self.partials, self.low, self.high]

    @classmethod
    def from_state(cls, state: list[Any]) -> Moments:
        m = cls()
        m.n, m.partials, m.low, m.high = int(state[0]), [float(p) for p in state[1]], state[2], state[3]
        return m


def _fsum_partials(values: list[float]) -> list[float]:
    """The non-overlapping partials of Shewchuk's algorithm (what math.fsum keeps internally): their exact sum is the
    exact sum of ``values``."""
    partials: list[float] = []
    for x in values:
        i = 0
        for y in partials:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo:
                partials[i] = lo
                i += 1
            x = hi
        partials[i:] = [x]
    return partials


class FixedBins:
    """Counts over fixed, increasing bin edges, as ``numpy.histogram(values, bins=edges)`` counts them: each bin is
    ``[edge_i, edge_i+1)`` except the last, which is closed; values outside ``[edges[0], edges[-1]]`` are counted in
    ``outside`` only."""

    __slots__ = ("edges", "counts", "outside")
    STATE_TAG = "fb"

    def __init__(self, edges: Sequence[float]):
        if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
            raise ValueError(f"bin edges must be at least two increasing numbers, not {list(edges)!r}")
        self.edges = tuple(float(e) for e in edges)
        self.counts = [0] * (len(edges) - 1)
        self.outside = 0

    def bin(self, value: float) -> int | None:
        edges = self.edges
        if value < edges[0] or value > edges[-1]:
            return None
        if value == edges[-1]:
            return len(edges) - 2
        return bisect.bisect_right(edges, value) - 1

    def add(self, value: float) -> None:
        index = self.bin(value)
        if index is None:
            self.outside += 1
        else:
            self.counts[index] += 1

    def extend(self, values: Iterable[float]) -> None:
        for v in values:
            self.add(v)

    def merge(self, other: FixedBins) -> None:
        if other.edges != self.edges:
            raise ValueError("cannot merge histograms with different bin edges")
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.outside += other.outside

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FixedBins) and (self.edges, self.counts, self.outside) == (
            other.edges, other.counts, other.outside)

    def to_state(self) -> list[Any]:
        return [list(self.edges), self.counts, self.outside]

    @classmethod
    def from_state(cls, state: list[Any]) -> FixedBins:
        bins = cls(state[0])
        bins.counts, bins.outside = [int(c) for c in state[1]], int(state[2])
        return bins


class ThresholdCounts:
    """How many values were strictly above (``">"``) or strictly below (``"<"``) each configured threshold, and how
    many values in all. The thresholds are fixed when the object is made (a rule's parameters)."""

    __slots__ = ("tests", "hits", "n")
    STATE_TAG = "tc"

    def __init__(self, tests: Iterable[tuple[str, float]]):
        self.tests = tuple((op, limit) for op, limit in tests)
        for op, _ in self.tests:
            if op not in (">", "<"):
                raise ValueError(f"a threshold test is '>' or '<', not {op!r}")
        self.hits = [0] * len(self.tests)
        self.n = 0

    def extend(self, values: Sequence[float]) -> None:
        self.n += len(values)
        for i, (op, limit) in enumerate(self.tests):
            if op == ">":
                self.hits[i] += sum(1 for v in values if v > limit)
            else:
                self.hits[i] += sum(1 for v in values if v < limit)

    def count(self, op: str, limit: float) -> int:
        try:
            return self.hits[self.tests.index((op, limit))]
        except ValueError:
            raise KeyError(f"no count of values {op} {limit} was kept (kept: {self.tests})") from None

    def merge(self, other: ThresholdCounts) -> None:
        if other.tests != self.tests:
            raise ValueError("cannot merge counts of different thresholds")
        self.hits = [a + b for a, b in zip(self.hits, other.hits, strict=True)]
        self.n += other.n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ThresholdCounts) and (self.tests, self.hits, self.n) == (
            other.tests, other.hits, other.n)

    def to_state(self) -> list[Any]:
        return [[list(t) for t in self.tests], self.hits, self.n]

    @classmethod
    def from_state(cls, state: list[Any]) -> ThresholdCounts:
        counts = cls((str(op), limit) for op, limit in state[0])
        counts.hits, counts.n = [int(h) for h in state[1]], int(state[2])
        return counts
