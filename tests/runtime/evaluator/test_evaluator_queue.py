"""One job, one unit of work: the schedule's invocation queues one FIFO message per job, and each message is evaluated
in an invocation of its own (each a real process here, as Lambda runs them), so a job whose evaluation raises, hangs
past its timeout or hits the memory cap never costs the other jobs of the family their verdicts."""
# ruff: noqa: F811  (pytest injects the imported fixture "server" by parameter name)

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import boto3
from botocore.stub import Stubber
from evaluator_jobs import small_spec
from test_evaluator_lambda import BUCKET, REGION, SETTINGS, describe
from test_evaluator_race import finish, server, start  # noqa: F401 (server: the moto server fixture)

from cdk_sagemaker_debugger.runtime.evaluator import dispatch
from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
from cdk_sagemaker_debugger.runtime.evaluator.contract_shared import JobFamily
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import constant, write_job

HEALTHY = ["exp-good-0001", "exp-good-0002"]
BROKEN, SLOW, HUGE = "exp-broken-0001", "exp-slow-0001", "exp-huge-0001"


def _describe(job: str) -> dict[str, Any]:
    response = describe("InProgress")
    response.update(TrainingJobName=job, TrainingJobArn=response["TrainingJobArn"].rsplit("/", 1)[0] + "/" + job)
    if job == BROKEN:  # a description the evaluation cannot use: it raises
        response["OutputDataConfig"] = {"S3OutputPath": "https://not-s3.example.com/output"}
    return response


def _state_key(job: str) -> str:
    return f"output/{job}/rule-output/evaluator-state/{SETTINGS.evaluator_id}.json.gz"


def _upload(s3: Any, root: Path, job: str) -> None:
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".ts"):
        s3.put_object(Bucket=BUCKET, Key=f"profiler/{job}/profiler-output/{path.relative_to(root).as_posix()}",
                      Body=path.read_bytes())


def _dispatch(s3: Any, sqs: Any, queue: str, jobs: list[str]) -> dict[str, Any]:
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    stub = Stubber(sagemaker)
    stub.add_response("list_training_jobs", {"TrainingJobSummaries": [
        {"TrainingJobName": j, "TrainingJobArn": _describe(j)["TrainingJobArn"], "CreationTime": describe()["CreationTime"],
         "TrainingJobStatus": "InProgress"} for j in jobs]})
    stub.activate()
    settings = lh.Settings(family=JobFamily(job_name_prefix="exp-"), queue_url=queue)
    clients = lh.Clients(s3=s3, sqs=sqs, sagemaker=sagemaker)
    return lh.handler({"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}, None, clients=clients,
                      settings=settings)


def _messages(sqs: Any, queue: str, count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    give_up = time.monotonic() + 30
    while len(messages) < count and time.monotonic() < give_up:
        messages += sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, AttributeNames=["All"],
                                        VisibilityTimeout=300).get("Messages", [])
    return messages


def _worker_describe(job: str) -> dict[str, Any]:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in _describe(job).items()}


def test_a_family_where_one_job_fails_still_gets_the_other_jobs_verdicts_in_the_same_minute(server, tmp_path):
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=server)
    try:
        s3.create_bucket(Bucket=BUCKET)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=server)
    queue = sqs.create_queue(QueueName="jobs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    small = write_job(tmp_path / "small", small_spec(minutes=6, gpu_util=constant(40.0)))
    for job in [*HEALTHY, BROKEN, SLOW]:
        _upload(s3, small, job)
    _upload(s3, write_job(tmp_path / "huge", small_spec(minutes=2, cores=192, gpus=8)), HUGE)
    jobs = [BROKEN, HUGE, SLOW, *HEALTHY]  # the failing jobs first: they used to hold up the ones after them

    assert _dispatch(s3, sqs, queue, jobs) == {"jobs": [{"job": j, "result": "queued"} for j in jobs]}
    messages = _messages(sqs, queue, len(jobs))
    by_job = {json.loads(m["Body"])["TrainingJobName"]: m for m in messages}
    assert sorted(by_job) == sorted(jobs)
    assert all(m["Attributes"]["MessageGroupId"] == job for job, m in by_job.items())  # one group per job

    def invoke(job: str, **options: Any) -> Any:
        message = {"messageId": by_job[job]["MessageId"], "body": by_job[job]["Body"]}
        return start(server, tmp_path, job, "sqs", message=message, state_key=_state_key(job),
                     describe=_worker_describe(job), **options)

    runs = {job: invoke(job) for job in (BROKEN, *HEALTHY)}
    runs[SLOW] = invoke(SLOW, wait_before_save=str(tmp_path / "never"))  # hangs until its timeout kills it
    runs[HUGE] = invoke(HUGE, memory_cap_mb=16)  # the memory cap: less than one of its 30 MB minute files
    outcomes = {job: finish(runs[job]) for job in (*HEALTHY, BROKEN)}
    for job in HEALTHY:
        assert outcomes[job]["batchItemFailures"] == [] and outcomes[job]["jobs"][0]["result"] == "in progress"
        state = json.loads(gzip.decompress(s3.get_object(Bucket=BUCKET, Key=_state_key(job))["Body"].read()))
        assert state["evaluator"]["next_window"] >= 2 and state["published"] == {"ProfilerReport": "IssuesFound"}
    assert outcomes[BROKEN]["batchItemFailures"] == [{"itemIdentifier": by_job[BROKEN]["MessageId"]}]
    assert "not an S3 URI" in outcomes[BROKEN]["jobs"][0]["reason"]
    huge_out, huge_err = runs[HUGE].communicate(timeout=180)
    huge = json.loads(huge_out.strip().splitlines()[-1]) if runs[HUGE].returncode == 0 else None
    assert runs[HUGE].returncode != 0 or huge["batchItemFailures"], huge_err[-2000:]  # killed, or its message back
    assert "MemoryError" in huge_err or (huge and "MemoryError" in huge["jobs"][0]["reason"])
    assert runs[SLOW].poll() is None  # still running when the others have their verdicts: the timeout ends it
    runs[SLOW].kill()
    runs[SLOW].communicate()


def test_the_schedule_queues_each_minute_once_and_the_job_end_once():
    minute = {"source": "aws.events", "detail-type": "Scheduled Event"}
    end = {"source": "aws.sagemaker", "detail": {"TrainingJobName": "exp-1"}}
    assert dispatch.deduplication_id("exp-1", minute, 120.5) == dispatch.deduplication_id("exp-1", minute, 179.9)
    assert dispatch.deduplication_id("exp-1", minute, 120.5) != dispatch.deduplication_id("exp-1", minute, 180.0)
    assert dispatch.deduplication_id("exp-1", end, 1.0) == dispatch.deduplication_id("exp-1", end, 9999.0)
    assert dispatch.deduplication_id("exp-1", minute, 1.0) != dispatch.deduplication_id("exp-2", minute, 1.0)


def test_a_message_without_a_job_name_is_dropped_not_retried_forever():
    records = [{"eventSource": "aws:sqs", "messageId": "m1", "body": "not json"},
               {"eventSource": "aws:sqs", "messageId": "m2", "body": json.dumps({"TrainingJobName": "exp-1"})}]
    done = dispatch.evaluate_records(records, lambda job: {"job": job, "result": "final"})
    assert done == {"jobs": [{"job": "exp-1", "result": "final"}], "batchItemFailures": []}
