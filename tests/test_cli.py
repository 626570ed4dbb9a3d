"""The ``cdk-sagemaker-debugger`` command: evaluate a profiler-output tree, list the catalog, fail clearly."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cdk_sagemaker_debugger.cli import main
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import JobSpec, StepSpec, constant, write_job

RULE_FILES = {"BatchSize", "CPUBottleneck", "Dataloader", "GPUMemoryIncrease", "IOBottleneck", "LoadBalancing",
              "LowGPUUtilization", "MaxInitializationTime", "OverallFrameworkMetrics", "OverallSystemUsage",
              "StepOutlier"}


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("job") / "exp-1" / "profiler-output"
    spec = JobSpec(minutes=3, gpus=2, cores=4, interval_ms=100, gpu_util=constant(40.0), steps=StepSpec(count=200))
    return write_job(root, spec)


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_evaluate_defaults_to_profiler_report(job: Path, tmp_path: Path):
    code, out, err = run("evaluate", str(job), "--out", str(tmp_path / "out"))
    assert code == 0, err
    written = {p.stem for p in (tmp_path / "out" / "profiler-reports").glob("*.json")}
    assert written == RULE_FILES
    assert (tmp_path / "out" / "profiler-report.html").read_text().startswith("<!DOCTYPE html>")
    low = json.loads((tmp_path / "out" / "profiler-reports" / "LowGPUUtilization.json").read_text())
    assert low["RuleTriggered"] == 4
    assert "LowGPUUtilization        IssuesFound" in out
    assert "ProfilerReport: IssuesFound" in out


def test_evaluate_accepts_the_job_folder_too(job: Path, tmp_path: Path):
    code, _, err = run("evaluate", str(job.parent), "--out", str(tmp_path / "out"))
    assert code == 0, err


def test_standalone_rules_with_parameters(job: Path, tmp_path: Path):
    code, out, err = run("evaluate", str(job), "--out", str(tmp_path / "out"),
                         "--rule", "LowGPUUtilization:patience=100,window=60", "--rule", "StepOutlier:stddev=2")
    assert code == 0, err
    assert {p.stem for p in (tmp_path / "out" / "profiler-reports").glob("*.json")} == {"LowGPUUtilization",
                                                                                       "StepOutlier"}
    low = json.loads((tmp_path / "out" / "profiler-reports" / "LowGPUUtilization.json").read_text())
    assert low["RuleParameters"] == "threshold_p95:70\nthreshold_p5:10\nwindow:60\npatience:100"
    assert low["RuleTriggered"] == 6  # patience 100 is passed in every window: 3 windows x 2 GPUs
    assert "LowGPUUtilization: IssuesFound (RuleEvaluationConditionMet: Evaluation of the rule LowGPUUtilization at " \
           "step 0 " in out


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("LowGPUUtilisation", "Did you mean 'LowGPUUtilization'?"),
        ("LowGPUUtilization:threshold_p95=170", "threshold_p95"),
        ("LowGPUUtilization:window", "is not param=value"),
        ("LowGPUUtilization:windw=5", "windw"),
    ],
)
def test_bad_rule_options_exit_2_with_the_fix(job: Path, tmp_path: Path, rule: str, message: str):
    code, out, err = run("evaluate", str(job), "--out", str(tmp_path / "out"), "--rule", rule)
    assert code == 2 and message in err and out == ""
    assert not (tmp_path / "out").exists()


def test_a_rule_evaluated_twice_is_refused(job: Path, tmp_path: Path):
    code, _, err = run("evaluate", str(job), "--out", str(tmp_path / "o"), "--rule", "ProfilerReport",
                       "--rule", "LowGPUUtilization:window=60")
    assert code == 2 and "--rule ProfilerReport:LowGPUUtilization_<parameter>" in err


def test_profiler_report_overrides(job: Path, tmp_path: Path):
    code, _, err = run("evaluate", str(job), "--out", str(tmp_path / "o"),
                       "--rule", "ProfilerReport:LowGPUUtilization_threshold_p95=30")
    assert code == 0, err
    low = json.loads((tmp_path / "o" / "profiler-reports" / "LowGPUUtilization.json").read_text())
    assert low["RuleTriggered"] == 0 and low["RuleParameters"].startswith("threshold_p95:30\n")


def test_missing_or_empty_input_exits_1(tmp_path: Path):
    code, _, err = run("evaluate", str(tmp_path / "nope"), "--out", str(tmp_path / "o"))
    assert code == 1 and "no such folder" in err
    (tmp_path / "empty").mkdir()
    code, _, err = run("evaluate", str(tmp_path / "empty"), "--out", str(tmp_path / "o"))
    assert code == 1 and "no profiler output found" in err


def test_rules_lists_the_catalog():
    code, out, _ = run("rules")
    assert code == 0
    for name in (*RULE_FILES, "ProfilerReport"):
        assert f"\n{name}\n" in f"\n{out}"
    assert "    window = 500" in out


def test_the_console_script_runs_without_aws_cdk(job: Path, tmp_path: Path):
    """The installed entry point works and never starts jsii."""
    probe = ("import sys, runpy; sys.argv=['cdk-sagemaker-debugger', 'rules'];"
             "from cdk_sagemaker_debugger.cli import main; code = main();"
             "assert 'aws_cdk' not in sys.modules and 'jsii' not in sys.modules, 'aws_cdk imported'; sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    script = Path(sys.executable).with_name("cdk-sagemaker-debugger")
    if script.exists():
        done = subprocess.run([str(script), "evaluate", str(job), "--out", str(tmp_path / "o")], capture_output=True,
                              text=True, timeout=300, env=dict(os.environ))
        assert done.returncode == 0, done.stderr
        assert "ProfilerReport: IssuesFound" in done.stdout


def test_evaluate_reads_an_s3_uri(job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import boto3
    from moto import mock_aws

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="training-output")
        for path in job.rglob("*"):
            if path.is_file():
                s3.put_object(Bucket="training-output", Key=f"jobs/exp-1/profiler-output/{path.relative_to(job)}",
                              Body=path.read_bytes())
        code, out, err = run("evaluate", "s3://training-output/jobs/exp-1", "--out", str(tmp_path / "s3"))
        assert code == 0, err
        code_missing, _, err_missing = run("evaluate", "s3://training-output/jobs/nothing-here", "--out",
                                           str(tmp_path / "none"))
    local_code, _, _ = run("evaluate", str(job), "--out", str(tmp_path / "local"))
    assert local_code == 0
    for name in RULE_FILES:
        assert (tmp_path / "s3" / "profiler-reports" / f"{name}.json").read_text() == (
            tmp_path / "local" / "profiler-reports" / f"{name}.json").read_text()
    assert code_missing == 1 and "no profiler output found" in err_missing


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal(job: Path, tmp_path: Path):
    terminal = _Terminal()
    assert main(["evaluate", str(job), "--out", str(tmp_path / "o")], stdout=io.StringIO(), stderr=terminal) == 0
    assert "\r[" in terminal.getvalue() and terminal.getvalue().rstrip().endswith("files")
    _, _, err = run("evaluate", str(job), "--out", str(tmp_path / "o2"))
    assert err == ""
