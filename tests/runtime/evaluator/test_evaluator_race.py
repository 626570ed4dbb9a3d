"""A job's final evaluation is never lost: a scheduled run and the job-end run race in two real processes (the real
handler, each in its own interpreter, against one moto server), in every ordering below."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import boto3
import pytest
from evaluator_jobs import report, small_spec
from test_evaluator_lambda import BUCKET, JOB, REGION, STATE_KEY, describe

from cdk_sagemaker_debugger.runtime.evaluator.reading import evaluate_store
from cdk_sagemaker_debugger.runtime.evaluator.storage import LocalStore
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import constant, write_job

WORKER = Path(__file__).with_name("race_worker.py")
ENDED = datetime(2025, 11, 29, 7, 20, tzinfo=timezone.utc)
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    port = _free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    moto.start()
    yield f"http://127.0.0.1:{port}"
    moto.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def job_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, list[tuple[str, str]]]:
    """A 9-minute job's minute files (no end marker: containers write none), its one-shot window count and verdicts."""
    root = write_job(tmp_path_factory.mktemp("race") / "po", small_spec(minutes=9, gpu_util=constant(40.0)))
    for marker in root.rglob("*.ts"):
        marker.unlink()
    one_shot = evaluate_store(LocalStore(root), [report()], read_workers=1)
    [result] = one_shot.results(final=True)
    return root, one_shot.windows_evaluated, [(sub.name, sub.verdict) for sub in result.rules]


@pytest.fixture
def s3(server: str, job_files: tuple[Path, int]) -> Any:
    client = boto3.client("s3", region_name=REGION, endpoint_url=server)
    try:
        client.create_bucket(Bucket=BUCKET)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for item in page.get("Contents", []):
            client.delete_object(Bucket=BUCKET, Key=item["Key"])
    root = job_files[0]
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        client.put_object(Bucket=BUCKET, Key=f"profiler/{JOB}/profiler-output/{path.relative_to(root).as_posix()}",
                          Body=path.read_bytes())
    return client


def _describe_json(status: str) -> dict[str, Any]:
    response = describe(status, end=ENDED if status != "InProgress" else None)
    return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in response.items()}


def start(server: str, tmp: Path, name: str, event: str, **gates: Any) -> subprocess.Popen[str]:
    config = {"endpoint": server, "region": REGION, "state_key": STATE_KEY, "event": event,
              "describe": _describe_json("InProgress" if event == "schedule" else "Completed"), **gates}
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(config))
    env = {**os.environ, **CREDENTIALS, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, str(WORKER), str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def finish(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    give_up = time.monotonic() + 120
    while not path.exists():
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < give_up, f"{path.name} never appeared"
        time.sleep(0.05)


def assert_final_and_complete(s3: Any, one_shot: tuple[Path, int, list[tuple[str, str]]]) -> None:
    """The committed state and the reports are those of evaluating the whole job in one process."""
    windows, verdicts = one_shot[1], one_shot[2]
    state = json.loads(gzip.decompress(s3.get_object(Bucket=BUCKET, Key=STATE_KEY)["Body"].read()))
    assert state["final"] is True
    assert state["evaluator"]["next_window"] == windows  # every window of the job, not one short
    assert state["published"] == {"ProfilerReport": "IssuesFound"} and state["outbox"] == []
    summary = json.loads(s3.get_object(Bucket=BUCKET, Key=f"output/{JOB}/rule-output/ProfilerReport/evaluator-output/"
                                       "evaluation-summary.json")["Body"].read())
    assert summary["Diagnostics"]["windows"] == windows
    assert [(v["Rule"], v["Verdict"]) for v in summary["rules"][0]["Verdicts"]] == verdicts
    assert summary["rules"][0]["RuleEvaluationStatus"] == "IssuesFound"
    lease = json.loads(s3.get_object(Bucket=BUCKET, Key=STATE_KEY + ".lease")["Body"].read())
    assert lease["expires"] == 0  # handed back, not left to expire


def test_the_scheduled_run_first_then_the_job_end_run(server, s3, job_files, tmp_path):
    scheduled = finish(start(server, tmp_path, "scheduled", "schedule"))
    assert scheduled["jobs"][0]["result"] == "in progress"
    ended = finish(start(server, tmp_path, "end", "end"))
    assert ended["jobs"][0]["result"] == "final"
    assert_final_and_complete(s3, job_files)


def test_the_job_end_run_first_then_the_scheduled_run(server, s3, job_files, tmp_path):
    assert finish(start(server, tmp_path, "end", "end"))["jobs"][0]["result"] == "final"
    assert finish(start(server, tmp_path, "scheduled", "schedule"))["jobs"][0]["result"] == "already final"
    assert_final_and_complete(s3, job_files)


def test_the_job_end_run_waits_for_a_scheduled_run_that_holds_the_lease(server, s3, job_files, tmp_path):
    """The case that lost final evaluations: a scheduled run is in flight when the job ends."""
    loaded, go = tmp_path / "loaded", tmp_path / "go"
    scheduled = start(server, tmp_path, "scheduled", "schedule", signal_loaded=str(loaded), wait_before_save=str(go))
    wait_for(loaded, scheduled)
    ended = start(server, tmp_path, "end", "end")
    time.sleep(2)  # the job-end run is now waiting for the lease (if it is slower to start, the order is the same)
    assert ended.poll() is None
    go.touch()
    assert finish(scheduled)["jobs"][0]["result"] == "in progress"
    assert finish(ended)["jobs"][0]["result"] == "final"
    assert_final_and_complete(s3, job_files)


@pytest.mark.parametrize("first", ["scheduled", "end"])
def test_both_runs_read_the_same_state_when_the_lease_has_expired(server, s3, job_files, tmp_path, first):
    """A scheduled run outlives its lease (it stopped answering): both runs read the same state. Whichever commits
    first, the job ends final and complete: the job-end run that loses starts again from the winner's state."""
    s_loaded, s_go, e_loaded, e_go = (tmp_path / n for n in ("s_loaded", "s_go", "e_loaded", "e_go"))
    scheduled = start(server, tmp_path, "scheduled", "schedule", signal_loaded=str(s_loaded),
                      wait_before_save=str(s_go), remaining_ms=3000, safety_margin_s=1.0)
    wait_for(s_loaded, scheduled)
    ended = start(server, tmp_path, "end", "end", signal_loaded=str(e_loaded), wait_before_save=str(e_go))
    wait_for(e_loaded, ended)  # it took the expired lease and read the same state as the scheduled run
    if first == "scheduled":
        s_go.touch()
        assert finish(scheduled)["jobs"][0]["result"] == "in progress"
        e_go.touch()
        assert finish(ended)["jobs"][0]["result"] == "final"  # after a conflict, from the scheduled run's state
    else:
        e_go.touch()
        assert finish(ended)["jobs"][0]["result"] == "final"
        s_go.touch()
        assert finish(scheduled)["jobs"][0]["result"] == "conflict"
    assert_final_and_complete(s3, job_files)
