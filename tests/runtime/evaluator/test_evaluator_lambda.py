"""The Lambda entry point against moto S3/EventBridge/SQS and botocore Stubbers for SageMaker and CloudWatch (the
Stubber checks every request against the real service model)."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from evaluator_jobs import small_spec
from moto import mock_aws

from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
from cdk_sagemaker_debugger.runtime.evaluator.contract_shared import JobFamily
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import constant, write_job

REGION = "us-east-1"
BUCKET = "ml-output-bucket"
JOB = "exp-llm-0001"
ARN = f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{JOB}"
STATE_KEY = f"output/{JOB}/rule-output/evaluator-state.json.gz"
REPORTS = f"output/{JOB}/rule-output/ProfilerReport/evaluator-output"


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION=REGION)
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        sqs = boto3.client("sqs", region_name=REGION)
        queue = sqs.create_queue(QueueName="evaluator-events")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events = boto3.client("events", region_name=REGION)
        events.put_rule(Name="all", EventPattern=json.dumps({"source": ["cdk-sagemaker-debugger"]}))
        events.put_targets(Rule="all", Targets=[{"Id": "q", "Arn": queue_arn}])
        yield {"s3": s3, "sqs": sqs, "queue": queue, "events": events}
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def received(aws: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    while True:
        msgs = aws["sqs"].receive_message(QueueUrl=aws["queue"], MaxNumberOfMessages=10).get("Messages", [])
        if not msgs:
            return out
        for m in msgs:
            out.append(json.loads(m["Body"]))
            aws["sqs"].delete_message(QueueUrl=aws["queue"], ReceiptHandle=m["ReceiptHandle"])


def describe(status: str = "InProgress", *, profiler: bool = True, start: datetime | None = None,
             end: datetime | None = None, transitions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    start = start or datetime(2025, 11, 29, 7, 7, tzinfo=timezone.utc)
    response: dict[str, Any] = {
        "TrainingJobName": JOB,
        "TrainingJobArn": ARN,
        "TrainingJobStatus": status,
        "SecondaryStatus": "Training" if status == "InProgress" else "Completed",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "123.dkr.ecr.us-east-1.amazonaws.com/t"},
        "ModelArtifacts": {"S3ModelArtifacts": f"s3://{BUCKET}/output/{JOB}/output/model.tar.gz"},
        "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "CreationTime": start - timedelta(minutes=3),
        "TrainingStartTime": start,
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/output"},
        "SecondaryStatusTransitions": transitions or [],
    }
    if end:
        response["TrainingEndTime"] = end
    if profiler:
        response["ProfilerConfig"] = {"S3OutputPath": f"s3://{BUCKET}/profiler", "ProfilingIntervalInMilliseconds": 100}
    else:
        response["ProfilerConfig"] = {"DisableProfiler": True}
    return response


def upload_tree(s3: Any, root: Path, *, only_before: float | None = None) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            stamp = path.name.split("_")[0].split(".")[0]
            if only_before is not None and stamp.isdigit():
                seconds = int(stamp) / (1e6 if len(stamp) > 10 else 1)
                if seconds >= only_before:
                    continue
            if only_before is not None and path.suffix == ".ts":
                continue
            key = f"profiler/{JOB}/profiler-output/{path.relative_to(root).as_posix()}"
            s3.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())


def sagemaker_stub(*responses: dict[str, Any]) -> tuple[Any, Stubber]:
    client = boto3.client("sagemaker", region_name=REGION)
    stub = Stubber(client)
    for response in responses:
        stub.add_response("describe_training_job", response, {"TrainingJobName": JOB})
    stub.activate()
    return client, stub


SETTINGS = lh.Settings(family=JobFamily(job_name_prefix="exp-"), read_workers=2)


def clients_for(aws: dict[str, Any], sagemaker: Any, cloudwatch: Any = None) -> lh.Clients:
    extra = {"cloudwatch": cloudwatch} if cloudwatch else {}
    return lh.Clients(s3=aws["s3"], events=aws["events"], sagemaker=sagemaker, **extra)


def load_state(s3: Any) -> dict[str, Any]:
    return json.loads(gzip.decompress(s3.get_object(Bucket=BUCKET, Key=STATE_KEY)["Body"].read()))


def test_profiler_source_runs_incrementally_and_publishes_each_status_change(aws, tmp_path, capsys):
    spec = small_spec(minutes=4, gpu_util=constant(40.0))
    root = write_job(tmp_path / "po", spec)
    upload_tree(aws["s3"], root, only_before=spec.start + 150)  # 2.5 minutes have arrived
    sm, stub = sagemaker_stub(describe(), describe("Completed", end=datetime(2025, 11, 29, 7, 12, tzinfo=timezone.utc)),
                              describe("Completed"))
    clients = clients_for(aws, sm)

    first = lh.handler({"detail": {"TrainingJobName": JOB}}, None, clients=clients, settings=SETTINGS)
    assert first["jobs"][0]["result"] == "in progress"
    assert first["jobs"][0]["windows"] == 1  # window 1 ends at the newest file: it waits for more data
    state = load_state(aws["s3"])
    assert state["source"] == "PROFILER" and state["final"] is False
    events = received(aws)
    assert len(events) == 1
    assert events[0]["detail-type"] == "Profiler Rule Evaluation Status Change"
    assert events[0]["source"] == "cdk-sagemaker-debugger" and events[0]["resources"] == [ARN]
    assert events[0]["detail"]["TrainingJobName"] == JOB and events[0]["detail"]["TrainingJobArn"] == ARN
    assert events[0]["detail"]["ProfilerRuleEvaluationStatuses"] == [
        {"RuleConfigurationName": "ProfilerReport", "RuleEvaluationStatus": "InProgress",
         "LastModifiedTime": "2025-11-29T07:08:00Z"}]

    upload_tree(aws["s3"], root)  # the rest, with the end-of-training markers
    second = lh.handler({"detail": {"TrainingJobName": JOB}}, None, clients=clients, settings=SETTINGS)
    assert second["jobs"][0] == {"job": JOB, "result": "final", "windows": 3,
                                 "statuses": {"ProfilerReport": "IssuesFound"}, "published": 1}
    [event] = received(aws)
    status = event["detail"]["ProfilerRuleEvaluationStatuses"][0]
    assert status["RuleEvaluationStatus"] == "IssuesFound"
    assert "rule ProfilerReport at step 4 " in status["StatusDetails"]

    low = json.loads(aws["s3"].get_object(Bucket=BUCKET, Key=f"{REPORTS}/profiler-reports/LowGPUUtilization.json")
                     ["Body"].read())
    assert low["RuleTriggered"] == 6 and list(low)[0] == "RuleTriggered"
    html = aws["s3"].get_object(Bucket=BUCKET, Key=f"{REPORTS}/profiler-report.html")
    assert html["ContentType"] == "text/html" and b"<svg" in html["Body"].read()
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    latest = [e for e in emf if e["Rule"] == "LowGPUUtilization"][-1]
    assert latest["RuleIssuesFound"] == 1 and latest["TrainingJobName"] == JOB
    assert latest["_aws"]["CloudWatchMetrics"][0]["Metrics"] == [{"Name": "RuleIssuesFound", "Unit": "Count"}]

    third = lh.handler({"detail": {"TrainingJobName": JOB}}, None, clients=clients, settings=SETTINGS)
    assert third["jobs"][0]["result"] == "already final" and received(aws) == []
    stub.assert_no_pending_responses()


def test_a_run_that_loses_the_race_commits_nothing(aws, tmp_path):
    root = write_job(tmp_path / "po", small_spec(minutes=2))
    upload_tree(aws["s3"], root)
    sm, _ = sagemaker_stub(describe("Completed"))

    class RacingS3:
        """Another run commits its state between this run's read and its write."""

        def __init__(self, real: Any):
            self.real = real

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

        def get_object(self, **kwargs: Any) -> Any:
            response = self.real.get_object(**kwargs)
            if kwargs["Key"] == STATE_KEY:
                self.real.put_object(Bucket=BUCKET, Key=STATE_KEY, Body=gzip.compress(b'{"final": true}'))
            return response

    aws["s3"].put_object(Bucket=BUCKET, Key=STATE_KEY, Body=gzip.compress(json.dumps({
        "version": 1, "job": JOB, "source": "PROFILER", "published": {}, "final": False,
        "evaluator": lh.new_evaluator([lh.RuleConfig("ProfilerReport", "ProfilerReport", {})], "PROFILER").to_state(),
    }).encode()))
    racing = lh.Clients(s3=RacingS3(aws["s3"]), events=aws["events"], sagemaker=sm)
    outcome = lh.handler({"TrainingJobName": JOB}, None, clients=racing, settings=SETTINGS)
    assert outcome["jobs"][0]["result"] == "conflict"
    assert load_state(aws["s3"]) == {"final": True}  # the winner's state stands
    # ... and the loser left no side effect: no event, no report over the winner's
    assert received(aws) == []
    assert aws["s3"].list_objects_v2(Bucket=BUCKET, Prefix=REPORTS).get("KeyCount", 0) == 0


