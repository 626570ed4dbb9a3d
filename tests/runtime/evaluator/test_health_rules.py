"""TrainingHang, Straggler, GPUHealth and DataWait on synthetic records and events, through the evaluator's window
loop and its saved state (the Lambda stops and resumes between runs)."""

from __future__ import annotations

import math

import pytest

from cdk_sagemaker_debugger.runtime.evaluator.engine import (
    STATUS_ISSUES,
    STATUS_NO_ISSUES,
    Evaluator,
    RuleConfig,
)
from cdk_sagemaker_debugger.runtime.evaluator.publish import emf_lines
from cdk_sagemaker_debugger.runtime.evaluator.readers import FrameworkFile, SystemFile, TraceEvent

T0 = 1_700_000_040  # a minute boundary
WINDOW_US = 10_000_000


def record(ts: float, name: str, dim: str, value: float, node: str = "algo-1", kind: str = "gpu") -> dict:
    return {"Type": kind, "Name": name, "Dimension": dim, "Value": value, "NodeId": node, "Timestamp": ts}


def event(phase: str, start_s: float, end_s: float, rank: int, host: str = "algo-1", **args) -> TraceEvent:
    return TraceEvent(phase, phase, int(start_s * 1e6), int(end_s * 1e6), f"{host}-{rank}",
                      {"pid": 100 + rank, "local_rank": rank, **args}, "PythontimelineMetrics", (0, 0, "f", 0))


def evaluator(*rules: tuple) -> Evaluator:
    ev = Evaluator([RuleConfig(n, n, {"scan_interval_us": WINDOW_US, **p}) for n, p in rules])
    ev.set_origin(T0 * 1_000_000)
    return ev


def feed_system(ev: Evaluator, node: str, seconds: int, rows) -> None:
    """One minute file per node: ``rows(ts)`` gives the records of each 0.5 s sample."""
    records = [r for i in range(seconds * 2) for r in rows(T0 + i / 2)]
    ev.add_system_records(SystemFile(T0 * 1_000_000, f"system/x/{T0}.{node}.json", node), records)
    ev.note_listing(T0 * 1_000_000 + 60_000_000, None)


def steps(ranks: dict, until_s: dict, data_s: dict | None = None) -> list:
    """Per rank: data, forward and a step every 0.1 s until ``until_s[rank]`` seconds after T0."""
    out = []
    for rank in ranks:
        t = T0 + 0.05
        while t + 0.1 <= T0 + until_s[rank]:
            data = (data_s or {}).get(rank, 0.002)
            out += [event("DataLoaderIter", t, t + data, rank), event("Phase:forward", t + data, t + data + 0.01, rank),
                    event("Step:ModeKeys.TRAIN", t, t + 0.09, rank, step_num="1")]
            t += 0.1 + data
    return out


def finish(ev: Evaluator, events: list, roundtrip: bool = True) -> dict:
    ev.add_framework_events(FrameworkFile(T0 * 1_000_000, "framework/pevents/x/1_0-algo-1_pythontimeline.json",
                                          "algo-1-0", "pythontimeline"), events)
    ev.note_listing(None, T0 * 1_000_000 + 60_000_000)
    if roundtrip:  # the Lambda's state between runs
        ev = Evaluator.from_state(ev.to_state())
    ev.process(system_through_us=math.inf, framework_through_us=math.inf, ended=True)
    return {r.configuration_name: r for r in ev.results(final=True)}


def test_a_hang_names_the_rank_that_stopped_first_and_the_gpu_signature():
    ev = evaluator(("TrainingHang", {"minutes": 0.2}))
    feed_system(ev, "algo-1", 40, lambda ts: [record(ts, "gpu0", "GPUUtilization", 100.0),
                                              record(ts, "gpu0", "GPUPowerDraw", 80.0),
                                              record(ts, "gpu0", "GPUPowerLimit", 700.0)])
    events = steps([0, 1], {0: 20, 1: 20})
    events.append(event("Phase:forward", T0 + 20.0, T0 + 20.05, 0))  # rank 0 finished one more phase, then blocked
    result = finish(ev, events)["TrainingHang"]
    [sub] = result.rules
    assert result.status == STATUS_ISSUES and sub.report["Details"]["stopped_first"] == ["algo-1-1"]
    assert "stopped first: rank 1 (algo-1)" in sub.reason and "busy at low power" in sub.reason
    assert sub.report["Gauge"] == pytest.approx((40 - 0.5 - 20.0) / 60, abs=0.02)  # minutes since rank 1 progressed


def test_ranks_that_exited_normally_are_not_hung():
    ev = evaluator(("TrainingHang", {"minutes": 0.2}))
    feed_system(ev, "algo-1", 40, lambda ts: [record(ts, "cpu0", "CPUUtilization", 5.0, kind="cpu")])
    events = steps([0, 1], {0: 10, 1: 10}) + [event("Process:exit", T0 + 10.1, T0 + 10.1, 0)]
    result = finish(ev, events)["TrainingHang"]  # 30 s of teardown on the host after both stopped; rank 1 was killed
    assert result.status == STATUS_ISSUES and list(result.rules[0].report["Details"]["stuck"]) == ["algo-1-1"]


