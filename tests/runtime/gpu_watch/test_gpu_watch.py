"""The low-GPU watch against botocore Stubbers (each request is checked against the real SageMaker and CloudWatch
models): which hosts count, what is divided by what, and the embedded-metric line the alarm reads."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from cdk_sagemaker_debugger.model.contract import LOWEST_GPU_UTILIZATION_METRIC, TRAINING_HOSTS_METRIC
from cdk_sagemaker_debugger.runtime.gpu_watch import handler, watch

REGION = "us-east-1"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
SETTINGS = watch.Settings(job_name_prefix="vision-train-", gpus_per_host=4)
LISTING = {"StatusEquals": "InProgress", "NameContains": "vision-train", "MaxResults": 100}


def summary(name: str) -> dict[str, Any]:
    return {"TrainingJobName": name, "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{name}",
            "CreationTime": NOW, "TrainingJobStatus": "InProgress"}


def description(name: str, secondary: str = "Training", count: int = 1, role: str | None = None) -> dict[str, Any]:
    return {"RoleArn": role or "arn:aws:iam::123456789012:role/vision-train",
        "TrainingJobName": name, "TrainingJobArn": summary(name)["TrainingJobArn"], "ModelArtifacts": {
            "S3ModelArtifacts": ""}, "TrainingJobStatus": "InProgress", "SecondaryStatus": secondary,
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "image"},
        "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": count, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600}, "CreationTime": NOW,
    }


def result(index: int, *values: float) -> dict[str, Any]:
    stamps = [NOW - timedelta(minutes=2 + i) for i in range(len(values))]  # newest first, as requested
    return {"Id": f"h{index}", "Label": "GPUUtilization", "StatusCode": "Complete", "Timestamps": stamps,
            "Values": list(values)}


@pytest.fixture
def clients() -> tuple[Any, Stubber, Any, Stubber]:
    sagemaker = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="k", aws_secret_access_key="s")
    cloudwatch = boto3.client("cloudwatch", region_name=REGION, aws_access_key_id="k", aws_secret_access_key="s")
    sm_stub, cw_stub = Stubber(sagemaker), Stubber(cloudwatch)
    sm_stub.activate()
    cw_stub.activate()
    yield sagemaker, sm_stub, cloudwatch, cw_stub
    sm_stub.assert_no_pending_responses()
    cw_stub.assert_no_pending_responses()


def test_only_training_hosts_of_the_family_count_and_values_are_per_gpu(clients) -> None:
    sagemaker, sm_stub, cloudwatch, cw_stub = clients
    sm_stub.add_response("list_training_jobs", {"TrainingJobSummaries": [
        summary("vision-train-aaa"), summary("pre-vision-train-bbb")], "NextToken": "t"}, LISTING)
    sm_stub.add_response("list_training_jobs", {"TrainingJobSummaries": [
        summary("Vision-Train-ccc"), summary("vision-train-ddd")]}, {**LISTING, "NextToken": "t"})
    sm_stub.add_response("describe_training_job", description("vision-train-aaa", count=2),
                         {"TrainingJobName": "vision-train-aaa"})
    sm_stub.add_response("describe_training_job", description("Vision-Train-ccc", secondary="Downloading"),
                         {"TrainingJobName": "Vision-Train-ccc"})
    sm_stub.add_response("describe_training_job", description("vision-train-ddd"),
                         {"TrainingJobName": "vision-train-ddd"})
    cw_stub.add_response("get_metric_data", {"MetricDataResults": [
        result(0, 200.0, 390.0), result(1, 36.0), result(2)]}, {
        "MetricDataQueries": ANY, "StartTime": NOW - watch.LOOKBACK, "EndTime": NOW, "ScanBy": "TimestampDescending"})

    measurement = watch.measure(SETTINGS, sagemaker, cloudwatch, now=NOW)

    # pre-vision-train-* is not in the family; Vision-Train-ccc is still downloading; ddd's host has not reported
    assert measurement.per_gpu == {"vision-train-aaa/algo-1": 50.0, "vision-train-aaa/algo-2": 9.0}
    assert measurement.lowest == ("vision-train-aaa/algo-2", 9.0)


def test_a_job_that_borrows_the_prefix_but_not_the_role_does_not_count(clients) -> None:
    """An idle job under the prefix, started with another role, would have fired the low-GPU alarm (or with its
    figures stood in for the family's); with the family's role known it is not measured at all."""
    sagemaker, sm_stub, cloudwatch, cw_stub = clients
    settings = watch.Settings("vision-train-", 4, execution_role_arns=("arn:aws:iam::123456789012:role/vision-train",))
    sm_stub.add_response("list_training_jobs", {"TrainingJobSummaries": [
        summary("vision-train-idle"), summary("vision-train-real")]}, LISTING)
    sm_stub.add_response("describe_training_job", description(
        "vision-train-idle", role="arn:aws:iam::123456789012:role/someone-else"), {"TrainingJobName": "vision-train-idle"})
    sm_stub.add_response("describe_training_job", description("vision-train-real"),
                         {"TrainingJobName": "vision-train-real"})
    cw_stub.add_response("get_metric_data", {"MetricDataResults": [result(0, 360.0)]}, {
        "MetricDataQueries": ANY, "StartTime": NOW - watch.LOOKBACK, "EndTime": NOW, "ScanBy": "TimestampDescending"})

    measurement = watch.measure(settings, sagemaker, cloudwatch, now=NOW)

    assert measurement.per_gpu == {"vision-train-real/algo-1": 90.0}
    assert watch.Settings.from_environment({
        "JOB_NAME_PREFIX": "a-", "GPUS_PER_HOST": "8",
        "EXECUTION_ROLE_ARNS": '["arn:aws:iam::1:role/r", "arn:aws:iam::1:role/s"]'}).execution_role_arns == (
        "arn:aws:iam::1:role/r", "arn:aws:iam::1:role/s")
    with pytest.raises(watch.SettingsError, match="EXECUTION_ROLE_ARNS must be a JSON list"):
        watch.Settings.from_environment({"JOB_NAME_PREFIX": "a-", "GPUS_PER_HOST": "8",
                                         "EXECUTION_ROLE_ARNS": "arn:aws:iam::1:role/r"})


def test_jobs_of_each_of_the_familys_roles_count_and_no_other(clients) -> None:
    """A family of several roles (a pipeline's steps): an idle job of a third role cannot raise the alarm."""
    sagemaker, sm_stub, cloudwatch, cw_stub = clients
    roles = ("arn:aws:iam::123456789012:role/prepare", "arn:aws:iam::123456789012:role/train")
    settings = watch.Settings("vision-train-", 4, execution_role_arns=roles)
    sm_stub.add_response("list_training_jobs", {"TrainingJobSummaries": [
        summary("vision-train-a"), summary("vision-train-b"), summary("vision-train-idle")]}, LISTING)
    for name, role in (("vision-train-a", roles[0]), ("vision-train-b", roles[1]),
                       ("vision-train-idle", "arn:aws:iam::123456789012:role/intruder")):
        sm_stub.add_response("describe_training_job", description(name, role=role), {"TrainingJobName": name})
    cw_stub.add_response("get_metric_data", {"MetricDataResults": [result(0, 360.0), result(1, 200.0)]}, {
        "MetricDataQueries": ANY, "StartTime": NOW - watch.LOOKBACK, "EndTime": NOW, "ScanBy": "TimestampDescending"})

    measurement = watch.measure(settings, sagemaker, cloudwatch, now=NOW)

    assert measurement.per_gpu == {"vision-train-a/algo-1": 90.0, "vision-train-b/algo-1": 50.0}


def test_queries_name_each_host_with_the_sagemaker_dimension(clients) -> None:
    _, _, cloudwatch, cw_stub = clients
    hosts = ["job-1/algo-1", "job-1/algo-2"]
    expected = [{"Id": f"h{i}", "ReturnData": True, "MetricStat": {
        "Metric": {"Namespace": "/aws/sagemaker/TrainingJobs", "MetricName": "GPUUtilization",
                   "Dimensions": [{"Name": "Host", "Value": host}]}, "Period": 60, "Stat": "Average"}}
        for i, host in enumerate(hosts)]
    cw_stub.add_response("get_metric_data", {"MetricDataResults": [result(0, 10.0)], "NextToken": "n"}, {
        "MetricDataQueries": expected, "StartTime": ANY, "EndTime": ANY, "ScanBy": "TimestampDescending"})
    cw_stub.add_response("get_metric_data", {"MetricDataResults": [result(1, 20.0)]}, {
        "MetricDataQueries": expected, "StartTime": ANY, "EndTime": ANY, "ScanBy": "TimestampDescending",
        "NextToken": "n"})
    assert watch.latest_gpu_utilization(cloudwatch, hosts, NOW) == {"job-1/algo-1": 10.0, "job-1/algo-2": 20.0}


def test_no_training_job_means_no_query_and_no_utilisation_datapoint(clients) -> None:
    sagemaker, sm_stub, cloudwatch, _ = clients
    sm_stub.add_response("list_training_jobs", {"TrainingJobSummaries": []}, LISTING)
    measurement = watch.measure(SETTINGS, sagemaker, cloudwatch, now=NOW)
    line = json.loads(watch.emf_line(SETTINGS, measurement, now_ms=1))
    assert line[TRAINING_HOSTS_METRIC] == 0 and LOWEST_GPU_UTILIZATION_METRIC not in line
    (directive,) = line["_aws"]["CloudWatchMetrics"]
    assert directive["Metrics"] == [{"Name": TRAINING_HOSTS_METRIC, "Unit": "Count"}]


def test_emf_line_is_what_the_alarm_reads() -> None:
    measurement = watch.Measurement({"job-a/algo-1": 55.0, "job-b/algo-3": 7.25})
    line = json.loads(watch.emf_line(SETTINGS, measurement, now_ms=1_700_000_000_000))
    assert line == {
        "JobNamePrefix": "vision-train-", "TrainingHosts": 2, "LowestGPUUtilization": 7.25, "LowestHost": "job-b/algo-3",
        "_aws": {"Timestamp": 1_700_000_000_000, "CloudWatchMetrics": [{
            "Namespace": "CdkSageMakerDebugger", "Dimensions": [["JobNamePrefix"]],
            "Metrics": [{"Name": "TrainingHosts", "Unit": "Count"}, {"Name": "LowestGPUUtilization", "Unit": "Percent"}],
        }]},
    }


@pytest.mark.parametrize(("environ", "message"), [
    ({"GPUS_PER_HOST": "4"}, "JOB_NAME_PREFIX must name"),
    ({"JOB_NAME_PREFIX": "x-", "GPUS_PER_HOST": "0"}, "GPUS_PER_HOST must be a whole number"),
    ({"JOB_NAME_PREFIX": "x-", "GPUS_PER_HOST": "four"}, "got 'four'"),
])
def test_settings_refuse_an_incomplete_environment(environ: dict[str, str], message: str) -> None:
    with pytest.raises(watch.SettingsError, match=message):
        watch.Settings.from_environment(environ)


def test_settings_read_the_environment_the_construct_writes() -> None:
    settings = watch.Settings.from_environment({"JOB_NAME_PREFIX": "a-", "GPUS_PER_HOST": "8", "METRIC_NAMESPACE": "N"})
    assert settings == watch.Settings("a-", 8, "N")


def test_handler_prints_the_metric_line_and_returns_the_lowest_host(clients, capsys, monkeypatch) -> None:
    sagemaker, sm_stub, cloudwatch, cw_stub = clients
    sm_stub.add_response("list_training_jobs", {"TrainingJobSummaries": [summary("vision-train-x")]}, LISTING)
    sm_stub.add_response("describe_training_job", description("vision-train-x"), {"TrainingJobName": "vision-train-x"})
    cw_stub.add_response("get_metric_data", {"MetricDataResults": [result(0, 20.0)]}, {
        "MetricDataQueries": ANY, "StartTime": ANY, "EndTime": ANY, "ScanBy": "TimestampDescending"})
    monkeypatch.setattr(handler, "_state", {"settings": SETTINGS, "sagemaker": sagemaker, "cloudwatch": cloudwatch})

    response = handler.handler({}, None)

    assert response == {"trainingHosts": 1, "lowestHost": "vision-train-x/algo-1", "lowestGpuUtilization": 5.0}
    printed = json.loads(capsys.readouterr().out)
    assert printed["LowestGPUUtilization"] == 5.0 and printed["JobNamePrefix"] == "vision-train-"
