"""The ``cdk-sagemaker-debugger`` command: evaluate a profiler-output tree, list the catalog, fail clearly."""

from __future__ import annotations

import fcntl
import io
import json
import os
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from helpers import ROOT

from cdk_sagemaker_debugger.cli import main
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import JobSpec, StepSpec, constant, write_job
from cdk_sagemaker_debugger.runtime.evaluator.tensor_evaluation import TENSOR_RULES

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
    # the outcome in plain words (windows, not SageMaker's "at step N"), and what to try for the rule that fired
    assert "LowGPUUtilization: IssuesFound. LowGPUUtilization found issues after 3 analysis windows" in out
    assert "  try (LowGPUUtilization): Feed the GPUs faster" in out
    assert "Windows met" in out.splitlines()[0] and "Triggered" not in out


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("LowGPUUtilisation", "Did you mean 'LowGPUUtilization'?"),
        ("LowGPUUtilization:threshold_p95=170", "threshold_p95"),
        ("LowGPUUtilization:window", "is not param=value"),
        ("LowGPUUtilization:windw=5", "windw"),
        # a parameter given twice kept the last value silently
        ("LowGPUUtilization:window=60,window=70", "window is given twice (window=60 and window=70); give each "
                                                  "parameter once"),
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


def test_rules_with_different_scan_intervals_are_refused(job: Path, tmp_path: Path):
    """They were silently evaluated at the smallest interval."""
    code, out, err = run("evaluate", str(job), "--out", str(tmp_path / "o"),
                         "--rule", "LowGPUUtilization:scan_interval_us=30000000", "--rule", "StepOutlier")
    assert code == 2 and out == ""
    assert ("the rules have different scan_interval_us values (LowGPUUtilization=30,000,000, "
            "StepOutlier=60,000,000 us)") in err
    assert not (tmp_path / "o").exists()


def test_profiler_report_overrides(job: Path, tmp_path: Path):
    code, _, err = run("evaluate", str(job), "--out", str(tmp_path / "o"),
                       "--rule", "ProfilerReport:LowGPUUtilization_threshold_p95=30")
    assert code == 0, err
    low = json.loads((tmp_path / "o" / "profiler-reports" / "LowGPUUtilization.json").read_text())
    assert low["RuleTriggered"] == 0 and low["RuleParameters"].startswith("threshold_p95:30\n")


def test_missing_or_empty_input_exits_3(tmp_path: Path):
    code, _, err = run("evaluate", str(tmp_path / "nope"), "--out", str(tmp_path / "o"))
    assert code == 3 and "no such folder" in err
    (tmp_path / "empty").mkdir()
    code, _, err = run("evaluate", str(tmp_path / "empty"), "--out", str(tmp_path / "o"))
    assert code == 3 and "no profiler output found" in err
    assert not (tmp_path / "o").exists()


def test_rules_lists_the_catalog():
    code, out, _ = run("rules")
    assert code == 0
    for name in (*RULE_FILES, "ProfilerReport"):
        assert f"\n{name}\n" in f"\n{out}"
    assert "    window = 500  (integer >= 1)  # Window size" in out  # the default, the accepted values, the meaning
    assert "    scan_interval_us = 60000000  (integer >= 1)" in out  # every parameter the --rule option accepts
    assert "    threshold = 0.5  (proportion, 0 to 1)" in out and "    mode = None  (one of TRAIN, EVAL" in out
    for name in (*TENSOR_RULES, "LossNotDecreasing", "Overfit", "StalledTraining"):  # the tensor and metric rules
        assert f"\n{name}\n" in out
    assert "    token_thresholds_percent = '50'  (comma-separated percentages, 0 to 100 each)" in out


def test_every_rule_the_rules_command_lists_is_one_evaluate_accepts_with_those_parameters(job: Path, tmp_path: Path):
    catalog = json.loads(run("rules", "--format", "json")[1])
    tensor = {r["name"]: {p["name"]: p["default"] for p in r["parameters"]} for r in catalog["tensor_rules"]}
    assert tensor == {name: cls.defaults for name, cls in TENSOR_RULES.items()}  # the evaluator's own parameter lists
    for rule in catalog["rules"][:3] + catalog["tensor_rules"][:3]:
        params = ",".join(f"{p['name']}={p['default']}" for p in rule["parameters"] if p["default"] not in (None, ""))
        code, _, err = run("evaluate", str(job), "--out", str(tmp_path / rule["name"]), "--quiet",
                           "--rule", f"{rule['name']}:{params}")
        assert code == 0, err


