"""The verdicts land in a real MLflow run: a tracking server (``mlflow server``, SQLite store, local artifacts) started
on 127.0.0.1 by this module, written by the CLI's --mlflow-run and by the evaluator's export, read back with the client."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

mlflow = pytest.importorskip("mlflow")

from evaluator_jobs import evaluate, report, small_spec  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from cdk_sagemaker_debugger.cli import main  # noqa: E402
from cdk_sagemaker_debugger.runtime.evaluator.mlflow_export import (  # noqa: E402
    MlflowExportError,
    MlflowTarget,
    export,
    run_contents,
)
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import JobSpec, StepSpec, write_job  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    log = (root / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}", "--default-artifact-root", str(root / "artifacts")],
        stdout=log, stderr=subprocess.STDOUT, cwd=root,
        # Tracking only: no job runner (its worker processes are for GenAI jobs, which no test here starts).
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        start_new_session=True)  # its own process group: `mlflow server` runs uvicorn as a child of its own
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("mlflow server did not start:\n" + (root / "server.log").read_text()[-3000:])
            time.sleep(0.5)
        yield uri
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server and its uvicorn child (terminate() alone leaves uvicorn)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        try:
            os.killpg(server.pid, signal.SIGKILL)  # whatever of the group is still there
        except ProcessLookupError:
            pass
        log.close()


def _new_run(uri: str, name: str) -> str:
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(name) or client.get_experiment(client.create_experiment(name))
    return client.create_run(experiment.experiment_id).info.run_id


def _artifacts(client: MlflowClient, run_id: str, path: str) -> set[str]:
    return {a.path for a in client.list_artifacts(run_id, path)}


def test_the_cli_writes_tags_metrics_and_the_report_into_the_run(tracking_uri: str, tmp_path: Path):
    job = write_job(tmp_path / "job" / "profiler-output",
                    JobSpec(minutes=3, gpus=2, cores=4, gpu_util=lambda *a: 20.0, steps=StepSpec(count=200)))
    run_id = _new_run(tracking_uri, "cli")
    out, err = io.StringIO(), io.StringIO()
    code = main(["evaluate", str(job), "--out", str(tmp_path / "out"), "--mlflow-run", run_id,
                 "--mlflow-tracking-uri", tracking_uri], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    assert f"wrote the verdicts, metrics and report to MLflow run {run_id}" in err.getvalue()

    client = MlflowClient(tracking_uri=tracking_uri)
    run = client.get_run(run_id)
    assert run.data.tags["debugger/ProfilerReport/outcome"] == "IssuesFound"
    assert run.data.tags["debugger/ProfilerReport/LowGPUUtilization"] == "IssuesFound"
    assert run.data.tags["debugger/ProfilerReport/LowGPUUtilization/why"].startswith("GPU utilisation low")
    assert run.data.tags["debugger/ProfilerReport/OverallSystemUsage"] == "NoIssuesFound"
    written = json.loads((tmp_path / "out" / "profiler-reports" / "LowGPUUtilization.json").read_text())
    assert written["Datapoints"] > 0 and written["Violations"] > 0
    assert run.data.metrics["debugger/LowGPUUtilization/datapoints"] == written["Datapoints"]
    assert run.data.metrics["debugger/LowGPUUtilization/violations"] == written["Violations"]
    history = client.get_metric_history(run_id, "debugger/LowGPUUtilization/windows_met")
    assert [m.step for m in history] == [3]  # the step is the number of analysis windows read
    assert _artifacts(client, run_id, "debugger") == {"debugger/profiler-report.html",
                                                      "debugger/evaluation-summary.json"}
    html = Path(client.download_artifacts(run_id, "debugger/profiler-report.html", str(tmp_path / "dl"))).read_text()
    assert html.startswith("<!DOCTYPE html>") and 'data-todo="LowGPUUtilization"' in html
    summary = json.loads(Path(client.download_artifacts(run_id, "debugger/evaluation-summary.json",
                                                        str(tmp_path / "dl2"))).read_text())
    assert summary["rules"][0]["Outcome"] == "IssuesFound"


def test_the_evaluator_export_writes_one_folder_per_configured_rule(tracking_uri: str):
    ev = evaluate(small_spec(gpus=0), report())
    results = ev.results(final=True)
    run_id = _new_run(tracking_uri, "evaluator")
    files = {"ProfilerReport": {"profiler-report.html": b"<!DOCTYPE html>", "evaluation-summary.json": b"{}"}}
    export(MlflowTarget(run_id, tracking_uri), results, 3, files)
    client = MlflowClient(tracking_uri=tracking_uri)
    assert client.get_run(run_id).data.tags["debugger/ProfilerReport/outcome"] == "NotApplicable"
    assert _artifacts(client, run_id, "debugger/ProfilerReport") == {
        "debugger/ProfilerReport/profiler-report.html", "debugger/ProfilerReport/evaluation-summary.json"}


def test_an_unknown_run_is_a_clear_error_and_exit_4(tracking_uri: str, tmp_path: Path):
    job = write_job(tmp_path / "job" / "profiler-output", JobSpec(minutes=2, gpus=1, cores=2))
    out, err = io.StringIO(), io.StringIO()
    code = main(["evaluate", str(job), "--out", str(tmp_path / "out"), "--mlflow-run", "0" * 32,
                 "--mlflow-tracking-uri", tracking_uri], stdout=out, stderr=err)
    assert code == 4
    assert "the report written to" in err.getvalue() and f"MLflow run {'0' * 32}" in err.getvalue()
    assert (tmp_path / "out" / "profiler-report.html").exists()  # nothing is lost


def test_the_job_description_names_the_run_and_the_tracking_server():
    arn = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team"
    target = MlflowTarget.from_description({"MlflowConfig": {"MlflowResourceArn": arn},
                                            "MlflowDetails": {"MlflowRunId": "abc123"}})
    assert target == MlflowTarget("abc123", arn)
    assert MlflowTarget.from_description({"MlflowConfig": {"MlflowResourceArn": arn}}) is None


def test_a_tracking_server_arn_without_the_plugin_says_what_to_install(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "sagemaker_mlflow", None)  # as if it were not installed
    with pytest.raises(MlflowExportError, match="pip install sagemaker-mlflow"):
        export(MlflowTarget("r", "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/t"), [], 0, {})


def test_tags_and_metrics_follow_the_verdicts():
    ev = evaluate(small_spec(gpu_util=lambda *a: 20.0), report())
    tags, metrics = run_contents(ev.results(final=True), 3)
    assert tags["debugger/ProfilerReport/BatchSize"] in ("IssuesFound", "NoIssuesFound")
    assert set(metrics) >= {"debugger/LowGPUUtilization/violations", "debugger/StepOutlier/datapoints"}


def test_the_lambda_delivers_into_the_jobs_run_on_the_allowed_server_only(tracking_uri: str):
    from cdk_sagemaker_debugger.runtime.evaluator.lambda_handler import render_reports
    from cdk_sagemaker_debugger.runtime.evaluator.mlflow_export import deliver

    ev = evaluate(small_spec(gpu_util=lambda *a: 20.0), report())
    results = ev.results(final=True)
    reports = render_reports("out/job-1/rule-output", results, ev, "job-1", "test")
    run_id = _new_run(tracking_uri, "lambda")
    described = {"MlflowConfig": {"MlflowResourceArn": tracking_uri}, "MlflowDetails": {"MlflowRunId": run_id}}
    assert "not the one this evaluator may write" in deliver(described, results, 3, reports, "http://elsewhere")
    assert "has no MLflow run" in deliver({}, results, 3, reports, tracking_uri)
    assert deliver(described, results, 3, reports, tracking_uri) is None
    client = MlflowClient(tracking_uri=tracking_uri)
    assert client.get_run(run_id).data.tags["debugger/ProfilerReport/outcome"] == "IssuesFound"
    assert _artifacts(client, run_id, "debugger/ProfilerReport") == {
        "debugger/ProfilerReport/profiler-report.html", "debugger/ProfilerReport/evaluation-summary.json"}
    unknown = dict(described, MlflowDetails={"MlflowRunId": "f" * 32})
    assert f"MLflow run {'f' * 32}" in deliver(unknown, results, 3, reports, tracking_uri)  # reported, not raised