def test_a_pause_the_job_made_before_is_expected_again():
    ev = evaluator(("TrainingHang", {"minutes": 0.1}))
    feed_system(ev, "algo-1", 50, lambda ts: [record(ts, "cpu0", "CPUUtilization", 5.0, kind="cpu")])
    events = steps([0], {0: 5}) + [event("Phase:checkpoint", T0 + 5, T0 + 25, 0)]  # a 20 s save
    events += [event("Step:ModeKeys.TRAIN", T0 + 25 + i, T0 + 25.5 + i, 0) for i in range(5)]
    result = finish(ev, events)["TrainingHang"]  # 20 s since the last step: under twice the learned 20 s pause
    assert result.status == STATUS_NO_ISSUES, result.rules[0].reason


def test_a_node_that_stops_writing_is_reported(monkeypatch: pytest.MonkeyPatch):
    from cdk_sagemaker_debugger.runtime.evaluator import engine

    monkeypatch.setattr(engine, "SILENT_NODE_S", 20.0)  # five minutes, whatever rules run; shortened here
    ev = evaluator(("TrainingHang", {"minutes": 10, "silent_minutes": 0.2}))
    feed_system(ev, "algo-1", 50, lambda ts: [record(ts, "cpu0", "CPUUtilization", 5.0, kind="cpu")])
    feed_system(ev, "algo-2", 20, lambda ts: [record(ts, "cpu0", "CPUUtilization", 5.0, "algo-2", kind="cpu")])
    results = finish(ev, steps([0], {0: 50}), roundtrip=False)
    [sub] = results["TrainingHang"].rules
    assert sub.verdict == STATUS_ISSUES and "algo-2 (silent 0.5 minutes" in sub.reason
    assert any(p.startswith("algo-2 stopped writing system metrics") for p in ev.stats.problems)


def test_slow_data_on_one_rank_is_named_by_straggler_and_datawait():
    ev = evaluator(("Straggler", {}), ("DataWait", {}))
    feed_system(ev, "algo-1", 30, lambda ts: [record(ts, "cpu0", "CPUUtilization", 5.0, kind="cpu")])
    results = finish(ev, steps([0, 1], {0: 30, 1: 30}, data_s={1: 0.08}))
    straggler, wait = results["Straggler"].rules[0], results["DataWait"].rules[0]
    assert straggler.verdict == wait.verdict == STATUS_ISSUES
    assert [r for r, d in straggler.report["Details"]["ranks"].items() if d["slow_windows"]] == ["algo-1-1"]
    assert "rank 1 (algo-1) on algo-1/gpu1" in straggler.reason and "rank 0" not in straggler.reason
    assert [r for r, d in wait.report["Details"].items() if d["windows_over_threshold"]] == ["algo-1-1"]


def test_equal_ranks_are_no_stragglers_and_wait_little():
    ev = evaluator(("Straggler", {}), ("DataWait", {}))
    feed_system(ev, "algo-1", 30, lambda ts: [record(ts, "cpu0", "CPUUtilization", 5.0, kind="cpu")])
    results = finish(ev, steps([0, 1], {0: 30, 1: 30}))
    assert results["Straggler"].rules[0].verdict == STATUS_NO_ISSUES
    assert results["DataWait"].rules[0].verdict == STATUS_NO_ISSUES


def test_gpu_health_thermal_xid_and_ecc_but_not_the_power_cap():
    def rows(ts: float) -> list:
        return [record(ts, "gpu0", "GPUThrottleReasons", 4.0), record(ts, "gpu1", "GPUThrottleReasons", 0x40),
                record(ts, "gpu2", "GPUThrottleReasons", 0.0), record(ts, "gpu2", "GPUEccUncorrected", 2.0),
                record(ts, "gpu0", "GPUSMClock", 1980.0), record(ts, "gpu1", "GPUSMClock", 1200.0)]

    ev = evaluator(("GPUHealth", {}), ("Straggler", {}))
    feed_system(ev, "algo-1", 30, rows)
    ev.add_system_records(SystemFile(T0 * 1_000_000, f"system/x/{T0}.algo-1.json", "algo-1"),
                          [record(T0 + 12.2, "gpu1", "GPUXid", 79.0)])
    results = finish(ev, [])
    health = results["GPUHealth"].rules[0]
    problems = {g: d["problems"] for g, d in health.report["Details"].items() if d["problems"]}
    assert set(problems) == {"algo-1/gpu1", "algo-1/gpu2"}  # power capping alone (gpu0) is normal under load
    assert "XID 79" in problems["algo-1/gpu1"] and any("hardware thermal" in p for p in problems["algo-1/gpu1"])
    assert problems["algo-1/gpu2"] == ["2 uncorrectable ECC error(s)"]
    straggler = results["Straggler"].rules[0]
    assert straggler.verdict == STATUS_ISSUES and "algo-1/gpu1 at 61 % of the fastest GPU's SM clock" in straggler.reason
    lines = emf_lines("job", [results["GPUHealth"]], now_ms=1)
    assert '"RuleGauge": 100.0' in lines[0]  # the most throttled GPU, percent of its samples


def test_without_the_sampler_data_the_rules_are_not_applicable():
    ev = evaluator(("TrainingHang", {}), ("Straggler", {}), ("GPUHealth", {}), ("DataWait", {}))
    feed_system(ev, "algo-1", 30, lambda ts: [record(ts, "cpu0", "CPUUtilization", 5.0, kind="cpu")])
    results = finish(ev, [])
    assert {n: r.rules[0].verdict for n, r in results.items()} == dict.fromkeys(results, "NotApplicable")