def test_a_crash_after_the_commit_is_made_good_by_the_next_run(aws, tmp_path):
    """State is committed with what it owes (outbox); a crash before delivery loses no event and no report."""
    root = write_job(tmp_path / "po", small_spec(minutes=4, gpu_util=constant(40.0)))
    upload_tree(aws["s3"], root)
    sm, stub = sagemaker_stub(describe("Completed"), describe("Completed"), describe("Completed"))

    class CrashingEvents:
        def put_events(self, **kwargs: Any) -> Any:
            raise ConnectionError("the Lambda died while publishing")

    crashing = lh.Clients(s3=aws["s3"], events=CrashingEvents(), sagemaker=sm)
    with pytest.raises(ConnectionError):
        lh.evaluate_job(JOB, SETTINGS, crashing, deadline=float("inf"))
    state = load_state(aws["s3"])
    assert state["final"] is True and [s["RuleEvaluationStatus"] for s in state["outbox"]] == ["IssuesFound"]
    assert received(aws) == []

    retry = lh.evaluate_job(JOB, SETTINGS, clients_for(aws, sm), deadline=float("inf"))
    assert retry["result"] == "final" and retry["published"] == 1
    [event] = received(aws)
    assert event["detail"]["ProfilerRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] == "IssuesFound"
    assert aws["s3"].list_objects_v2(Bucket=BUCKET, Prefix=REPORTS)["KeyCount"] > 0
    assert load_state(aws["s3"])["outbox"] == []
    assert lh.evaluate_job(JOB, SETTINGS, clients_for(aws, sm), deadline=float("inf"))["result"] == "already final"
    assert received(aws) == []
    stub.assert_no_pending_responses()


def test_cloudwatch_source_when_the_profiler_is_off(aws):
    start = datetime(2025, 11, 29, 7, 0, tzinfo=timezone.utc)
    end = start + timedelta(minutes=30)
    transitions = [
        {"Status": "Starting", "StartTime": start - timedelta(minutes=3)},
        {"Status": "Downloading", "StartTime": start + timedelta(minutes=2)},
        {"Status": "Training", "StartTime": start + timedelta(minutes=24)},
        {"Status": "Completed", "StartTime": end},
    ]
    sm, _ = sagemaker_stub(describe("Completed", profiler=False, start=start, end=end, transitions=transitions))
    cw = boto3.client("cloudwatch", region_name=REGION)
    cw_stub = Stubber(cw)
    minutes = [start + timedelta(minutes=m) for m in range(31)]
    # ml.g5.12xlarge: 4 GPUs and 48 vCPUs, so 120 = 30 % per GPU and 960 = 20 % per core
    values = {0: 120.0, 1: 80.0, 2: 960.0, 3: 40.0, 4: 10.0}
    cw_stub.add_response(
        "get_metric_data",
        {"MetricDataResults": [{"Id": f"m0_{i}", "Label": "x", "Timestamps": minutes, "Values": [v] * len(minutes),
                                "StatusCode": "Complete"} for i, v in values.items()]},
        {"MetricDataQueries": ANY, "StartTime": start, "EndTime": end + timedelta(minutes=2),
         "ScanBy": "TimestampAscending"},
    )
    cw_stub.activate()
    outcome = lh.handler({"TrainingJobName": JOB}, None, clients=clients_for(aws, sm, cw), settings=SETTINGS)
    assert outcome["jobs"][0]["result"] == "final"
    cw_stub.assert_no_pending_responses()
    summary = json.loads(aws["s3"].get_object(Bucket=BUCKET, Key=f"{REPORTS}/evaluation-summary.json")["Body"].read())
    verdicts = {v["Rule"]: v["Verdict"] for v in summary["rules"][0]["Verdicts"]}
    assert verdicts["LowGPUUtilization"] == "IssuesFound"
    assert verdicts["BatchSize"] == "IssuesFound"
    assert verdicts["GPUMemoryIncrease"] == "NoIssuesFound"
    assert verdicts["MaxInitializationTime"] == "IssuesFound"  # 27 minutes from Starting to Training
    for rule in ("CPUBottleneck", "IOBottleneck", "LoadBalancing", "StepOutlier", "Dataloader",
                 "OverallFrameworkMetrics"):
        assert verdicts[rule] == "NotApplicable", rule
    usage = json.loads(aws["s3"].get_object(Bucket=BUCKET, Key=f"{REPORTS}/profiler-reports/OverallSystemUsage.json")
                       ["Body"].read())["Details"]
    assert usage["GPU"]["algo-1"]["p50"] == 30.0 and usage["CPU"]["algo-1"]["p50"] == 20.0
    low = json.loads(aws["s3"].get_object(Bucket=BUCKET, Key=f"{REPORTS}/profiler-reports/LowGPUUtilization.json")
                     ["Body"].read())
    assert low["RuleParameters"] == "threshold_p95:70\nthreshold_p5:10\nwindow:500\npatience:1000"
    [event] = received(aws)
    assert event["detail"]["ProfilerRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] == "IssuesFound"


def test_schedule_evaluates_the_prefixed_in_progress_jobs(aws):
    sm = boto3.client("sagemaker", region_name=REGION)
    stub = Stubber(sm)
    now = datetime(2025, 11, 29, 7, 0, tzinfo=timezone.utc)
    summary = {"TrainingJobArn": ARN, "CreationTime": now, "TrainingJobStatus": "InProgress"}
    stub.add_response("list_training_jobs",
                      {"TrainingJobSummaries": [dict(summary, TrainingJobName=JOB),
                                                dict(summary, TrainingJobName="other-exp-1")]},
                      {"StatusEquals": "InProgress", "NameContains": "exp-", "MaxResults": 100})
    stub.activate()
    assert lh.jobs_for_event({"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}},
                             SETTINGS, lh.Clients(sagemaker=sm)) == [JOB]
    assert lh.jobs_for_event({"detail": {"TrainingJobName": "someone-else"}}, SETTINGS, lh.Clients()) == []


def test_settings_refuse_to_run_without_a_prefix():
    with pytest.raises(ValueError, match="JOB_FAMILY"):
        lh.Settings.from_env({"RULES": "[]"})
    with pytest.raises(ValueError, match="SOURCE"):
        lh.Settings.from_env({"JOB_FAMILY": '{"job_name_prefix": "a"}', "SOURCE": "BOTH"})
    settings = lh.Settings.from_env({"JOB_FAMILY": '{"job_name_prefix": "a"}', "RULES": json.dumps([
        {"configuration_name": "low", "rule_to_invoke": "LowGPUUtilization", "parameters": {"window": "60"}}])})
    assert settings.rules[0].parameters == {"window": "60"}


def test_a_run_out_of_time_commits_its_progress_and_asks_for_a_continuation(aws, tmp_path):
    root = write_job(tmp_path / "po", small_spec(minutes=3))
    upload_tree(aws["s3"], root)
    sm, _ = sagemaker_stub(describe("Completed"), describe("Completed"))
    clients = clients_for(aws, sm)
    first = lh.evaluate_job(JOB, SETTINGS, clients, deadline=0.0)  # already past: one file, then stop
    assert first["result"] == "in progress"
    state = load_state(aws["s3"])
    assert len(state["system_cursor"]["seen"]) + len(state["framework_cursor"]["seen"]) == 1
    continuation = [e for e in received(aws) if e["detail-type"] == "Profiler Rule Evaluation Continuation"]
    assert [e["detail"] for e in continuation] == [{"TrainingJobName": JOB}]
    second = lh.evaluate_job(JOB, SETTINGS, clients, deadline=float("inf"))
    assert second["result"] == "final" and second["windows"] == 3


def test_an_ended_job_without_profiler_data_is_final_and_not_applicable(aws):
    """SOURCE=PROFILER on a job that never wrote profiler output: verdicts say why, instead of InProgress forever."""
    sm, stub = sagemaker_stub(describe("Completed"))
    settings = lh.Settings(family=JobFamily(job_name_prefix="exp-"), read_workers=2, source="PROFILER")
    outcome = lh.evaluate_job(JOB, settings, clients_for(aws, sm), deadline=float("inf"))
    assert outcome["result"] == "final"
    [event] = received(aws)
    [status] = event["detail"]["ProfilerRuleEvaluationStatuses"]
    assert status["RuleEvaluationStatus"] == "NoIssuesFound"
    assert status["StatusDetails"].startswith("NotApplicable:")
    stub.assert_no_pending_responses()


def sampler_job(status: str = "InProgress", *, transitions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A RuleEngine.EVALUATOR job: no Debugger member in its description."""
    response = describe(status, transitions=transitions)
    del response["ProfilerConfig"]
    return response


SAMPLER_SETTINGS = lh.Settings(family=JobFamily(job_name_prefix="exp-"), read_workers=2, profiler_s3_uri=f"s3://{BUCKET}/profiler")


def test_a_job_without_profiler_config_is_read_from_the_configured_sampler_location(aws, tmp_path):
    root = write_job(tmp_path / "po", small_spec(minutes=3))
    upload_tree(aws["s3"], root)  # to s3://BUCKET/profiler/<job>/profiler-output/, where the sampler writes
    sm, stub = sagemaker_stub(sampler_job("Completed"))
    outcome = lh.evaluate_job(JOB, SAMPLER_SETTINGS, clients_for(aws, sm), deadline=float("inf"))
    assert outcome["result"] == "final" and outcome["windows"] == 3
    assert load_state(aws["s3"])["source"] == "PROFILER"
    stub.assert_no_pending_responses()


def test_settings_read_the_profiler_location_from_the_environment():
    settings = lh.Settings.from_env({"JOB_FAMILY": '{"job_name_prefix": "exp-"}', "PROFILER_S3_URI": "s3://b/training"})
    assert settings.profiler_s3_uri == "s3://b/training"
    assert lh.Settings.from_env({"JOB_FAMILY": '{"job_name_prefix": "exp-"}'}).profiler_s3_uri == ""


def test_auto_waits_for_the_sampler_until_five_minutes_into_the_training_status(aws):
    created = datetime(2025, 11, 29, 7, 0, tzinfo=timezone.utc)
    store = lh.profiler_store(sampler_job(), aws["s3"], SAMPLER_SETTINGS.profiler_s3_uri)
    assert store is not None
    starting = [{"Status": "Starting", "StartTime": created}, {"Status": "Downloading", "StartTime": created}]
    an_hour_later = (created + timedelta(hours=1)).timestamp()
    # Still downloading a large data set an hour after creation: the container has not run, so keep waiting.
    assert lh.choose_source(SAMPLER_SETTINGS, sampler_job(transitions=starting), store, an_hour_later) is None
    training = [*starting, {"Status": "Training", "StartTime": created + timedelta(minutes=50)}]
    described = sampler_job(transitions=training)
    assert lh.choose_source(SAMPLER_SETTINGS, described, store, an_hour_later) == "CLOUDWATCH"  # 10 minutes in
    four_minutes_in = (created + timedelta(minutes=54)).timestamp()
    six_minutes_in = (created + timedelta(minutes=56)).timestamp()
    assert lh.choose_source(SAMPLER_SETTINGS, described, store, four_minutes_in) is None
    assert lh.choose_source(SAMPLER_SETTINGS, described, store, six_minutes_in) == "CLOUDWATCH"
    assert lh.choose_source(SAMPLER_SETTINGS, sampler_job("Failed", transitions=starting), store,
                            an_hour_later) == "CLOUDWATCH"


def test_auto_takes_the_sampler_files_as_soon_as_they_arrive(aws, tmp_path):
    root = write_job(tmp_path / "po", small_spec(minutes=1))
    upload_tree(aws["s3"], root)
    store = lh.profiler_store(sampler_job(), aws["s3"], SAMPLER_SETTINGS.profiler_s3_uri)
    assert lh.choose_source(SAMPLER_SETTINGS, sampler_job(), store, 0.0) == "PROFILER"


def test_a_job_stopped_before_writing_data_gets_a_status_dated_at_its_end(aws):
    """Its status was dated 1970-01-01 (no data, so no data time)."""
    start = datetime(2025, 11, 29, 7, 7, tzinfo=timezone.utc)
    sm, stub = sagemaker_stub(describe("Stopped", start=start, end=start + timedelta(minutes=2)))
    settings = lh.Settings(family=JobFamily(job_name_prefix="exp-"), read_workers=2, source="PROFILER")
    assert lh.evaluate_job(JOB, settings, clients_for(aws, sm), deadline=float("inf"))["result"] == "final"
    [event] = received(aws)
    [status] = event["detail"]["ProfilerRuleEvaluationStatuses"]
    assert status["LastModifiedTime"] == "2025-11-29T07:09:00Z"
    assert status["StatusDetails"].startswith("NotApplicable:")
    stub.assert_no_pending_responses()


@pytest.mark.parametrize("message", ["Requested resource not found.", "Could not find requested job with name x"])
def test_an_event_for_a_job_that_does_not_exist_is_logged_not_failed(aws, caplog, message):
    """The handler raised RuntimeError (and the event went to the dead-letter queue after retries)."""
    client = boto3.client("sagemaker", region_name=REGION)
    stub = Stubber(client)
    stub.add_client_error("describe_training_job", "ValidationException", message, 400,
                          expected_params={"TrainingJobName": JOB})
    stub.activate()
    event = {"source": "aws.sagemaker", "detail": {"TrainingJobName": JOB, "TrainingJobStatus": "Completed"}}
    outcome = lh.handler(event, None, clients=clients_for(aws, client), settings=SETTINGS)
    assert outcome == {"jobs": [{"job": JOB, "result": "no such job"}]}
    assert f"{JOB}: not evaluated: no such training job" in caplog.text
    assert received(aws) == []
    stub.assert_no_pending_responses()


def test_other_describe_failures_still_fail_the_invocation(aws):
    client = boto3.client("sagemaker", region_name=REGION)
    stub = Stubber(client)
    stub.add_client_error("describe_training_job", "ThrottlingException", "Rate exceeded", 400,
                          expected_params={"TrainingJobName": JOB})
    stub.activate()
    with pytest.raises(RuntimeError, match="ThrottlingException"):
        lh.handler({"detail": {"TrainingJobName": JOB}}, None, clients=clients_for(aws, client), settings=SETTINGS)
