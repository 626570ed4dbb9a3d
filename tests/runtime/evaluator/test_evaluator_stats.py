"""The mergeable statistics: a stream split into parts and merged in any order gives what numpy gives on the whole."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

np = pytest.importorskip("numpy", reason="numpy is the reference these statistics must equal (dev extra)")

from cdk_sagemaker_debugger.runtime.evaluator import codec  # noqa: E402
from cdk_sagemaker_debugger.runtime.evaluator.stats import (  # noqa: E402
    ExactHistogram,
    FixedBins,
    Moments,
    ThresholdCounts,
    merge,
)

percent = st.floats(min_value=0, max_value=100, allow_nan=False, width=64).map(lambda v: round(v, 1))
anything = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)
QS = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)


def split(values: list[float], cuts: list[int]) -> list[list[float]]:
    points = sorted({c % (len(values) + 1) for c in cuts})
    bounds = [0, *points, len(values)]
    return [values[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def roundtrip(obj: object) -> object:
    """Through the state codec and JSON text, as the state object in S3."""
    return codec.decode(json.loads(json.dumps(codec.encode(obj))))


@settings(max_examples=200, deadline=None)
@given(st.lists(percent, min_size=1, max_size=400), st.lists(st.integers(0, 400), max_size=5), st.randoms())
def test_histograms_of_parts_merged_in_any_order_give_numpy_quantiles(values, cuts, rnd):
    parts = []
    for part in split(values, cuts):
        h = ExactHistogram()
        h.extend(part)
        parts.append(roundtrip(h))
    rnd.shuffle(parts)
    total = parts[0]
    for part in parts[1:]:
        merge(total, part)
    arr = np.array(values)
    assert total.n == len(values)
    assert [total.quantile(q) for q in QS] == [float(np.quantile(arr, q)) for q in QS]
    assert total.min() == float(arr.min()) and total.max() == float(arr.max())


@settings(max_examples=150, deadline=None)
@given(st.lists(percent, min_size=2, max_size=300), st.data())
def test_quantiles_stay_numpy_while_values_are_added_and_removed_between_reads(values, data):
    h = ExactHistogram()
    kept: list[float] = []
    for v in values:
        h.add(v)
        kept.append(v)
        if data.draw(st.booleans()):
            q = data.draw(st.sampled_from(QS))
            assert h.quantile(q) == float(np.quantile(np.array(kept), q))
        if len(kept) > 1 and data.draw(st.booleans()):
            gone = kept.pop(data.draw(st.integers(0, len(kept) - 1)))
            h.remove(gone)
    assert h.n == len(kept) and h.quantile(0.5) == float(np.quantile(np.array(kept), 0.5))


def test_a_histogram_grows_with_distinct_values_not_with_samples():
    h = ExactHistogram()
    for _ in range(1000):
        h.extend([float(v) for v in range(101)])  # integer percentages: 101 distinct values
    assert h.n == 101_000 and len(h.to_state()["c"]) == 101


def test_the_older_pair_layout_of_a_saved_histogram_is_read():
    h = ExactHistogram.from_state([[3.0, 2], [1.0, 1]])
    assert h.n == 3 and h.quantile(0.5) == 3.0 and h.min() == 1.0
    assert codec.decode({"__t": "cv", "v": [[5.0, 1], [7.0, 3]]}).quantile(0.0) == 5.0


def test_removing_more_than_was_added_is_refused():
    h = ExactHistogram({2.0: 1})
    with pytest.raises(ValueError, match="fewer than 2"):
        h.remove(2.0, 2)


@settings(max_examples=200, deadline=None)
@given(st.lists(anything, min_size=1, max_size=200), st.lists(st.integers(0, 200), max_size=5), st.randoms())
def test_moments_merged_in_any_order_hold_the_correctly_rounded_sum(values, cuts, rnd):
    parts = []
    for part in split(values, cuts):
        m = Moments()
        m.extend(part)
        parts.append(roundtrip(m))
    rnd.shuffle(parts)
    total = Moments()
    for part in parts:
        total.merge(part)
    assert total.n == len(values)
    assert total.total == math.fsum(values)
    assert total.low == min(values) and total.high == max(values)


def test_empty_moments_have_no_mean():
    with pytest.raises(ValueError, match="no values"):
        _ = Moments().mean


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(min_value=-5, max_value=110, allow_nan=False).map(lambda v: round(v, 2)), max_size=300),
       st.lists(st.integers(0, 300), max_size=4))
def test_fixed_bins_merged_are_numpy_histogram_with_those_edges(values, cuts):
    edges = list(range(0, 100, 2))
    total = FixedBins(edges)
    for part in split(values, cuts):
        bins = FixedBins(edges)
        bins.extend(part)
        total.merge(roundtrip(bins))
    expected = np.histogram(np.array(values, dtype=float), bins=edges)[0].tolist()
    assert total.counts == expected
    assert total.outside == sum(1 for v in values if v < 0 or v > 98)


def test_fixed_bins_need_increasing_edges_and_merge_only_with_the_same_edges():
    with pytest.raises(ValueError, match="increasing"):
        FixedBins([0, 0, 1])
    with pytest.raises(ValueError, match="different bin edges"):
        FixedBins([0, 1]).merge(FixedBins([0, 2]))


@settings(max_examples=150, deadline=None)
@given(st.lists(percent, max_size=300), st.lists(st.integers(0, 300), max_size=4))
def test_threshold_counts_merged_count_every_value_once(values, cuts):
    tests = ((">", 90.0), ("<", 10.0), (">", 50.0))
    total = ThresholdCounts(tests)
    for part in split(values, cuts):
        counts = ThresholdCounts(tests)
        counts.extend(part)
        total.merge(roundtrip(counts))
    assert total.n == len(values)
    assert total.count(">", 90.0) == sum(1 for v in values if v > 90)
    assert total.count("<", 10.0) == sum(1 for v in values if v < 10)
    assert total.count(">", 50.0) == sum(1 for v in values if v > 50)


def test_a_threshold_that_was_not_kept_is_refused_by_name():
    counts = ThresholdCounts([(">", 90)])
    with pytest.raises(KeyError, match="< 10"):
        counts.count("<", 10)
    with pytest.raises(ValueError, match="'>' or '<'"):
        ThresholdCounts([(">=", 1)])


def test_merge_refuses_two_kinds_of_statistic():
    with pytest.raises(TypeError, match="Moments into a ExactHistogram"):
        merge(ExactHistogram(), Moments())


def test_a_saved_histogram_with_repeated_or_zero_counted_values_is_read_as_their_sum():
    h = ExactHistogram.from_state({"v": [1.0, 1.0, 2.0, 3.0], "c": [2, 1, 0, 4]})
    assert h.counts == {1.0: 3, 3.0: 4} and h.n == 7 and h.min() == 1.0
    with pytest.raises(ValueError, match="3 values and 2 counts"):
        ExactHistogram.from_state({"v": [1.0, 2.0, 3.0], "c": [1, 1]})


def test_a_large_histogram_is_saved_packed_and_read_back_exactly():
    values = [i / 10 + 1e-13 * (i % 7) for i in range(5000)] + [-0.0, 1e300, 5e-324]
    h = ExactHistogram()
    h.extend(values)
    state = json.loads(json.dumps(h.to_state()))
    assert "b" in state and "v" not in state
    back = ExactHistogram.from_state(state)
    assert back.counts == h.counts and sorted(back.counts) == sorted(set(values))
    assert [back.quantile(q) for q in QS] == [h.quantile(q) for q in QS]


def test_packed_values_that_are_not_whole_doubles_are_refused():
    with pytest.raises(ValueError, match="not a whole number of doubles"):
        ExactHistogram.from_state({"b": "AAAA", "c": [1]})
