"""Damaged records and trace events: each is skipped and counted, reported once per file (naming it, the lines and
why), and never fatal or poison for a statistic. See docs/evaluator.md, "Damaged input"."""

from __future__ import annotations

import io
import json
from pathlib import Path

from evaluator_jobs import report, small_spec, verdict

from cdk_sagemaker_debugger import cli
from cdk_sagemaker_debugger.runtime.evaluator.readers import FrameworkFile, ParseStats, iter_system_records, parse_trace
from cdk_sagemaker_debugger.runtime.evaluator.reading import evaluate_store
from cdk_sagemaker_debugger.runtime.evaluator.storage import LocalStore
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import constant, hour_folder, write_job

T0 = 1_764_400_020  # small_spec's start: 2025-11-29T07:07:00Z


def _system_files(root: Path) -> list[Path]:
    return sorted((root / "system").rglob("*.json"))


def _replace_values(path: Path, dimension: str, literals: list[str]) -> None:
    """Give the first len(literals) records of ``dimension`` in ``path`` these raw JSON values."""
    lines = path.read_text().splitlines()
    hits = [i for i, line in enumerate(lines) if f'"Dimension":"{dimension}"' in line][: len(literals)]
    for i, literal in zip(hits, literals, strict=True):
        record = json.loads(lines[i])
        record["Value"] = "@@"
        lines[i] = json.dumps(record).replace('"@@"', literal)
    path.write_text("\n".join(lines) + "\n")


def _rewrite_records(path: Path, dimension: str, edits: list[dict]) -> None:
    """Apply one edit per record of ``dimension`` (keys mapped to None are removed)."""
    lines = path.read_text().splitlines()
    hits = [i for i, line in enumerate(lines) if f'"Dimension":"{dimension}"' in line][: len(edits)]
    for i, edit in zip(hits, edits, strict=True):
        record = json.loads(lines[i])
        for key, value in edit.items():
            if value is None:
                record.pop(key)
            else:
                record[key] = value
        lines[i] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")


def test_nan_and_infinity_in_system_records_are_skipped_and_never_poison_the_verdicts(tmp_path: Path):
    root = write_job(tmp_path / "po", small_spec(gpu_util=constant(5.0)))
    victim = _system_files(root)[1]
    _replace_values(victim, "GPUUtilization", ["NaN", "Infinity", "-Infinity", "1e400"])
    ev = evaluate_store(LocalStore(root), [report()], read_workers=1)
    [result] = ev.results(final=True)
    assert result.status == "IssuesFound"  # was Error: LoadBalancing could not bin a NaN
    assert verdict(ev, "LowGPUUtilization").verdict == "IssuesFound"
    usage = verdict(ev, "OverallSystemUsage").report["Details"]["GPU"]["algo-1"]
    assert usage["max"] == 5.0 and usage["min"] == 5.0  # no NaN or infinity in any statistic
    assert ev.stats.bad_lines == 4
    [problem] = ev.stats.problems
    assert victim.relative_to(root).as_posix() in problem and "4 with NaN or Infinity" in problem


def test_system_records_without_node_id_or_name_are_skipped_and_the_reports_are_written(tmp_path: Path):
    root = write_job(tmp_path / "po", small_spec(gpu_util=constant(5.0)))
    victim = _system_files(root)[0]
    _rewrite_records(victim, "GPUUtilization", [{"NodeId": None}, {"Name": None}, {"NodeId": ["algo-1"]},
                                                {"Name": {"gpu": 0}}, {"Timestamp": "soon"}, {"Dimension": None}])
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["evaluate", str(root), "--out", str(tmp_path / "out")], stdout=out, stderr=err) == 0, err.getvalue()
    summary = json.loads((tmp_path / "out" / "evaluation-summary.json").read_text())
    assert summary["rules"][0]["RuleEvaluationStatus"] == "IssuesFound"
    assert summary["Diagnostics"]["bad_lines"] == 6
    [problem] = summary["Diagnostics"]["problems"]
    assert problem.startswith(f"{victim.relative_to(root).as_posix()}: skipped 6 line(s)")
    for reason in ("1 without NodeId", "1 without Name", "2 with a Dimension, NodeId or Name that is not a string",
                   "1 with a Value or Timestamp that is not a number", "1 without Dimension"):
        assert reason in problem, problem
    gpus = json.loads((tmp_path / "out" / "profiler-reports" / "LowGPUUtilization.json").read_text())["Details"]
    assert sorted(gpus["algo-1"]) == ["gpu0", "gpu1"]  # no None or list "GPU"


