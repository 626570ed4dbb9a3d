"""The window loop: which windows run, boundaries, the straddling-event deviation, damage, and incremental runs that
must give exactly the one-shot result even when a run is lost before it commits."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from evaluator_jobs import evaluate, report, small_spec, verdict

from cdk_sagemaker_debugger.runtime.evaluator.engine import Evaluator
from cdk_sagemaker_debugger.runtime.evaluator.reading import Cursor, evaluate_store, feed, list_new_files
from cdk_sagemaker_debugger.runtime.evaluator.report import report_files
from cdk_sagemaker_debugger.runtime.evaluator.storage import EvaluationInputError, LocalStore
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import DataloaderSpec, StepSpec, constant, write_job

T0 = 1_764_400_020


def _system_line(ts: float, value: float, dim: str = "GPUUtilization", name: str = "gpu0") -> str:
    return json.dumps({"Type": "gpu", "Name": name, "Dimension": dim, "Value": value, "NodeId": "algo-1",
                       "Timestamp": ts})


def _write_minutes(root: Path, minutes: dict[int, list[str]]) -> None:
    folder = root / "system" / "incremental" / "2025112907"
    folder.mkdir(parents=True, exist_ok=True)
    for start, lines in minutes.items():
        (folder / f"{start}.algo-1.json").write_text("\n".join(lines) + "\n")


def test_the_last_partial_minute_is_never_analysed():
    ev = evaluate(small_spec(minutes=3), report())
    assert ev.windows_evaluated == 3
    details = verdict(ev, "MaxInitializationTime").report["Details"]
    assert details["job_end"] < T0 + 180  # the fourth (partial) file is L itself


def test_a_record_exactly_on_a_window_boundary_belongs_to_both_windows(tmp_path: Path):
    _write_minutes(tmp_path, {
        T0: [_system_line(T0 + 10.5, 50.0), _system_line(T0 + 60.0, 50.0)],
        T0 + 60: [_system_line(T0 + 70.5, 50.0)],
        T0 + 120: [_system_line(T0 + 130.5, 50.0)],
    })
    ev = evaluate_store(LocalStore(tmp_path), [report()])
    assert ev.windows_evaluated == 2
    # 3 records inside the two windows, one of them read twice
    assert verdict(ev, "LowGPUUtilization").report["Datapoints"] == 4


def test_a_step_straddling_a_window_boundary_is_counted_once(tmp_path: Path):
    """Deviation: the reference reader returns an event that overlaps two windows in both (841 steps gave 849)."""
    _write_minutes(tmp_path, {T0 + 60 * m: [_system_line(T0 + 60 * m + 1.5, 90.0)] for m in range(4)})
    folder = tmp_path / "framework" / "pevents" / "2025112907"
    folder.mkdir(parents=True)
    origin = T0 * 1_000_000
    trace = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": origin}},
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "Step:ModeKeys.TRAIN"}},
        {"name": "Step:ModeKeys.TRAIN", "pid": 1, "ph": "X", "ts": 50_000_000, "dur": 20_000_000,
         "args": {"step_num": "7"}},
    ]
    (folder / f"{origin + 70_000_000}_0-algo-1_pythontimeline.json").write_text(json.dumps(trace))
    ev = evaluate_store(LocalStore(tmp_path), [report()])
    assert verdict(ev, "MaxInitializationTime").report["Datapoints"] == 1
    assert verdict(ev, "MaxInitializationTime").report["Details"]["step_num"] == {"first": origin + 50_000_000}
    assert verdict(ev, "StepOutlier").report["Datapoints"] == 1


def test_damaged_lines_are_counted_and_the_rest_is_evaluated(tmp_path: Path):
    root = write_job(tmp_path / "po", small_spec(gpu_util=constant(50.0)))
    victim = sorted((root / "system").rglob("*.json"))[1]
    text = victim.read_text().splitlines()
    text[5] = text[5][:20]
    victim.write_text("\n".join(text)[:-40])  # also truncate the last line
    ev = evaluate_store(LocalStore(root), [report()])
    diagnostics = ev.diagnostics()
    assert diagnostics["bad_lines"] == 2 and any(victim.name in p for p in diagnostics["problems"])
    assert verdict(ev, "LowGPUUtilization").verdict == "IssuesFound"


class _Unreadable(LocalStore):
    """Lists the files but reads none, as an S3 prefix does to credentials without s3:GetObject."""

    def read(self, key: str) -> bytes:
        raise PermissionError(f"denied: {key}")


def test_a_job_none_of_whose_files_can_be_read_is_an_input_error_not_a_clean_verdict(tmp_path: Path):
    root = write_job(tmp_path / "po", small_spec())
    listed = sum(1 for p in root.rglob("*.json"))
    with pytest.raises(EvaluationInputError, match=rf"none of the {listed} profiler files could be read.*PermissionError"):
        evaluate_store(_Unreadable(root), [report()], read_workers=1)


def test_progress_reports_files_and_the_bytes_and_records_read(tmp_path: Path):
    root = write_job(tmp_path / "po", small_spec())
    calls: list[tuple[int, int, int, int]] = []
    ev = evaluate_store(LocalStore(root), [report()],
                        progress=lambda done, total, stats: calls.append((done, total, stats.bytes, stats.records)))
    assert [c[0] for c in calls] == list(range(1, calls[0][1] + 1))  # one call per file, ending at the total
    assert calls[-1][2:] == (ev.stats.bytes, ev.stats.records) and calls[-1][2] > calls[0][2] > 0


def _one_shot(root: Path) -> dict[str, str]:
    return report_files(evaluate_store(LocalStore(root), [report()]).results(final=True))


def _arrival_order(root: Path) -> list[Path]:
    files = [p for p in root.rglob("*") if p.is_file() and not p.name.endswith(".ts")]
    def ready_at(p: Path) -> float:
        stamp = p.name.split("_")[0].split(".")[0]
        return int(stamp) / (1e6 if len(stamp) > 10 else 1) + (60 if "system" in p.parts else 0)
    return sorted(files, key=ready_at)


def _run_once(live: Path, state: dict | None, ended: bool) -> dict:
    evaluator = Evaluator.from_state(state["evaluator"]) if state else Evaluator([report()])
    sys_cursor = Cursor.from_state(state and state["system"])
    fw_cursor = Cursor.from_state(state and state["framework"])
    store = LocalStore(live)
    listing = list_new_files(store, sys_cursor, fw_cursor)
    outcome = feed(evaluator, store, listing, final=ended, read_workers=1)
    sys_cursor.advance(outcome.system_consumed)
    fw_cursor.advance(outcome.framework_consumed)
    # persisted as JSON, exactly as the Lambda does
    return json.loads(json.dumps({"evaluator": evaluator.to_state(), "system": sys_cursor.to_state(),
                                  "framework": fw_cursor.to_state()}))


def test_incremental_runs_with_a_lost_run_equal_one_shot(tmp_path: Path):
    spec = small_spec(minutes=4, nodes=2, gpu_util=lambda n, d, s, t: 40.0 + (s % 7) * 5, steps=StepSpec(count=600),
                      dataloader=DataloaderSpec(workers=3))
    full = write_job(tmp_path / "full", spec)
    expected = _one_shot(full)
    live = tmp_path / "live"
    arrivals = _arrival_order(full)
    state = None
    for step, count in enumerate((3, 5, 8, 11, len(arrivals))):
        for path in arrivals[:count]:
            target = live / path.relative_to(full)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, target)
        if step == 2:
            _run_once(live, state, ended=False)  # this run crashes before committing: its work is simply redone
        state = _run_once(live, state, ended=False)
    for marker in ("system/training_job_end.ts", "framework/training_job_end.ts"):
        shutil.copy(full / marker, live / marker)
    state = _run_once(live, state, ended=False)
    final = Evaluator.from_state(state["evaluator"])
    assert final.windows_evaluated == 4
    assert report_files(final.results(final=True)) == expected
    assert final.diagnostics()["late_records"] == 0


def test_cursor_keeps_a_trailing_window_of_seen_keys():
    cursor = Cursor()
    minute = 60_000_000
    consumed = [(i * minute, f"system/incremental/h/{1000 + i * 60}.algo-1.json") for i in range(10)]
    cursor.advance(consumed)
    assert cursor.start_after == consumed[4][1]  # newest is minute 9; keys more than 5 minutes older are behind
    assert cursor.seen == {key for _, key in consumed[5:]}


def test_a_failing_rule_gives_error_status_and_spares_the_other_rules(monkeypatch):
    """The reference ProfilerReport crashes (AttributeError in its handler) when any sub-rule raises."""
    from evaluator_jobs import standalone

    from cdk_sagemaker_debugger.runtime.evaluator import rules as rule_module

    def broken(self, ctx):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(rule_module.StepOutlier, "evaluate", broken)
    ev = evaluate(small_spec(minutes=2, gpu_util=constant(20.0)), report(), standalone("LowGPUUtilization"))
    by_name = {r.configuration_name: r for r in ev.results(final=True)}
    assert by_name["ProfilerReport"].status == "Error"
    assert by_name["ProfilerReport"].status_details.startswith("ZeroDivisionError: StepOutlier failed in window 0")
    assert by_name["LowGPUUtilization"].status == "IssuesFound"
