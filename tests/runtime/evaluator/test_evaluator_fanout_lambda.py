"""Node fan-out through the real Lambda handler (moto S3 and SQS): one job evaluated minute by minute, its nodes read by
shard invocations from the job queue, gives the statuses, state outcome and report objects of the same job evaluated
without fan-out (the expected side: ``fanout_bytes=0``, the single-process path)."""
# ruff: noqa: F811  (pytest injects the imported fixture "aws" by parameter name)

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from typing import Any

from evaluator_jobs import small_spec
from test_evaluator_lambda import BUCKET, JOB, REGION, aws, describe, upload_tree  # noqa: F401 (aws: fixture)

from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
from cdk_sagemaker_debugger.runtime.evaluator.contract_shared import JobFamily
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import StepSpec, write_job

NODES = 3


class HeldBeforeClaims:
    """The job's run's real S3 client, held when it first looks at a shard claim until the test lets it go, so the
    shard invocations take their shards first (as they do when the queue starts them at once)."""

    def __init__(self, real: Any):
        self.real = real
        self.reached = threading.Event()
        self.go = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def get_object(self, **kwargs: Any) -> Any:
        if kwargs["Key"].endswith(".claim") and not self.go.is_set():
            self.reached.set()
            self.go.wait(60)
        return self.real.get_object(**kwargs)


def _description(status: str, output: str, end: Any = None) -> dict[str, Any]:
    response = describe(status, end=end)
    response["OutputDataConfig"] = {"S3OutputPath": f"s3://{BUCKET}/{output}"}
    response["ResourceConfig"]["InstanceCount"] = NODES
    return response


def _sagemaker(response: dict[str, Any]) -> Any:
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("sagemaker", region_name=REGION)
    stub = Stubber(client)
    stub.add_response("describe_training_job", response, {"TrainingJobName": JOB})
    stub.activate()
    return client


def _record(body: dict[str, Any], n: int) -> dict[str, Any]:
    return {"eventSource": "aws:sqs", "messageId": f"m-{n}", "body": json.dumps(body)}


def _single_run(aws: dict[str, Any], settings: lh.Settings, response: dict[str, Any]) -> dict[str, Any]:
    clients = lh.Clients(s3=aws["s3"], sqs=aws["sqs"], events=aws["events"], sagemaker=_sagemaker(response))
    return lh.handler({"Records": [_record({"TrainingJobName": JOB}, 0)]}, None, clients=clients, settings=settings)


def _sharded_run(aws: dict[str, Any], settings: lh.Settings, response: dict[str, Any], queue: str
                 ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The job's run in a thread, held before its first claim; meanwhile one handler invocation per shard message."""
    held = HeldBeforeClaims(aws["s3"])
    clients = lh.Clients(s3=held, sqs=aws["sqs"], events=aws["events"], sagemaker=_sagemaker(response))
    outcome: dict[str, Any] = {}

    def job_run() -> None:
        outcome.update(lh.handler({"Records": [_record({"TrainingJobName": JOB}, 0)]}, None, clients=clients,
                                  settings=settings))

    thread = threading.Thread(target=job_run)
    thread.start()
    shard_outcomes = []
    try:
        while not held.reached.wait(0.05) and thread.is_alive():
            pass
        if not held.reached.is_set():  # no new system files this minute: nothing to fan out
            return outcome, shard_outcomes
        messages: list[dict[str, Any]] = []
        give_up = time.monotonic() + 30
        while len(messages) < NODES - 1 and time.monotonic() < give_up:
            messages += aws["sqs"].receive_message(QueueUrl=queue, MaxNumberOfMessages=10,
                                                   AttributeNames=["All"]).get("Messages", [])
        assert len({m["Attributes"]["MessageGroupId"] for m in messages}) == NODES - 1  # a group per shard
        for message in messages:
            aws["sqs"].delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
            shard_clients = lh.Clients(s3=aws["s3"], sqs=aws["sqs"], events=aws["events"])
            record = {"eventSource": "aws:sqs", "messageId": message["MessageId"], "body": message["Body"]}
            shard_outcomes.append(lh.handler({"Records": [record]}, None, clients=shard_clients,
                                             settings=settings)["jobs"][0])
    finally:
        held.go.set()
        thread.join(120)
    return outcome, shard_outcomes


def _reports(s3: Any, output: str) -> dict[str, bytes]:
    prefix = f"{output}/{JOB}/rule-output/"
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
            for o in page.get("Contents", []) if "/evaluator-state/" not in o["Key"]]
    return {k[len(prefix):]: s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in keys}


def test_a_job_read_in_node_shards_by_several_invocations_gets_the_single_process_verdicts_and_reports(aws, tmp_path):
    queue = aws["sqs"].create_queue(QueueName="jobs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    family = JobFamily(job_name_prefix="exp-")
    single = lh.Settings(family=family, read_workers=2, queue_url=queue, fanout_bytes=0)
    sharded = lh.Settings(family=family, read_workers=2, queue_url=queue, fanout_bytes=1, shard_bytes=1)
    assert single.evaluator_id == sharded.evaluator_id  # fan-out is how the job is read, not what is evaluated
    spec = small_spec(nodes=NODES, minutes=5, gpu_util=lambda n, d, s, t: 4.0 if s % 4 else 50.0,
                      cpu_util=lambda n, c, s, t: (95.0, 90.0, 12.0)[(s + c + n) % 3],
                      steps=StepSpec(count=200, duration_s=0.5, slow_steps={120: 4.0}))
    root = write_job(tmp_path / "po", spec)
    start = describe()["TrainingStartTime"]
    outcomes: dict[str, list[Any]] = {"single": [], "sharded": []}
    shard_work = []
    for minute in range(2, 8):
        upload_tree(aws["s3"], root, only_before=spec.start + 60 * minute + 1)
        ended = minute == 7
        if ended:
            upload_tree(aws["s3"], root)
        status, end = ("Completed", start + timedelta(minutes=6)) if ended else ("InProgress", None)
        outcomes["single"].append(_single_run(aws, single, _description(status, "out-single", end))["jobs"][0])
        outcome, shard_outcomes = _sharded_run(aws, sharded, _description(status, "out-sharded", end), queue)
        outcomes["sharded"].append(outcome["jobs"][0])
        shard_work.append(shard_outcomes)
    assert [o["result"] for o in outcomes["single"]][-1] == "final"
    assert outcomes["sharded"] == outcomes["single"]  # results, windows, statuses, events published, every run
    # every shard but the job run's own was read by a shard invocation of its own
    fanned_out = [work for work in shard_work if work]
    assert len(fanned_out) >= 4  # the minutes with new files
    assert all(sorted(o["shard"] for o in work if o["result"] == "read") == list(range(1, NODES)) for work in fanned_out)
    single_reports, sharded_reports = _reports(aws["s3"], "out-single"), _reports(aws["s3"], "out-sharded")
    assert any(k.endswith("profiler-report.json") or k.endswith(".json") for k in single_reports)
    assert sharded_reports == single_reports
    assert json.loads(single_reports["ProfilerReport/evaluator-output/evaluation-summary.json"])["rules"][0][
        "RuleEvaluationStatus"] == "IssuesFound"
