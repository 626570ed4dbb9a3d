"""The Lambda entry point against hostile events, damaged state objects, S3's 403-for-missing-keys, bad rule
configurations and GPU instance types it has no table entry for."""

# ruff: noqa: F811  (pytest injects the imported fixture "aws" by parameter name)

from __future__ import annotations

import gzip
import json
import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber
from evaluator_jobs import small_spec
from test_evaluator_lambda import (  # the moto fixture "aws" is used as a parameter below
    BUCKET,
    JOB,
    REGION,
    REPORTS,
    SETTINGS,
    STATE_KEY,
    aws,  # noqa: F401
    clients_for,
    describe,
    load_state,
    received,
    sagemaker_stub,
    upload_tree,
)

from cdk_sagemaker_debugger.runtime.evaluator import cloudwatch
from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
from cdk_sagemaker_debugger.runtime.evaluator.state import S3StateStore
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import constant, write_job


@pytest.mark.parametrize("event", [[], [{"TrainingJobName": JOB}], "exp-llm-0001", None, 42])
def test_events_that_are_not_objects_are_logged_and_ignored(event, caplog):
    sm, stub = sagemaker_stub()  # no response queued: any SageMaker call would fail the test
    with caplog.at_level(logging.WARNING, logger=lh.LOG.name):
        outcome = lh.handler(event, None, clients=lh.Clients(sagemaker=sm), settings=SETTINGS)
    assert outcome == {"jobs": [], "ignored": f"the event is a {type(event).__name__}, not an object"}
    assert "ignoring an event that is not a JSON object" in caplog.text
    stub.assert_no_pending_responses()