def test_sample_help_says_what_it_does_and_its_exit_codes():
    code, out, _ = run("sample", "--help")
    assert code == 0
    assert "in SageMaker Debugger's profiler layout" in out and "evaluate DIR --out REPORT" in out
    for status in ("0  the samples were written", "2  usage error", "4  --out is held by another sampler"):
        assert status in out


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
    assert code_missing == 3 and "no profiler output found" in err_missing


# ---- progress: a tqdm bar on a terminal, nothing in a pipe, in CI or with --quiet

def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def run_on_a_terminal(argv: list[str], env: dict[str, str], columns: int = 120) -> tuple[int, bytes, bytes]:
    """Run the command with stderr on a pseudo-terminal (stdout a pipe); return (status, stdout, terminal output)."""
    controller, terminal = os.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "cdk_sagemaker_debugger.cli", *argv], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=terminal, env=env)
    os.close(terminal)
    seen = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the command exited and closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(controller)
    out, _ = proc.communicate(timeout=300)
    return proc.returncode, out, seen


@pytest.mark.parametrize("columns", [120, 0], ids=["sized", "unsized"])
def test_progress_is_drawn_on_a_terminal(job: Path, tmp_path: Path, columns: int):
    code, out, seen = run_on_a_terminal(["evaluate", str(job), "--out", str(tmp_path / "o")], cli_env(), columns)
    assert code == 0, seen
    text = seen.decode()
    assert "reading: 100%|" in text and "files, " in text and "files, ," not in text  # files read of files listed
    assert "B read, " in text and " records/s [" in text and " left]" in text  # bytes, records per second, time left
    assert "ProfilerReport: IssuesFound" in out.decode() and "reading" not in out.decode()


@pytest.mark.parametrize(("extra", "env"), [(["--quiet"], {}), ([], {"CI": "true"})], ids=["quiet", "ci"])
def test_no_progress_with_quiet_or_in_ci_even_on_a_terminal(job: Path, tmp_path: Path, extra: list[str],
                                                            env: dict[str, str]):
    code, out, seen = run_on_a_terminal(["evaluate", str(job), "--out", str(tmp_path / "o"), *extra], cli_env(**env))
    assert code == 0 and seen == b"" and b"ProfilerReport: IssuesFound" in out


