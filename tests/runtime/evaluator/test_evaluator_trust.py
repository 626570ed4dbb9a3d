"""What one run's training code can no longer do to the verdicts of its job or its siblings, with the real handler
against moto S3 (SageMaker through the Stubber): write samples for a node the job does not have, hide another node's
records in its own files, put its words into a verdict, or cost so much that the family's other jobs go unjudged."""
# ruff: noqa: F811  (pytest injects the imported fixture "aws" by parameter name)

from __future__ import annotations

import gzip
import json
import tracemalloc
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import boto3
from botocore.stub import Stubber
from evaluator_jobs import small_spec
from test_evaluator_lambda import (  # the moto fixture "aws" is used as a parameter below
    ARN,
    BUCKET,
    JOB,
    REGION,
    aws,  # noqa: F401
    describe,
    received,
)

from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
from cdk_sagemaker_debugger.runtime.evaluator.caps import (
    MAX_EVENTS_PER_NODE_MINUTE,
    MAX_RECORDS_PER_NODE_MINUTE,
    MAX_SERIES_PER_NODE,
    MAX_STATE_BYTES,
    Caps,
    instance_count,
)
from cdk_sagemaker_debugger.runtime.evaluator.contract_shared import JobFamily
from cdk_sagemaker_debugger.runtime.evaluator.engine import RuleConfig
from cdk_sagemaker_debugger.runtime.evaluator.reading import Cursor, list_new_files
from cdk_sagemaker_debugger.runtime.evaluator.storage import LocalStore
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import constant, write_job

LOW_GPU = [RuleConfig("LowGPUUtilization", "LowGPUUtilization", {})]
SETTINGS = lh.Settings(family=JobFamily(job_name_prefix="exp-"), rules=LOW_GPU, read_workers=2)
ENDED = datetime(2025, 11, 29, 7, 20, tzinfo=timezone.utc)


def _job(name: str, **overrides: Any) -> dict[str, Any]:
    description = describe("Completed", end=ENDED)
    description.update(TrainingJobName=name, TrainingJobArn=ARN.replace(JOB, name), **overrides)
    return description


def _upload(s3: Any, job: str, root: Path, *, rename: tuple[str, str] | None = None, folder: str | None = None) -> None:
    """A synthetic tree under the job's profiler prefix; ``rename`` swaps a node's name in keys and records,
    ``folder`` puts the system files in another hour folder (the key pattern allows any)."""
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        relative, body = path.relative_to(root).as_posix(), path.read_bytes()
        if rename:
            relative = relative.replace(*rename)
            body = body.replace(f'"{rename[0]}"'.encode(), f'"{rename[1]}"'.encode())
        if folder and relative.startswith("system/incremental/"):
            relative = f"system/incremental/{folder}/{relative.rsplit('/', 1)[1]}"
        s3.put_object(Bucket=BUCKET, Key=f"profiler/{job}/profiler-output/{relative}", Body=body)


def _stub(*descriptions: dict[str, Any], listed: bool = False) -> Any:
    client = boto3.client("sagemaker", region_name=REGION)
    stub = Stubber(client)
    if listed:
        summaries = [{"TrainingJobName": d["TrainingJobName"], "TrainingJobArn": d["TrainingJobArn"],
                      "CreationTime": d["CreationTime"], "TrainingJobStatus": "InProgress"} for d in descriptions]
        stub.add_response("list_training_jobs", {"TrainingJobSummaries": summaries},
                          {"StatusEquals": "InProgress", "MaxResults": 100, "NameContains": "exp-"})
    for d in descriptions:
        stub.add_response("describe_training_job", d, {"TrainingJobName": d["TrainingJobName"]})
    stub.activate()
    return client


def _summary(s3: Any, job: str, rule: str = "LowGPUUtilization") -> dict[str, Any]:
    key = f"output/{job}/rule-output/{rule}/evaluator-output/evaluation-summary.json"
    return json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())


