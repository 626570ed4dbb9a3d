"""Statistics with the exact numerics of the managed rules (numpy's linear quantile, pairwise sums, histograms).

The managed rules compute with numpy; the evaluator runs on the standard library, so these functions reproduce numpy's
arithmetic step by step. Matching to the last bit matters only at exact thresholds, which is where verdicts flip.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .stats import ExactHistogram

_PAIRWISE_BLOCK = 128


def np_sum(values: Sequence[float]) -> float:
    """Sum like ``numpy.add.reduce`` on a contiguous float64 array (pairwise, 8 accumulators)."""
    return _pairwise(values, 0, len(values))


def _pairwise(a: Sequence[float], start: int, n: int) -> float:
    if n < 8:
        res = -0.0
        for i in range(start, start + n):
            res += a[i]
        return res
    if n <= _PAIRWISE_BLOCK:
        r = [float(a[start + j]) for j in range(8)]
        i = 8
        limit = n - n % 8
        while i < limit:
            for j in range(8):
                r[j] += a[start + i + j]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            res += a[start + i]
            i += 1
        return res
    half = n // 2
    half -= half % 8
    return _pairwise(a, start, half) + _pairwise(a, start + half, n - half)


def np_mean(values: Sequence[float]) -> float:
    return np_sum(values) / len(values)


def np_std(values: Sequence[float]) -> float:
    """Population standard deviation (ddof 0), computed the way ``numpy.std`` does."""
    mean = np_mean(values)
    return math.sqrt(np_sum([(v - mean) * (v - mean) for v in values]) / len(values))


def _lerp(a: float, b: float, t: float) -> float:
    diff = b - a
    if t >= 0.5:
        return b - diff * (1 - t)
    return a + diff * t


def quantile_sorted(ordered: Sequence[float], q: float) -> float:
    """numpy's default ("linear") quantile of an already sorted sequence."""
    n = len(ordered)
    if n == 0:
        raise ValueError("quantile of an empty sequence")
    h = (n - 1) * q
    lo = math.floor(h)
    if lo < 0:
        return float(ordered[0])
    if lo >= n - 1:
        return float(ordered[n - 1])
    return _lerp(float(ordered[lo]), float(ordered[lo + 1]), h - lo)


def quantile(values: Iterable[float], q: float) -> float:
    return quantile_sorted(sorted(values), q)


def median(values: Sequence[float]) -> float:
    return quantile(values, 0.5)


def box_plot(values: ExactHistogram) -> dict[str, float]:
    """p25/p50/p75/p95 with whiskers ``upper = min(p75 + 1.5 iqr, max)`` and ``lower = max(p25 - 1.5 iqr, min)``."""
    p25, p50, p75, p95 = values.quantiles((0.25, 0.5, 0.75, 0.95))
    iqr = p75 - p25
    return {
        "p25": p25,
        "p50": p50,
        "p75": p75,
        "p95": p95,
        "upper": min(p75 + 1.5 * iqr, values.max()),
        "lower": max(p25 - 1.5 * iqr, values.min()),
    }


def linspace_edges(first: float, last: float, bins: int) -> list[float]:
    step = (last - first) / bins
    edges = [i * step + first for i in range(bins + 1)]
    edges[-1] = last
    return edges


def histogram(values: Sequence[float], bins: int = 100) -> tuple[list[int], list[float]]:
    """``numpy.histogram(values, bins)`` with equal-width bins over [min, max] (widened by 0.5 when all equal)."""
    if not values:
        first, last = 0.0, 1.0
    else:
        first, last = float(min(values)), float(max(values))
    if first == last:
        first -= 0.5
        last += 0.5
    edges = linspace_edges(first, last, bins)
    counts = [0] * bins
    width = last - first
    for v in values:
        if v < first or v > last:
            continue
        i = int(((v - first) / width) * bins)
        if i == bins:
            i -= 1
        if v < edges[i]:
            i -= 1
        if i != bins - 1 and v >= edges[i + 1]:
            i += 1
        counts[i] += 1
    return counts, edges


LOAD_BALANCING_EDGES = tuple(range(0, 100, 2))  # 0, 2, ..., 98: 49 bins, the last one closed on the right


def load_balancing_bin(value: float) -> int | None:
    """Bin index of ``numpy.histogram(values, bins=[0, 2, ..., 98])``; values outside [0, 98] fall out (None)."""
    if value < 0 or value > 98:
        return None
    if value == 98:
        return 48
    return int(value // 2)


def jensen_shannon_distance(h1: Sequence[float], h2: Sequence[float]) -> float:
    """sqrt of the Jensen-Shannon divergence (natural log) of two histograms, each normalised to sum 1.

    Returns NaN when either histogram is all zero, which compares False against any threshold, as in the managed rule.
    """
    s1, s2 = float(sum(h1)), float(sum(h2))
    if s1 == 0 or s2 == 0:
        return math.nan
    p = [v / s1 for v in h1]
    q = [v / s2 for v in h2]
    m = [(a + b) / 2 for a, b in zip(p, q, strict=True)]

    def kl(x: list[float], y: list[float]) -> float:
        sm = sum(y)
        total = 0.0
        for a, b in zip(x, y, strict=True):
            if a > 0:
                total += a * math.log(a / (b / sm))
        return total

    js = 0.5 * kl(p, m) + 0.5 * kl(q, m)
    return math.sqrt(max(js, 0.0))


def __getattr__(name: str) -> Any:
    """``CountedValues``, the value multiset, moved to stats.py as ``ExactHistogram`` (PEP 562 keeps the old name)."""
    if name == "CountedValues":
        from .stats import ExactHistogram

        return ExactHistogram
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