def _trace(folder: Path, end_us: int, events: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{end_us}_0-algo-1_pythontimeline.json"
    header = [json.dumps({"name": "process_name", "ph": "M", "pid": 0,
                          "args": {"start_time_since_epoch_in_micros": T0 * 1_000_000}}),
              json.dumps({"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "Step:ModeKeys.TRAIN"}})]
    path.write_text("[\n" + ",\n".join(header + events) + "\n]\n")
    return path


def _step(ts: str, dur: str = "300000", pid: str = "1") -> str:
    return f'{{"name": "Step:ModeKeys.TRAIN", "pid": {pid}, "ph": "X", "ts": {ts}, "dur": {dur}, "args": {{}}}}'


def test_trace_events_with_unusable_times_are_skipped_and_the_file_is_named(tmp_path: Path):
    root = write_job(tmp_path / "po", small_spec())
    good = [_step(str(s * 1_000_000)) for s in (70, 71, 72)]
    bad = [_step("NaN"), _step("Infinity"), _step('"soon"'), _step("null"), _step("1000", dur="-Infinity"),
           _step("1000", pid="[1]")]
    trace = _trace(root / "framework" / "pevents" / hour_folder(T0), (T0 + 100) * 1_000_000, bad[:3] + good + bad[3:])
    ev = evaluate_store(LocalStore(root), [report()], read_workers=1)  # aborted on the first NaN before
    assert verdict(ev, "StepOutlier").report["Datapoints"] == 3
    assert verdict(ev, "MaxInitializationTime").report["Details"]["step_num"]["first"] == (T0 + 70) * 1_000_000
    assert ev.stats.bad_lines == 6
    [problem] = ev.stats.problems
    assert problem.startswith(f"{trace.relative_to(root).as_posix()}: skipped 6 event(s)")
    assert "3 with a NaN or infinite time" in problem and "1 with a pid that is not a number or a string" in problem


def test_events_after_a_damaged_time_origin_are_skipped_not_placed_in_1970():
    file = FrameworkFile(T0 * 1_000_000, f"framework/pevents/x/{T0 * 1_000_000}_0-algo-1_pythontimeline.json",
                         "algo-1-0", "pythontimeline")
    data = ('[{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": NaN}},\n'
            + _step("1000") + "]").encode()
    stats = ParseStats()
    assert parse_trace(data, file, stats) == []
    assert stats.bad_lines == 2 and "process_name record whose start time is not a number" in stats.problems[0]


def test_one_damaged_line_in_a_large_file_costs_only_that_line_and_names_it(tmp_path: Path):
    """The file is decoded a ~1 MB chunk at a time; a damaged chunk is decoded again line by line, and the line number
    in the problem counts from the top of the file, not of the chunk."""
    root = write_job(tmp_path / "po", small_spec(cores=96, gpus=8, minutes=1, partial_last_minute_s=0))
    [path] = _system_files(root)
    lines = path.read_bytes().split(b"\n")
    assert len(lines) == 129_001  # 600 samples x 215 records, and the empty string after the last newline
    lines[100_000] = b"garbage"
    stats = ParseStats()
    key = "system/incremental/2025112907/1764400020.algo-1.json"
    chunks = list(iter_system_records(b"\n".join(lines), key, stats))
    assert len(chunks) > 10 and sum(len(c) for c in chunks) == 128_999 and stats.bad_lines == 1
    assert stats.problems == [f"{key}: skipped 1 line(s) (line 100001): 1 not valid JSON (truncated upload?)"]
