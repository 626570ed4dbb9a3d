"""An open window is kept as per-timestamp sums and threshold counts, not values; what the rules read is unchanged."""

from __future__ import annotations

import json
import random

from cdk_sagemaker_debugger.runtime.evaluator.engine import Evaluator, RuleConfig
from cdk_sagemaker_debugger.runtime.evaluator.window import CPU_COLUMN, GPU_COLUMN, IO_COLUMN, SystemWindow

TESTS = {GPU_COLUMN: (("<", 10),), CPU_COLUMN: ((">", 90),), IO_COLUMN: ((">", 50),)}
START = 1_764_400_020.0


def records(cores: int, seconds: int, nodes: int = 2, seed: int = 3) -> list[dict]:
    """Interleaved nodes, per-core values with one decimal, integer GPU percentages, some exactly on 90 and 50."""
    rnd = random.Random(seed)
    out = []
    for second in range(seconds):
        for node in range(1, nodes + 1):
            ts = START + second + 0.009 + node * 0.0031
            for core in range(cores):
                out.append({"Dimension": "CPUUtilization", "Name": f"cpu{core}", "NodeId": f"algo-{node}",
                            "Timestamp": ts, "Value": rnd.choice([90, 90.0, 12.3, 95.5, 33.3, 0.1])})
                out.append({"Dimension": "I/OWaitPercentage", "Name": f"cpu{core}", "NodeId": f"algo-{node}",
                            "Timestamp": ts, "Value": rnd.choice([50, 0.7, 51.2, 3.3])})
            for gpu in range(4):
                out.append({"Dimension": "GPUUtilization", "Name": f"gpu{gpu}", "NodeId": f"algo-{node}",
                            "Timestamp": ts, "Value": float(rnd.choice([0, 9, 10, 80]))})
                out.append({"Dimension": "GPUMemoryUtilization", "Name": f"gpu{gpu}", "NodeId": f"algo-{node}",
                            "Timestamp": ts, "Value": float(rnd.choice([30, 41]))})
    return out


def expected(recs: list[dict]) -> tuple[dict, list]:
    """The sums and counts straight from the values: runs of one node and timestamp, summed in file order."""
    runs: list[list] = []
    for r in recs:
        if not runs or runs[-1][0] != (r["NodeId"], r["Timestamp"]):
            runs.append([(r["NodeId"], r["Timestamp"]), {}])
        runs[-1][1].setdefault(r["Dimension"], []).append(r["Value"])
    sums: dict = {"GPU": {}, "CPU": {}, "I/O": {}, "GPU memory": {}}
    counts = []
    metric_of = {"GPUUtilization": "GPU", "CPUUtilization": "CPU", "I/OWaitPercentage": "I/O",
                 "GPUMemoryUtilization": "GPU memory"}
    for (node, ts), dims in runs:
        for dim, values in dims.items():
            d = sums[metric_of[dim]].setdefault(node, {})
            d[ts] = sum(values, d.get(ts, 0.0))
        counts.append((sum(1 for v in dims.get("GPUUtilization", []) if v < 10),
                       sum(1 for v in dims.get("CPUUtilization", []) if v > 90),
                       sum(1 for v in dims.get("I/OWaitPercentage", []) if v > 50),
                       len(dims.get("I/OWaitPercentage", []))))
    return sums, counts


def window_fed(recs: list[dict], cut_every: int) -> SystemWindow:
    """Fed in chunks, with the window saved as JSON and loaded again between chunks (as between Lambda runs)."""
    w = SystemWindow(0, int(START * 1e6), int((START + 60) * 1e6), TESTS)
    for i in range(0, len(recs), cut_every):
        w.add(recs[i : i + cut_every])
        w = SystemWindow.from_state(json.loads(json.dumps(w.to_state())))
    w.finalize()
    return w


def observed(w: SystemWindow) -> tuple[dict, list]:
    sums = {m: w.sums[m] for m in ("GPU", "CPU", "I/O", "GPU memory")}
    counts = [(w.count(run, GPU_COLUMN, "<", 10), w.count(run, CPU_COLUMN, ">", 90), w.count(run, IO_COLUMN, ">", 50),
               w.values(run, IO_COLUMN)) for run in w.runs]
    return sums, counts


def test_sums_and_counts_equal_those_of_the_values_bit_for_bit_whatever_the_chunks():
    recs = records(cores=24, seconds=6)
    want_sums, want_counts = expected(recs)
    for cut in (len(recs), 1000, 97, 7):  # 7 and 97 cut runs (one node and timestamp) in the middle
        got_sums, got_counts = observed(window_fed(recs, cut))
        assert got_counts == want_counts
        for metric, nodes in want_sums.items():
            assert {n: list(d.items()) for n, d in got_sums[metric].items()} == \
                   {n: list(d.items()) for n, d in nodes.items()}, metric


def test_the_state_of_an_open_window_does_not_grow_with_the_cores():
    small = len(json.dumps(window_fed(records(cores=8, seconds=20), 10**9).to_state()))
    large = len(json.dumps(window_fed(records(cores=128, seconds=20), 10**9).to_state()))
    assert large < 1.3 * small


def test_a_window_saved_with_its_values_by_the_previous_version_is_read():
    recs = records(cores=6, seconds=3)
    new = window_fed(recs, len(recs))
    runs: list[list] = []
    for r in recs:  # the older layout: every run with its values, sums only for Network and CPU memory
        if not runs or (runs[-1][5], runs[-1][0]) != (r["NodeId"], r["Timestamp"]):
            runs.append([r["Timestamp"], [], [], [], [], r["NodeId"]])
        column = {"GPUUtilization": 1, "CPUUtilization": 2, "I/OWaitPercentage": 3, "GPUMemoryUtilization": 4}
        runs[-1][column[r["Dimension"]]].append(r["Value"])
    old = {"index": 0, "start_us": new.start_us, "end_us": new.end_us, "gpu_util": new.gpu_util,
           "gpu_mem": new.gpu_mem, "health": {}, "cpu_names": sorted(new.cpu_names),
           "gpu_names": sorted(new.gpu_names), "sums": {"Network": {}, "CPU memory": {}}, "runs": runs,
           "min_ts": new.min_ts, "max_ts": new.max_ts, "records": new.records}
    loaded = SystemWindow.from_state(json.loads(json.dumps(old)), TESTS)
    loaded.finalize()
    assert observed(loaded) == observed(new)


def test_the_evaluator_keeps_the_counts_its_configured_rules_read():
    ev = Evaluator([RuleConfig("ProfilerReport", "ProfilerReport"),
                    RuleConfig("busy", "CPUBottleneck", {"cpu_threshold": "80", "gpu_threshold": "5"})])
    assert ev.window_tests == {GPU_COLUMN: (("<", 10), ("<", 5)), CPU_COLUMN: ((">", 90), (">", 80)),
                               IO_COLUMN: ((">", 50),)}


def test_two_rules_testing_equal_limits_of_two_types_each_read_their_count():
    ev = Evaluator([RuleConfig("a", "CPUBottleneck", {"cpu_threshold": 90}),
                    RuleConfig("b", "CPUBottleneck", {"cpu_threshold": 90.0})])
    w = SystemWindow(0, int(START * 1e6), int((START + 60) * 1e6), ev.window_tests)
    w.add(records(cores=4, seconds=1, nodes=1))
    w.finalize()
    assert [w.count(run, CPU_COLUMN, ">", 90) for run in w.runs] == [w.count(run, CPU_COLUMN, ">", 90.0)
                                                                     for run in w.runs]
