"""The window loop against hostile input: no usable record, far-off and oversized files, a deadline, absurd scan
intervals, framework traces that end early, unreadable folders and thousands of "GPUs". Each is reported (naming the
file or folder), never a hang, and never a verdict the data cannot support. See docs/evaluator.md, "Damaged input"."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from evaluator_jobs import report, small_spec, standalone, verdict

from cdk_sagemaker_debugger import cli
from cdk_sagemaker_debugger.runtime.evaluator import engine, reading
from cdk_sagemaker_debugger.runtime.evaluator.engine import Evaluator
from cdk_sagemaker_debugger.runtime.evaluator.html_report import render
from cdk_sagemaker_debugger.runtime.evaluator.reading import Cursor, evaluate_store, feed, list_new_files
from cdk_sagemaker_debugger.runtime.evaluator.rules import RuleConfigError
from cdk_sagemaker_debugger.runtime.evaluator.storage import EvaluationInputError, LocalStore
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import StepSpec, constant, hour_folder, write_job

T0 = 1_764_400_020  # small_spec's start: 2025-11-29T07:07:00Z


def _system_files(root: Path) -> list[Path]:
    return sorted((root / "system").rglob("*.json"))


def test_a_tree_without_a_usable_record_is_an_input_error_not_no_issues(tmp_path: Path):
    root = write_job(tmp_path / "po", small_spec())
    for number, path in enumerate(_system_files(root)):
        path.write_text("" if number == 0 else '{"Value": NaN}\ngarbage\n')
    with pytest.raises(EvaluationInputError, match=r"none of the 4 system metrics file\(s\) held a usable record"):
        evaluate_store(LocalStore(root), [report()], read_workers=1)
    err = io.StringIO()
    assert cli.main(["evaluate", str(root), "--out", str(tmp_path / "out")], stdout=io.StringIO(), stderr=err) != 0
    assert "none of the 4 system metrics file(s) held a usable record (6 damaged line(s)" in err.getvalue()


def test_a_tree_without_a_usable_record_gives_an_error_status_in_an_incremental_run(tmp_path: Path):
    root = write_job(tmp_path / "po", small_spec())
    for path in _system_files(root):
        path.write_text("garbage\n")
    ev = Evaluator([report()], strict=False)
    store = LocalStore(root)
    feed(ev, store, list_new_files(store, Cursor(), Cursor()), final=True, read_workers=1)
    [result] = ev.results(final=True)
    assert result.status == "Error"
    assert result.status_details.startswith("EvaluationInputError: none of the 4 system metrics file(s)")


def test_less_than_one_complete_window_says_so_instead_of_no_issues(tmp_path: Path):
    root = write_job(tmp_path / "po", small_spec(minutes=0, partial_last_minute_s=40.0))
    [result] = evaluate_store(LocalStore(root), [report()], read_workers=1).results(final=True)
    assert result.status == "NoIssuesFound"
    assert result.status_details.startswith("NotApplicable: no complete 60-second window of system metrics")


def test_a_file_named_a_year_after_the_job_jumps_over_the_empty_windows(tmp_path: Path):
    root = write_job(tmp_path / "po", small_spec(gpu_util=constant(5.0)))
    first = _system_files(root)[0]
    stray_s = T0 + 365 * 86_400  # 2026-11-29: in the past, so it is read
    stray = root / "system" / "incremental" / hour_folder(stray_s) / f"{stray_s}.algo-1.json"
    stray.parent.mkdir(parents=True)
    stray.write_text(first.read_text())  # records of the job's first minute: a year from the file's name
    ev = evaluate_store(LocalStore(root), [report()], read_workers=1)
    # windows 0-3 hold data (the job's partial fourth minute is no longer the last file), 4 to 525,599 are empty:
    # 4 to 525,598 are jumped over while reading, the last one (ending on the stray file) is evaluated at the end
    assert ev.windows_evaluated == 525_600 and ev.skipped_windows == 525_595
    assert ev.misplaced_records == 11_400  # 600 samples x 19 records: all of the stray file
    assert ev.stats.problems == [
        "no data from 2025-11-29T07:11:00Z to 2026-11-29T07:06:00Z: 525595 empty window(s) skipped, not evaluated "
        "(a gap in the profiler output, or a file named with a far-off time)",
        f"{stray.relative_to(root).as_posix()}: skipped 11400 record(s) whose Timestamp is more than 5 minutes away "
        "from the file's minute (2026-11-29T07:07:00Z); the managed rules never read them either"]
    results = ev.results(final=True)
    assert results[0].status == "IssuesFound"
    page = render(results, ev.timeline, ev.diagnostics(), title="t", source="s")
    assert '<th>skipped windows</th><td class="num">525595</td>' in page
    assert '<th>misplaced records</th><td class="num">11400</td>' in page


def test_a_file_named_in_the_future_is_reported_and_not_read(tmp_path: Path):
    root = write_job(tmp_path / "po", small_spec(gpu_util=constant(5.0)))
    stray = _system_files(root)[0].parent / "9999999960.algo-1.json"
    stray.write_text(_system_files(root)[0].read_text())
    ev = evaluate_store(LocalStore(root), [report()], read_workers=1)
    assert ev.windows_evaluated == 3 and ev.skipped_windows == 0
    assert ev.stats.problems == [f"{stray.relative_to(root).as_posix()}: named with a time in the future "
                                 "(2286-11-20T17:46:00Z); not read"]


def test_the_window_loop_honours_its_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = write_job(tmp_path / "po", small_spec())
    store = LocalStore(root)
    clock = {"now": 0.0}
    monkeypatch.setattr(engine.time, "monotonic", lambda: clock["now"])

    def progress(done: int, total: int, _counters: object) -> None:
        if done == total:
            clock["now"] = 100.0  # the deadline passes after the last file, before the final windows

    ev = Evaluator([report()])
    outcome = feed(ev, store, list_new_files(store, Cursor(), Cursor()), final=True, deadline=50.0,
                   progress=progress, read_workers=1)
    assert ev.out_of_time and not outcome.complete  # so the Lambda continues instead of declaring the job final
    assert ev.windows_evaluated == 2  # the third window closes only once the job is known to have ended
    clock["now"] = 0.0
    assert ev.process(system_through_us=float("inf"), framework_through_us=float("inf"), ended=True,
                      deadline=50.0) == 1
    assert not ev.out_of_time


@pytest.mark.parametrize("value", [1, 0, -60_000_000, "abc", 2_500_000.5, 86_400_000_001, True])
def test_scan_interval_outside_one_second_to_one_day_is_refused_with_the_range(value):
    with pytest.raises(RuleConfigError) as caught:
        Evaluator([standalone("LowGPUUtilization", scan_interval_us=value)])
    message = str(caught.value)
    assert message.startswith(f"LowGPUUtilization: scan_interval_us={value!r} is not usable")
    assert "from 1,000,000 (1 s) to 86,400,000,000 (1 day)" in message


def test_a_bad_scan_interval_makes_only_its_configured_rule_error_in_the_lambda():
    ev = Evaluator([standalone("LowGPUUtilization", scan_interval_us="1"), report()], strict=False)
    assert ev.scan_us == 60_000_000
    low, profiler_report = ev.results(final=True)
    assert low.status == "Error" and "scan_interval_us='1' is not usable" in low.status_details
    assert profiler_report.status != "Error"
    restored = Evaluator.from_state(json.loads(json.dumps(ev.to_state())))
    assert restored.results(final=True)[0].status_details == low.status_details


def test_accepted_scan_intervals_set_the_window(tmp_path: Path):
    assert Evaluator([standalone("LowGPUUtilization", scan_interval_us="30000000")]).scan_us == 30_000_000
    assert Evaluator([standalone("LowGPUUtilization", scan_interval_us=1e6)]).scan_us == 1_000_000


def test_framework_traces_that_end_early_do_not_end_the_system_evaluation(tmp_path: Path):
    """The managed rules stop at the last framework file; a GPU idling at 5 % after it went unnoticed."""
    spec = small_spec(minutes=6, gpu_util=constant(5.0), steps=StepSpec(first_step_s=5.0, count=40))
    root = write_job(tmp_path / "po", spec)
    assert len(list((root / "framework").rglob("*.json"))) == 1  # steps end in the first minute
    ev = evaluate_store(LocalStore(root), [standalone("LowGPUUtilization")], read_workers=1)
    assert ev.windows_evaluated == 6
    [result] = ev.results(final=True)
    assert result.status == "IssuesFound"
    assert verdict(ev, "LowGPUUtilization").report["Datapoints"] == 3600  # 6 minutes of 100 ms samples per GPU


def _two_hour_job(tmp_path: Path) -> Path:
    start = 1_764_403_080  # 07:58 UTC: minutes 07:58 and 07:59 in one hour folder, 08:00 and 08:01 in the next
    return write_job(tmp_path / "po", small_spec(start=start, minutes=3))


def test_an_unreadable_folder_is_reported_not_silently_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = _two_hour_job(tmp_path)
    locked = root / "system" / "incremental" / "2025112908"
    real_scandir = os.scandir

    def scandir(path=".", *args, **kwargs):
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", scandir)
    ev = evaluate_store(LocalStore(root), [report()], read_workers=1)
    assert ev.stats.bad_files == 1
    assert ev.stats.problems == [f"{locked}: folder could not be read (Permission denied); the profiler files in it "
                                 "were not evaluated"]
    assert ev.windows_evaluated == 1  # only 07:58 is complete without 08:00 and 08:01



def test_thousands_of_gpu_names_on_a_node_are_capped_instead_of_stalling_load_balancing(tmp_path: Path):
    """LoadBalancing compares every pair of a node's GPUs: 1,000 names took 17 s per window."""
    root = write_job(tmp_path / "po", small_spec(minutes=1, gpus=70, cores=1, interval_ms=1000))
    ev = evaluate_store(LocalStore(root), [report()], read_workers=1)
    distances = verdict(ev, "LoadBalancing").report["Details"]["algo-1"]["workloads"]
    assert sorted(distances, key=lambda name: int(name[3:])) == [f"gpu{g}" for g in range(64)]
    assert ev.stats.bad_lines == 6 * 60 * 2  # 6 GPUs over the cap, 60 samples, utilisation and memory
    assert ev.stats.problems == ["algo-1: more than 64 GPU names in the system metrics; the records of the GPUs after "
                                 "the first 64 are skipped"]