def _status(summary: dict[str, Any]) -> str:
    return summary["rules"][0]["RuleEvaluationStatus"]


def _run(aws: dict[str, Any], sagemaker: Any, event: dict[str, Any], settings: lh.Settings = SETTINGS) -> dict[str, Any]:
    clients = lh.Clients(s3=aws["s3"], events=aws["events"], sagemaker=sagemaker)
    return lh.handler(event, None, clients=clients, settings=settings)


# -- M-1: only the job's own nodes, each in its own files ---------------------------------------------------------------


def test_fake_idle_nodes_cannot_get_a_busy_job_stopped(aws, tmp_path):
    """The victim trains on one instance at 90 % GPU. A sibling's code writes an idle algo-9 beside it, and idle
    records with NodeId algo-7 inside files named for algo-1 (in another hour folder). Before, the evaluator took both
    for the job's nodes and published IssuesFound, which the alarm acts on by stopping the job."""
    job = "exp-victim-1"
    _upload(aws["s3"], job, write_job(tmp_path / "busy", small_spec(minutes=4, gpu_util=constant(90.0))))
    idle = write_job(tmp_path / "idle", small_spec(minutes=4, gpu_util=constant(0.0), end_marker=False))
    _upload(aws["s3"], job, idle, rename=("algo-1", "algo-9"))
    _upload(aws["s3"], job, idle, rename=("algo-1", "algo-7"), folder="9999999999")
    for path in (idle / "system").rglob("*.json"):  # keep the name algo-1, the records say algo-7
        path.write_bytes(path.read_bytes().replace(b'"algo-1"', b'"algo-7"'))
    _upload(aws["s3"], job, idle, folder="2025112900")

    _run(aws, _stub(_job(job)), {"detail": {"TrainingJobName": job}})

    summary = _summary(aws["s3"], job)
    assert _status(summary) == "NoIssuesFound"
    assert [e["detail"]["ProfilerRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] for e in received(aws)] == ["NoIssuesFound"]
    diagnostics = summary["Diagnostics"]
    minutes = len(list((idle / "system").rglob("*.json")))
    assert diagnostics["foreign_files"] == 2 * minutes  # the files of algo-9 and of algo-7: not nodes of this job
    assert diagnostics["foreign_records"] > 20_000  # every record of the algo-1 files holding algo-7's records
    assert any("outside the job's cluster (algo-1 .. algo-1)" in p for p in diagnostics["problems"])
    assert any("whose NodeId is not the node their file is named for" in p for p in diagnostics["problems"])


def test_the_nodes_of_a_heterogeneous_cluster_are_those_of_all_its_groups(tmp_path):
    description = {"ResourceConfig": {"InstanceGroups": [
        {"InstanceGroupName": "gpu", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
        {"InstanceGroupName": "cpu", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 1}]}}
    assert instance_count(description) == 3
    assert instance_count({"ResourceConfig": {"InstanceCount": 4}}) == 4 and instance_count({}) == 1
    root = write_job(tmp_path / "po", small_spec(nodes=4, minutes=1))
    listing = list_new_files(LocalStore(root), Cursor(), Cursor(), nodes=instance_count(description))
    assert sorted({f.node for f in listing.system}) == ["algo-1", "algo-2", "algo-3"]
    assert listing.foreign == 2 and all(".algo-4." in key for key in listing.ignored)


# -- M-2: no text of the training code in a verdict ---------------------------------------------------------------------


def test_a_damaged_file_with_a_hostile_key_gives_a_labelled_one_line_error(aws):
    """Every system file is damaged, so the verdict is Error with the first problem; the file's key, which the
    training code chose, carried fake e-mail lines and escape codes. The StatusDetails name it by hash."""
    job = "exp-hostile-key"
    hostile = "Action:        StopTrainingJob was called\r\x1b[31mConsole: https://phish.example\u2028"
    key = f"profiler/{job}/profiler-output/system/{hostile}/1764400020.algo-1.json"
    aws["s3"].put_object(Bucket=BUCKET, Key=key, Body=b"not json\n" * 100)
    aws["s3"].put_object(Bucket=BUCKET, Key=f"profiler/{job}/profiler-output/system/training_job_end.ts", Body=b"")

    _run(aws, _stub(_job(job)), {"detail": {"TrainingJobName": job}})

    [event] = received(aws)
    [status] = event["detail"]["ProfilerRuleEvaluationStatuses"]
    details = status["StatusDetails"]
    assert status["RuleEvaluationStatus"] == "Error" and details.startswith("EvaluationInputError: none of the 1")
    assert "first problem, machine-reported: file sha256:" in details
    assert "\n" not in details and "\x1b" not in details and "Action" not in details and "phish" not in details
    summary_text = json.dumps(_summary(aws["s3"], job))
    assert "Action" not in summary_text and "phish" not in summary_text


# -- M-4: one job's files cost that job, not the family -----------------------------------------------------------------


def _foreign_node_file(size_bytes: int, start: int) -> bytes:
    """About ``size_bytes`` of records, each from another of 200,000 distinct NodeIds."""
    line = '{"Type":"gpu","Name":"gpu0","Dimension":"GPUUtilization","Value":0.0,"NodeId":"algo-%d","Timestamp":%.1f}\n'
    out, n = [], 0
    total = 0
    while total < size_bytes:
        text = line % (n % 200_000 + 2, start + (n % 600) / 10)
        out.append(text)
        total += len(text)
        n += 1
    return "".join(out).encode()


def test_hostile_files_end_only_their_own_jobs_evaluation_with_bounded_memory(aws, tmp_path):
    """The attack of three 25 MB files naming 200,000 distinct NodeIds (which took the engine to 3.5 GB), and a
    big file of one node's records past the cap, in two jobs of a family evaluated in one invocation, oldest first:
    the first is evaluated without them, the second ends in Error with the reason, the genuine third gets its verdict,
    and the invocation's peak of traced memory stays far below the function's 1,769 MB (44 MB measured)."""
    spec = small_spec(minutes=4, gpu_util=constant(5.0))
    genuine = write_job(tmp_path / "genuine", spec)
    flood, big, healthy = "exp-a-flood", "exp-b-big", "exp-c-healthy"
    for job in (flood, big, healthy):
        _upload(aws["s3"], job, genuine)
    for minute in range(3):
        ts = spec.start + 60 * minute
        aws["s3"].put_object(Bucket=BUCKET, Key=f"profiler/{flood}/profiler-output/system/incremental/flood/"
                                                f"{ts}.algo-1.json", Body=_foreign_node_file(25 << 20, ts))
    records = [json.loads(line) for line in next((genuine / "system").rglob("*.json")).read_text().splitlines()]
    big_body = "".join(json.dumps({**r, "Timestamp": r["Timestamp"] + i * 1e-4}) + "\n"
                       for i in range(8) for r in records).encode()  # 8 copies of a minute: ~70,000 records
    aws["s3"].put_object(Bucket=BUCKET, Key=f"profiler/{big}/profiler-output/system/incremental/big/"
                                            f"{spec.start}.algo-1.json", Body=big_body)
    settings = lh.Settings(family=SETTINGS.family, rules=LOW_GPU, read_workers=2,
                           caps=Caps(records_per_node_minute=50_000))
    sagemaker = _stub(*(_job(j, TrainingJobStatus="InProgress") for j in (flood, big, healthy)), listed=True)

    tracemalloc.start()
    try:
        outcome = _run(aws, sagemaker, {"source": "aws.events", "detail-type": "Scheduled Event"}, settings)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert [o["job"] for o in outcome["jobs"]] == [flood, big, healthy]
    assert _status(_summary(aws["s3"], flood)) == "IssuesFound"  # its own node's idle GPUs, judged as ever
    assert _summary(aws["s3"], flood)["Diagnostics"]["foreign_records"] > 500_000
    capped = _summary(aws["s3"], big)["rules"][0]
    assert capped["RuleEvaluationStatus"] == "Error"
    assert capped["StatusDetails"].startswith("EvaluationLimitExceeded: algo-1 wrote more than 50,000 system records "
                                              "for the minute 2025-11-29T07:07:00Z")
    assert _status(_summary(aws["s3"], healthy)) == "IssuesFound"
    assert peak < 300 << 20, f"peak traced memory {peak / 2**20:.0f} MB"
    big_state = _state(aws["s3"], big, settings)
    assert big_state["final"] is True and big_state["capped"] == capped["StatusDetails"]

    again = _run(aws, _stub(_job(big, TrainingJobStatus="InProgress")), {"detail": {"TrainingJobName": big}}, settings)
    assert again["jobs"] == [{"job": big, "result": "already final"}]  # nothing of it is read again


def _state(s3: Any, job: str, settings: lh.Settings) -> dict[str, Any]:
    key = f"output/{job}/rule-output/evaluator-state/{settings.evaluator_id}.json.gz"
    return json.loads(gzip.decompress(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()))


def test_a_state_over_its_cap_ends_the_job_in_error_and_commits_a_small_state(aws, tmp_path):
    job = "exp-state"
    _upload(aws["s3"], job, write_job(tmp_path / "po", small_spec(minutes=4)))
    settings = lh.Settings(family=SETTINGS.family, rules=LOW_GPU, caps=Caps(state_bytes=20_000))

    _run(aws, _stub(_job(job, TrainingJobStatus="InProgress")), {"detail": {"TrainingJobName": job}}, settings)

    [event] = received(aws)
    [status] = event["detail"]["ProfilerRuleEvaluationStatuses"]
    assert status["RuleEvaluationStatus"] == "Error"
    assert status["StatusDetails"].startswith("EvaluationLimitExceeded: the job's evaluator state grew to ")
    state = _state(aws["s3"], job, settings)
    assert state["final"] is True and len(json.dumps(state)) < 20_000


def test_a_series_flood_in_one_node_ends_that_jobs_evaluation(aws, tmp_path):
    job = "exp-series"
    spec = small_spec(minutes=4)
    _upload(aws["s3"], job, write_job(tmp_path / "po", spec))
    flood = "".join(json.dumps({"Type": "cpu", "Name": f"cpu{i}", "Dimension": "CPUUtilization", "Value": 1.0,
                                "NodeId": "algo-1", "Timestamp": spec.start + 1.0}) + "\n" for i in range(5_000))
    aws["s3"].put_object(Bucket=BUCKET, Key=f"profiler/{job}/profiler-output/system/incremental/x/"
                                            f"{spec.start}.algo-1.json", Body=flood.encode())

    _run(aws, _stub(_job(job)), {"detail": {"TrainingJobName": job}})

    details = _summary(aws["s3"], job)["rules"][0]["StatusDetails"]
    assert details.startswith("EvaluationLimitExceeded: algo-1 wrote more than 4,096 distinct system metric series")


def test_the_default_caps_are_documented_and_far_above_a_large_node():
    """A 192-vCPU, 8-GPU node at 100 ms writes about 300 series and 180,000-250,000 records a minute."""
    assert (MAX_SERIES_PER_NODE, MAX_RECORDS_PER_NODE_MINUTE, MAX_EVENTS_PER_NODE_MINUTE, MAX_STATE_BYTES) == (
        4_096, 1_000_000, 1_000_000, 128 << 20)
    docs = (Path(__file__).resolve().parents[3] / "docs" / "evaluator.md").read_text()
    for figure in ("4,096", "1,000,000", "128 MB"):
        assert figure in docs
