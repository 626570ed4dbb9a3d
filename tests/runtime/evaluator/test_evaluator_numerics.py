"""The stdlib statistics must equal numpy's, bit for bit: verdicts flip exactly at thresholds."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

np = pytest.importorskip("numpy", reason="numpy is the reference these statistics must equal (dev extra)")

from cdk_sagemaker_debugger.runtime.evaluator.numerics import (  # noqa: E402
    CountedValues,
    box_plot,
    histogram,
    jensen_shannon_distance,
    load_balancing_bin,
    np_mean,
    np_std,
    quantile,
)

percent = st.floats(min_value=0, max_value=100, allow_nan=False, width=64).map(lambda v: round(v, 2))
samples = st.lists(percent, min_size=1, max_size=300)
quantiles = st.sampled_from([0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0])


@settings(max_examples=200, deadline=None)
@given(samples, quantiles)
def test_quantile_is_numpy_linear(values, q):
    assert quantile(values, q) == float(np.quantile(np.array(values), q))


@settings(max_examples=200, deadline=None)
@given(samples, quantiles)
def test_counted_values_give_the_same_quantiles_as_the_full_list(values, q):
    counted = CountedValues()
    counted.extend(values)
    assert counted.quantile(q) == float(np.quantile(np.array(values), q))
    assert counted.max() == max(values) and counted.min() == min(values)


@settings(max_examples=200, deadline=None)
@given(st.lists(percent, min_size=1, max_size=600))
def test_mean_and_population_std_are_numpy_pairwise(values):
    arr = np.array(values)
    assert np_mean(values) == float(np.mean(arr))
    assert np_std(values) == pytest.approx(float(np.std(arr)), rel=1e-12, abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=50, allow_nan=False).map(lambda v: round(v, 3)), min_size=1,
                max_size=200))
def test_histogram_is_numpy_histogram_with_100_bins(values):
    counts, edges = histogram(values)
    np_counts, np_edges = np.histogram(np.array(values), bins=100)
    assert counts == np_counts.tolist()
    assert edges == np_edges.tolist()


def test_histogram_of_equal_values_spans_half_a_unit_each_side():
    counts, edges = histogram([3.0, 3.0])
    assert edges[0] == 2.5 and edges[-1] == 3.5 and sum(counts) == 2


@settings(max_examples=200, deadline=None)
@given(percent)
def test_load_balancing_bins_are_numpy_bins_0_to_98(value):
    expected = np.histogram([value], bins=list(range(0, 100, 2)))[0].tolist()
    index = load_balancing_bin(value)
    assert (index is None) == (sum(expected) == 0)
    if index is not None:
        assert expected[index] == 1


def test_values_above_98_fall_out_of_the_load_balancing_histogram():
    assert load_balancing_bin(98.0) == 48
    assert load_balancing_bin(99.0) is None and load_balancing_bin(100.0) is None


def test_box_plot_whiskers_are_clipped_to_the_data():
    counted = CountedValues()
    counted.extend([1.0, 2.0, 3.0, 4.0, 100.0])
    box = box_plot(counted)
    arr = np.array([1.0, 2.0, 3.0, 4.0, 100.0])
    p25, p75 = np.quantile(arr, 0.25), np.quantile(arr, 0.75)
    assert box["upper"] == min(p75 + 1.5 * (p75 - p25), 100.0)
    assert box["lower"] == max(p25 - 1.5 * (p75 - p25), 1.0)


def test_jensen_shannon_distance_of_disjoint_histograms_is_sqrt_ln2():
    assert jensen_shannon_distance([5, 0], [0, 5]) == pytest.approx(math.sqrt(math.log(2)))
    assert jensen_shannon_distance([3, 1], [3, 1]) == 0.0
    assert math.isnan(jensen_shannon_distance([0, 0], [1, 0]))