def test_a_file_far_larger_than_any_profiler_file_is_reported_and_not_read(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    root = write_job(tmp_path / "po", small_spec())
    files = _system_files(root)
    cap = files[1].stat().st_size
    monkeypatch.setattr(reading, "MAX_FILE_BYTES", cap)  # instead of writing a 256 MB file
    big = files[1]
    big.write_bytes(big.read_bytes() + b"\n" * 2_000_000)
    store = LocalStore(root)
    listing = list_new_files(store, Cursor(), Cursor())
    assert [f.key for f in listing.system] == [f.relative_to(root).as_posix() for f in files if f != big]
    assert listing.problems == [f"{big.relative_to(root).as_posix()}: {(cap + 2_000_000) / 1e6:,.0f} MB, more than "
                                f"any profiler file ({cap >> 20} MB at most); not read"]
    outcome = feed(Evaluator([report()]), store, listing, final=True, read_workers=1)
    assert outcome.ignored == [big.relative_to(root).as_posix()]


def test_a_framework_file_named_long_before_the_job_does_not_move_its_start(tmp_path: Path):
    root = write_job(tmp_path / "po", small_spec(minutes=2))
    folder = root / "framework" / "pevents" / "1970010100"
    folder.mkdir(parents=True)
    (folder / "60000000_0-algo-1_pythontimeline.json").write_text("[]")
    ev = evaluate_store(LocalStore(root), [report()], read_workers=1)
    assert ev.origin_us == T0 * 1_000_000 and ev.windows_evaluated == 2
    assert ev.stats.problems == ["framework/pevents/1970010100/60000000_0-algo-1_pythontimeline.json: named "
                                 "1970-01-01T00:01:00Z, more than a day before the first system metrics file "
                                 f"(system/incremental/2025112907/{T0}.algo-1.json); not used as the job's start (T0)"]


def test_rules_with_different_scan_intervals_are_not_silently_evaluated_at_one_in_the_lambda():
    """The Lambda (not strict) evaluates at the first configured rule's interval; a rule configured with another one
    reports Error saying so instead of being evaluated at the other's interval without a word."""
    ev = Evaluator([standalone("LowGPUUtilization"), standalone("StepOutlier", scan_interval_us="30000000"),
                    standalone("BatchSize", scan_interval_us=60_000_000)], strict=False)
    assert ev.scan_us == 60_000_000
    statuses = {r.configuration_name: r for r in ev.results(final=True)}
    assert statuses["StepOutlier"].status == "Error"
    assert statuses["StepOutlier"].status_details.startswith(
        "RuleConfigError: StepOutlier: scan_interval_us=30,000,000 differs from 60,000,000 of LowGPUUtilization")
    assert statuses["LowGPUUtilization"].status != "Error" and statuses["BatchSize"].status != "Error"
    with pytest.raises(RuleConfigError, match="different scan_interval_us values"):
        Evaluator([standalone("LowGPUUtilization"), standalone("StepOutlier", scan_interval_us="30000000")])