DAMAGE = {
    "not gzip": b"evaluator state, but not gzip",
    "gzip, not JSON": gzip.compress(b'{"source": "PROFILER", "evaluator": '),
    "a JSON array": gzip.compress(b"[1, 2, 3]"),
    "not the evaluator's shape": gzip.compress(json.dumps({"source": "PROFILER", "evaluator": {"runs": 7}}).encode()),
    "a cursor that is not keys": gzip.compress(json.dumps({"source": "PROFILER", "system_cursor": {"seen": [1]},
                                                           "evaluator": {}}).encode()),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_state_object_is_set_aside_and_the_job_evaluated_again(aws, tmp_path, caplog, damage):
    root = write_job(tmp_path / "po", small_spec(minutes=3, gpu_util=constant(40.0)))
    upload_tree(aws["s3"], root)
    aws["s3"].put_object(Bucket=BUCKET, Key=STATE_KEY, Body=DAMAGE[damage])
    etag = aws["s3"].head_object(Bucket=BUCKET, Key=STATE_KEY)["ETag"].strip('"')
    sm, stub = sagemaker_stub(describe("Completed"), describe("Completed"))
    with caplog.at_level(logging.ERROR, logger=lh.LOG.name):
        outcome = lh.evaluate_job(JOB, SETTINGS, clients_for(aws, sm), deadline=float("inf"))
    assert outcome["result"] == "final" and outcome["statuses"] == {"ProfilerReport": "IssuesFound"}
    kept = f"{STATE_KEY}.damaged-{etag}"
    assert aws["s3"].get_object(Bucket=BUCKET, Key=kept)["Body"].read() == DAMAGE[damage]
    assert f"s3://{BUCKET}/{STATE_KEY}: damaged evaluator state" in caplog.text
    assert f"copied to s3://{BUCKET}/{kept}" in caplog.text
    assert load_state(aws["s3"])["final"] is True  # a fresh, usable state replaced it
    summary = json.loads(aws["s3"].get_object(Bucket=BUCKET, Key=f"{REPORTS}/evaluation-summary.json")["Body"].read())
    assert any(p.startswith(f"s3://{BUCKET}/{STATE_KEY}: damaged evaluator state") and kept in p
               for p in summary["Diagnostics"]["problems"])
    [event] = received(aws)
    assert event["detail"]["ProfilerRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] == "IssuesFound"
    assert lh.evaluate_job(JOB, SETTINGS, clients_for(aws, sm), deadline=float("inf"))["result"] == "already final"
    stub.assert_no_pending_responses()


def _s3_stub() -> tuple[Any, Stubber]:
    s3 = boto3.client("s3", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    return s3, Stubber(s3)


def test_a_missing_state_answered_with_404_is_a_first_run():
    s3, stub = _s3_stub()
    stub.add_client_error("get_object", "NoSuchKey", http_status_code=404,
                          expected_params={"Bucket": BUCKET, "Key": STATE_KEY})
    with stub:
        assert S3StateStore(s3, BUCKET, STATE_KEY).load() == (None, None)
    stub.assert_no_pending_responses()


def test_a_missing_state_answered_with_403_is_confirmed_by_listing_that_key():
    """Without s3:ListBucket covering the request S3 answers GetObject of a missing key with 403; the evaluator's
    ListBucket grant is conditioned on s3:prefix, which a GetObject lacks, but a listing of the exact key has it."""
    s3, stub = _s3_stub()
    stub.add_client_error("get_object", "AccessDenied", http_status_code=403,
                          expected_params={"Bucket": BUCKET, "Key": STATE_KEY})
    stub.add_response("list_objects_v2", {"KeyCount": 0, "IsTruncated": False},
                      {"Bucket": BUCKET, "Prefix": STATE_KEY, "MaxKeys": 1})
    with stub:
        assert S3StateStore(s3, BUCKET, STATE_KEY).load() == (None, None)
    stub.assert_no_pending_responses()


def test_a_403_on_a_state_that_exists_is_a_real_denial():
    s3, stub = _s3_stub()
    stub.add_client_error("get_object", "AccessDenied", http_status_code=403)
    stub.add_response("list_objects_v2", {"KeyCount": 1, "Contents": [{"Key": STATE_KEY, "Size": 10}]},
                      {"Bucket": BUCKET, "Prefix": STATE_KEY, "MaxKeys": 1})
    with stub, pytest.raises(ClientError, match="AccessDenied"):
        S3StateStore(s3, BUCKET, STATE_KEY).load()


def test_a_403_whose_listing_is_denied_too_names_the_key_and_the_permissions():
    s3, stub = _s3_stub()
    stub.add_client_error("get_object", "AccessDenied", http_status_code=403)
    stub.add_client_error("list_objects_v2", "AccessDenied", http_status_code=403)
    with stub, pytest.raises(PermissionError) as caught:
        S3StateStore(s3, BUCKET, STATE_KEY).load()
    assert str(caught.value).startswith(f"s3://{BUCKET}/{STATE_KEY}: GetObject was denied and so was ListObjectsV2")
    assert "s3:ListBucket with that s3:prefix" in str(caught.value)


class ForbiddenWhenMissing:
    """moto S3 as the evaluator's role sees it: GetObject of a missing key is 403 AccessDenied, not 404."""

    def __init__(self, real: Any):
        self.real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def get_object(self, **kwargs: Any) -> Any:
        try:
            return self.real.get_object(**kwargs)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "NoSuchKey":
                raise
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"},
                               "ResponseMetadata": {"HTTPStatusCode": 403}}, "GetObject") from None


def test_the_first_run_of_a_job_works_when_s3_answers_403_for_the_missing_state(aws, tmp_path):
    root = write_job(tmp_path / "po", small_spec(minutes=3, gpu_util=constant(40.0)))
    upload_tree(aws["s3"], root)
    sm, _ = sagemaker_stub(describe("Completed"))
    clients = lh.Clients(s3=ForbiddenWhenMissing(aws["s3"]), events=aws["events"], sagemaker=sm)
    outcome = lh.evaluate_job(JOB, SETTINGS, clients, deadline=float("inf"))
    assert outcome["result"] == "final" and outcome["statuses"] == {"ProfilerReport": "IssuesFound"}


def test_a_bad_scan_interval_in_the_job_is_an_error_status_not_a_run_that_fails_forever(aws, tmp_path):
    root = write_job(tmp_path / "po", small_spec(minutes=3, gpu_util=constant(40.0)))
    upload_tree(aws["s3"], root)
    response = describe("Completed")
    response["ProfilerRuleConfigurations"] = [
        {"RuleConfigurationName": "LowGPU", "RuleEvaluatorImage": "503895931360.dkr.ecr.us-east-1.amazonaws.com/x",
         "RuleParameters": {"rule_to_invoke": "LowGPUUtilization", "scan_interval_us": "1"}},
        {"RuleConfigurationName": "ProfilerReport", "RuleEvaluatorImage": "503895931360.dkr.ecr.us-east-1.amazonaws.com/x",
         "RuleParameters": {"rule_to_invoke": "ProfilerReport"}}]
    sm, _ = sagemaker_stub(response)
    outcome = lh.evaluate_job(JOB, SETTINGS, clients_for(aws, sm), deadline=float("inf"))
    assert outcome["result"] == "final"
    assert outcome["statuses"] == {"LowGPU": "Error", "ProfilerReport": "IssuesFound"}
    [event] = received(aws)
    low = event["detail"]["ProfilerRuleEvaluationStatuses"][0]
    assert low["RuleConfigurationName"] == "LowGPU" and low["RuleEvaluationStatus"] == "Error"
    assert low["StatusDetails"].startswith("RuleConfigError: LowGPU: scan_interval_us='1' is not usable")


def _g7e_job(aws: dict[str, Any], ec2: Any) -> dict[str, str]:
    """A 30-minute ml.g7e.48xlarge job without profiler: CloudWatch says 8 GPUs at 10 % (GPUUtilization sums 80)."""
    start = datetime(2025, 11, 29, 7, 0, tzinfo=timezone.utc)
    end = start + timedelta(minutes=30)
    response = describe("Completed", profiler=False, start=start, end=end)
    response["ResourceConfig"]["InstanceType"] = "ml.g7e.48xlarge"
    sm, _ = sagemaker_stub(response)
    cw = boto3.client("cloudwatch", region_name=REGION)
    cw_stub = Stubber(cw)
    minutes = [start + timedelta(minutes=m) for m in range(31)]
    values = {0: 80.0, 1: 160.0, 2: 9600.0, 3: 40.0, 4: 10.0}  # GPU, GPU memory, CPU (192 vCPUs at 50 %), ...
    cw_stub.add_response("get_metric_data", {"MetricDataResults": [
        {"Id": f"m0_{i}", "Label": "x", "Timestamps": minutes, "Values": [v] * len(minutes), "StatusCode": "Complete"}
        for i, v in values.items()]}, {"MetricDataQueries": ANY, "StartTime": start, "EndTime": end + timedelta(minutes=2),
                                       "ScanBy": "TimestampAscending"})
    cw_stub.activate()
    clients = lh.Clients(s3=aws["s3"], events=aws["events"], sagemaker=sm, cloudwatch=cw, ec2=ec2)
    assert lh.handler({"TrainingJobName": JOB}, None, clients=clients, settings=SETTINGS)["jobs"][0]["result"] == "final"
    summary = json.loads(aws["s3"].get_object(Bucket=BUCKET, Key=f"{REPORTS}/evaluation-summary.json")["Body"].read())
    usage = json.loads(aws["s3"].get_object(Bucket=BUCKET, Key=f"{REPORTS}/profiler-reports/OverallSystemUsage.json")
                       ["Body"].read())["Details"]
    verdicts = {v["Rule"]: v["Verdict"] for v in summary["rules"][0]["Verdicts"]}
    return {"LowGPUUtilization": verdicts["LowGPUUtilization"], "GPU p50": usage["GPU"]["algo-1"]["p50"],
            "CPU p50": usage["CPU"]["algo-1"]["p50"], "problems": summary["Diagnostics"]["problems"]}


def test_a_gpu_family_missing_from_the_table_gets_its_gpu_count_from_ec2(aws, monkeypatch):
    """ml.g7e was treated as CPU-only: its GPU metrics were dropped and the GPU rules said not applicable."""
    monkeypatch.setattr(cloudwatch, "_EC2_DEVICES", {})
    ec2 = boto3.client("ec2", region_name=REGION)
    ec2_stub = Stubber(ec2)
    ec2_stub.add_response("describe_instance_types", {"InstanceTypes": [
        {"InstanceType": "g7e.48xlarge", "VCpuInfo": {"DefaultVCpus": 192},
         "GpuInfo": {"Gpus": [{"Name": "RTX PRO 6000", "Manufacturer": "NVIDIA", "Count": 8}]}}]},
        {"InstanceTypes": ["g7e.48xlarge"]})
    ec2_stub.activate()
    found = _g7e_job(aws, ec2)
    assert found == {"LowGPUUtilization": "IssuesFound", "GPU p50": 10.0, "CPU p50": 50.0, "problems": []}
    ec2_stub.assert_no_pending_responses()


def test_a_gpu_family_unknown_everywhere_is_inferred_from_its_gpu_metrics_and_said(aws, monkeypatch):
    monkeypatch.setattr(cloudwatch, "_EC2_DEVICES", {})
    ec2 = boto3.client("ec2", region_name=REGION)
    ec2_stub = Stubber(ec2)
    ec2_stub.add_client_error("describe_instance_types", "UnauthorizedOperation", http_status_code=403)
    ec2_stub.activate()
    found = _g7e_job(aws, ec2)
    # 160 % of GPU memory needs at least 2 GPUs: a lower bound, so per-GPU values come out too high, and it says so
    assert found["LowGPUUtilization"] == "IssuesFound" and found["GPU p50"] == 40.0 and found["CPU p50"] == 50.0
    assert found["problems"] == [f"{JOB}/algo-1: GPU count of the instance type unknown; 2 GPU(s) inferred from the "
                                 "largest GPU metric (at most 100 % per GPU, so a lower bound: per-GPU values may be "
                                 "too high)"]


def test_instance_types_are_never_assumed_to_have_no_gpu():
    assert cloudwatch.instance_devices("ml.g7e.48xlarge") == (None, 192)
    assert cloudwatch.instance_devices("ml.g7.2xlarge") == (None, 8)
    assert cloudwatch.instance_devices("ml.p6-b200.48xlarge") == (8, 192)
    assert cloudwatch.instance_devices("ml.p5.4xlarge") == (1, 16)
    assert cloudwatch.instance_devices("ml.m5.xlarge") == (None, 4)  # CPU-only: it simply reports no GPU metrics


def test_a_state_damaged_deep_inside_is_set_aside_when_evaluating_from_it_fails(aws, tmp_path, caplog):
    spec = small_spec(minutes=3, gpu_util=constant(40.0))
    root = write_job(tmp_path / "po", spec)
    upload_tree(aws["s3"], root, only_before=spec.start + 150)
    sm, stub = sagemaker_stub(describe(), describe("Completed"))
    assert lh.evaluate_job(JOB, SETTINGS, clients_for(aws, sm), deadline=float("inf"))["result"] == "in progress"
    state = load_state(aws["s3"])
    # the CPU values of the run the window was still reading: restored, and summing them fails
    state["evaluator"]["pending_system"][0]["open"][2] = "not a list of CPU values"
    aws["s3"].put_object(Bucket=BUCKET, Key=STATE_KEY, Body=gzip.compress(json.dumps(state).encode()))
    etag = aws["s3"].head_object(Bucket=BUCKET, Key=STATE_KEY)["ETag"].strip('"')
    upload_tree(aws["s3"], root)
    received(aws)
    with caplog.at_level(logging.ERROR, logger=lh.LOG.name):
        outcome = lh.evaluate_job(JOB, SETTINGS, clients_for(aws, sm), deadline=float("inf"))
    assert outcome["result"] == "final" and outcome["statuses"] == {"ProfilerReport": "IssuesFound"}
    assert (f"s3://{BUCKET}/{STATE_KEY}: damaged evaluator state (evaluating from it raised TypeError: "
            in caplog.text)
    assert aws["s3"].head_object(Bucket=BUCKET, Key=f"{STATE_KEY}.damaged-{etag}")["ContentLength"] > 0
    assert load_state(aws["s3"])["final"] is True
    stub.assert_no_pending_responses()