def test_no_progress_in_a_pipe_and_tqdm_never_loaded(job: Path, tmp_path: Path):
    probe = ("import sys; from cdk_sagemaker_debugger.cli import main; "
             f"code = main(['evaluate', {str(job)!r}, '--out', {str(tmp_path / 'o')!r}]); "
             "sys.exit(code if 'tqdm' not in sys.modules else 99)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, env=cli_env())
    assert done.returncode == 0 and done.stderr == ""
    assert "ProfilerReport: IssuesFound" in done.stdout


# ---- --format json, --version, --help, rules --format json

def test_format_json_prints_the_summary_and_nothing_else(job: Path, tmp_path: Path):
    code, out, err = run("evaluate", str(job), "--out", str(tmp_path / "o"), "--format", "json")
    assert code == 0, err
    printed = json.loads(out)  # stdout is the JSON document alone
    assert printed == json.loads((tmp_path / "o" / "evaluation-summary.json").read_text())
    assert printed["rules"][0]["RuleConfigurationName"] == "ProfilerReport"
    assert printed["rules"][0]["RuleEvaluationStatus"] == "IssuesFound"
    assert "wrote " in err


def test_version_comes_from_the_package():
    from cdk_sagemaker_debugger import __version__

    code, out, _ = run("--version")
    assert code == 0 and out == f"cdk-sagemaker-debugger {__version__}\n"


@pytest.mark.parametrize("argv", [["--help"], ["evaluate", "--help"]])
def test_help_documents_every_exit_status(argv: list[str]):
    code, out, _ = run(*argv)
    assert code == 0
    for status in ("0  the rules were evaluated", "1  --fail-on STATUS", "2  usage error", "3  the profiler data",
                   "4  the report (evaluate) or the samples (sample) could not be written"):
        assert status in out


@pytest.mark.parametrize(("option", "message"), [
    ("VanishingGradient:threshold=-1", "rule 'VanishingGradient': threshold: must be greater than 0, got -1."),
    ("AllZero:threshold=150", "threshold: is a percentage and must be between 0 and 100 inclusive, got 150."),
    ("Confusion:category_no=1", "category_no: must be an integer >= 2, got 1."),
    ("TensorVariance:min_threshold=5,max_threshold=1", "min_threshold (5) must be lower than max_threshold (1)."),
    ("DeadRelu:treshold_layer=3", "unknown parameter(s) treshold_layer; DeadRelu accepts tensor_regex"),
])
def test_tensor_rule_values_are_checked_as_a_jobs_debugger_rules_are(job: Path, tmp_path: Path, option: str,
                                                                      message: str):
    code, _, err = run("evaluate", str(job), "--out", str(tmp_path / "o"), "--rule", option)
    assert code == 2 and message in err, err


def test_tensor_rule_values_read_as_numbers_are_checked_as_the_text_they_were(job: Path, tmp_path: Path):
    code, _, err = run("evaluate", str(job), "--out", str(tmp_path / "o"), "--quiet",
                       "--rule", "NLPSequenceRatio:token_values=0,token_thresholds_percent=40")
    assert code == 0, err


def test_rules_as_json_for_tooling():
    code, out, _ = run("rules", "--format", "json")
    assert code == 0
    rules = {r["name"]: r for r in json.loads(out)["rules"]}
    assert set(rules) == RULE_FILES | {"ProfilerReport", "TrainingHang", "Straggler", "GPUHealth", "DataWait"}
    hang = {p["name"]: p["default"] for p in rules["TrainingHang"]["parameters"]}
    assert hang == {"minutes": 10, "pause_factor": 2, "silent_minutes": 5, "low_power_percent": 40,
                    "scan_interval_us": 60_000_000}
    low = {p["name"]: p["default"] for p in rules["LowGPUUtilization"]["parameters"]}
    assert low == {"threshold_p95": 70, "threshold_p5": 10, "window": 500, "patience": 1000,
                   "scan_interval_us": 60_000_000}
    metric = {r["name"]: r for r in json.loads(out)["metric_rules"]}
    assert metric["Overfit"]["metrics"] == ["train_metric", "validation_metric"]
    patience = next(p for p in metric["Overfit"]["parameters"] if p["name"] == "patience")
    assert patience == {"name": "patience", "default": 1, "type": "int", "accepts": "integer >= 1",
                        "description": patience["description"]} and patience["description"]
    mode = next(p for p in rules["StepOutlier"]["parameters"] if p["name"] == "mode")
    assert mode["choices"] == ["TRAIN", "EVAL", "PREDICT", "GLOBAL"] and mode["type"] == "str | None"
    assert {r["name"] for r in json.loads(out)["tensor_rules"]} == set(TENSOR_RULES)
    assert rules["LowGPUUtilization"]["summary"] and "LowGPUUtilization" in rules["ProfilerReport"]["overridable"]


# ---- exit status: 1 with --fail-on, 2 for every usage error, 4 when the report cannot be written

@pytest.mark.parametrize(
    ("fail_on", "expected"),
    [(["IssuesFound"], 1), (["NoIssuesFound,IssuesFound"], 1), (["Error", "NoIssuesFound"], 0), ([], 0)],
)
def test_fail_on_decides_the_exit_status(job: Path, tmp_path: Path, fail_on: list[str], expected: int):
    flags = [arg for status in fail_on for arg in ("--fail-on", status)]
    code, out, err = run("evaluate", str(job), "--out", str(tmp_path / "o"), "--format", "json", *flags)
    assert code == expected, err
    assert json.loads(out)["rules"][0]["RuleEvaluationStatus"] == "IssuesFound"  # the report is written either way
    assert ("--fail-on IssuesFound: ProfilerReport reached IssuesFound" in err) == (expected == 1)


@pytest.fixture(scope="module")
def cpu_only_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `sample` writes on a CPU-only laptop: system metrics, no GPU, no framework traces."""
    root = tmp_path_factory.mktemp("cpu") / "laptop" / "profiler-output"
    return write_job(root, JobSpec(minutes=3, gpus=0, cores=4, interval_ms=100))


@pytest.mark.parametrize(("fail_on", "expected"), [("NotApplicable", 1), ("NoIssuesFound", 0), ("IssuesFound", 0)])
def test_fail_on_not_applicable_when_nothing_was_judged(cpu_only_job: Path, tmp_path: Path, fail_on: str,
                                                         expected: int):
    code, out, err = run("evaluate", str(cpu_only_job), "--out", str(tmp_path / "o"), "--fail-on", fail_on)
    assert code == expected, err
    assert "ProfilerReport: NotApplicable. Nothing was judged" in out  # the word the table prints is the word accepted
    summary = json.loads((tmp_path / "o" / "evaluation-summary.json").read_text())["rules"][0]
    assert summary["Outcome"] == "NotApplicable" and summary["RuleEvaluationStatus"] == "NoIssuesFound"
    assert ("--fail-on NotApplicable: ProfilerReport reached NotApplicable" in err) == (expected == 1)


def test_the_summary_says_what_to_try_for_each_rule_with_issues(job: Path, tmp_path: Path):
    code, _, err = run("evaluate", str(job), "--out", str(tmp_path / "o"))
    assert code == 0, err
    entry = json.loads((tmp_path / "o" / "evaluation-summary.json").read_text())["rules"][0]
    verdicts = {v["Rule"]: v for v in entry["Verdicts"]}
    assert entry["Outcome"] == "IssuesFound" and "found issues after 3 analysis windows" in entry["Headline"]
    assert verdicts["LowGPUUtilization"]["Verdict"] == "IssuesFound"
    assert 1 <= len(verdicts["LowGPUUtilization"]["WhatToTry"]) <= 2
    assert "num_workers" in verdicts["LowGPUUtilization"]["WhatToTry"][0]
    assert all(v["WhatToTry"] == [] for v in verdicts.values() if v["Verdict"] != "IssuesFound")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["evaluate", "--out", "OUT"], "one of the arguments PATH_OR_S3_URI --training-job is required"),
        (["evaluate", "JOB", "--training-job", "j", "--out", "OUT"], "not allowed with argument PATH_OR_S3_URI"),
        (["evaluate", "JOB"], "the following arguments are required: --out"),
        (["evaluate", "JOB", "--out", "OUT", "--fail-on", "issuesfound"], "Did you mean 'IssuesFound'?"),
        (["evaluate", "JOB", "--out", "OUT", "--fail-on", "Issues"], "use one of IssuesFound, Error, NoIssuesFound"),
        (["evaluate", "JOB", "--out", "OUT", "--format", "yaml"], "invalid choice: 'yaml'"),
        (["evaluate", "JOB", "--out", "OUT", "--verbose"], "unrecognized arguments: --verbose"),
        (["evaluate", "JOB", "--out", "FILE"], "exists and is not a folder"),
        (["evaluate", "JOB", "--out", "FILE/report"], "is a file, so no folder can be created under it"),
        (["rules", "--format", "csv"], "invalid choice: 'csv'"),
        (["sample-nothing"], "invalid choice: 'sample-nothing'"),
    ],
)
def test_every_usage_error_exits_2(job: Path, tmp_path: Path, argv: list[str], message: str):
    (tmp_path / "a-file").write_text("")
    paths = {"JOB": str(job), "OUT": str(tmp_path / "o"), "FILE": str(tmp_path / "a-file"),
             "FILE/report": str(tmp_path / "a-file" / "report")}
    code, out, err = run(*[paths.get(a, a) for a in argv])
    assert code == 2 and message in err and out == ""
    assert not (tmp_path / "o").exists()


def test_a_report_that_cannot_be_written_exits_4(job: Path, tmp_path: Path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "profiler-reports").write_text("in the way")
    code, out, err = run("evaluate", str(job), "--out", str(tmp_path / "o"))
    assert code == 4 and out == ""
    assert "the rules were evaluated but the report could not be written to" in err and "Traceback" not in err


def test_a_health_rule_on_the_command_line():
    from cdk_sagemaker_debugger.cli import UsageError, parse_rule_option

    config = parse_rule_option("TrainingHang:minutes=2.5")
    assert (config.rule_to_invoke, config.parameters["minutes"], config.parameters["pause_factor"]) == (
        "TrainingHang", 2.5, 2)
    with pytest.raises(UsageError, match="minutes"):
        parse_rule_option("TrainingHang:minutes=-1")
