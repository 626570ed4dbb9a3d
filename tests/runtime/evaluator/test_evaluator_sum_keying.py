"""OverallSystemUsage and BatchSize key their per-timestamp sums at stats.SUM_RESOLUTION, so their state stops growing
once the job has seen the range of its sums (docs/evaluator.md, "Incremental, crash-safe, bounded")."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

from cdk_sagemaker_debugger.runtime.evaluator import codec
from cdk_sagemaker_debugger.runtime.evaluator.rules import BatchSize, OverallSystemUsage
from cdk_sagemaker_debugger.runtime.evaluator.stats import key_sum
from cdk_sagemaker_debugger.runtime.evaluator.window import USAGE_METRICS

CORES = 192


def _window(start_s: int, seconds: int, rnd: random.Random) -> SimpleNamespace:
    """One window of a 192-core node: per-core CPU and I/O values with two decimals (as the profiler writes them),
    summed per timestamp in arrival order, as the window reader does."""
    sums: dict[str, dict[str, dict[float, float]]] = {m: {} for m in USAGE_METRICS}
    for metric in ("CPU", "I/O"):
        per_ts = sums[metric]["algo-1"] = {}
        for ts in range(start_s, start_s + seconds):
            busy = rnd.randrange(11)  # 0..10 busy cores at 0.7 %, the others idle at 0.1 %, in any order
            values = [0.7] * busy + [0.1] * (CORES - busy)
            rnd.shuffle(values)
            total = 0.0
            for v in values:
                total += v
            per_ts[float(ts) + 0.5] = total
    system = SimpleNamespace(sums=sums, cpu_names=[f"cpu{c}" for c in range(CORES)], gpu_names=[],
                             gpu_util={}, gpu_mem={})
    return SimpleNamespace(system=system, start_us=start_s * 10**6, end_us=(start_s + seconds) * 10**6,
                           origin_us=0, in_report=True, framework=[])


def _size(rule: object) -> int:
    return len(json.dumps(codec.encode(rule.__dict__), separators=(",", ":")))


def test_a_long_job_stops_growing_the_usage_and_batch_size_histories():
    rnd = random.Random(7)
    usage, batch = OverallSystemUsage(), BatchSize()
    exact_sums: set[float] = set()
    sizes, distinct = [], []
    for minute in range(60):
        ctx = _window(minute * 60, 60, rnd)
        exact_sums.update(ctx.system.sums["CPU"]["algo-1"].values())
        usage.evaluate(ctx)
        batch.evaluate(ctx)
        if minute in (29, 59):
            sizes.append((_size(usage), _size(batch)))
            distinct.append((len(usage.values["CPU"]["algo-1"].counts), len(usage.values["I/O"]["algo-1"].counts),
                             len(batch.cpu["algo-1"].history.counts)))
    # Every sum is 19.2 + 0.6 * busy: 11 decimal sums. Their float sums in arrival order are many more distinct
    # values: the growth this keying removes.
    assert len(exact_sums) > 100
    assert distinct[0] == distinct[1] == (11, 11, 11)
    (usage_30, batch_30), (usage_60, batch_60) = sizes
    assert usage_60 - usage_30 < 0.02 * usage_30  # counts grow by a digit here and there, keys not at all
    assert batch.cpu["algo-1"].history.n == 3600


def test_keyed_sums_are_the_decimal_sums_whatever_order_the_values_arrive_in():
    assert 0.1 + 0.2 == 0.30000000000000004 and key_sum(0.1 + 0.2) == 0.3
    assert 0.7 + 0.1 == 0.7999999999999999 and key_sum(0.7 + 0.1) == 0.8
    assert key_sum(12.3456) == 12.346 and key_sum(key_sum(12.3456)) == 12.346
    forward = (0.1 + 0.2) + 0.3
    backward = (0.3 + 0.2) + 0.1
    assert forward == 0.6000000000000001 and backward == 0.6
    assert key_sum(forward) == key_sum(backward) == 0.6


def test_usage_percentiles_of_keyed_sums_on_hand_computed_values():
    sums: dict[str, dict[str, dict[float, float]]] = {m: {} for m in USAGE_METRICS}
    # two cores; per-timestamp sums 0.1+0.2, 1.1+2.2, 10.5+30.2, 60.0+20.02 -> keyed 0.3, 3.3, 40.7, 80.02
    sums["CPU"]["algo-1"] = {1.0: 0.1 + 0.2, 2.0: 1.1 + 2.2, 3.0: 10.5 + 30.2, 4.0: 60.0 + 20.02}
    system = SimpleNamespace(sums=sums, cpu_names=["cpu0", "cpu1"], gpu_names=[], gpu_util={}, gpu_mem={})
    rule = OverallSystemUsage()
    rule.evaluate(SimpleNamespace(system=system, start_us=0, end_us=10 * 10**6, origin_us=0, in_report=True))
    rule.settle()
    # sorted 0.3, 3.3, 40.7, 80.02, divided by the 2 cores:
    # max 40.01; p99 (h 2.97) (40.7 + 0.97 * 39.32) / 2 = 39.4202; p95 (h 2.85) (40.7 + 0.85 * 39.32) / 2 = 37.061;
    # p50 (h 1.5) (3.3 + 40.7) / 4 = 11.0; min 0.15
    assert rule.report["Details"]["CPU"] == {
        "algo-1": {"max": 40.01, "p99": 39.42, "p95": 37.06, "p50": 11.0, "min": 0.15}}
    assert sorted(rule.values["CPU"]["algo-1"].counts) == [0.3, 3.3, 40.7, 80.02]


def test_batch_size_rolls_the_exact_means_and_keys_only_its_box_plot_history():
    sums: dict[str, dict[str, dict[float, float]]] = {m: {} for m in USAGE_METRICS}
    sums["CPU"]["algo-1"] = {1.0: 0.1 + 0.2, 2.0: 0.7 + 0.1}
    system = SimpleNamespace(sums=sums, cpu_names=["cpu0", "cpu1"], gpu_names=[], gpu_util={}, gpu_mem={})
    rule = BatchSize()
    rule.evaluate(SimpleNamespace(system=system, start_us=0, end_us=10 * 10**6, origin_us=0, in_report=False))
    series = rule.cpu["algo-1"]
    assert list(series.recent) == [0.30000000000000004 / 2, 0.7999999999999999 / 2]
    assert sorted(series.history.counts) == [0.15, 0.4]
