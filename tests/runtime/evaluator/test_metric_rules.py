"""The metric rules of the evaluator: the checks on hand-made series, and the Lambda reading CloudWatch (Stubber) into
S3 and EventBridge (moto) for a job with metric rules only."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from test_evaluator_lambda import ARN, BUCKET, JOB, REGION, aws, load_state, received  # noqa: F401 (aws: fixture)

from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
from cdk_sagemaker_debugger.runtime.evaluator.contract_shared import JobFamily
from cdk_sagemaker_debugger.runtime.evaluator.engine import RuleConfig
from cdk_sagemaker_debugger.runtime.evaluator.metric_checks import loss_not_decreasing, overfit, stalled
from cdk_sagemaker_debugger.runtime.evaluator.metric_rules import MetricEvaluation

T0 = datetime(2025, 11, 29, 7, 0, tzinfo=timezone.utc)
S0 = T0.timestamp()


def series(values: list[float], start: float = S0) -> list[list[float]]:
    return [[start + 60 * i, v] for i, v in enumerate(values)]


# ---- the checks ------------------------------------------------------------------------------------------------------


def test_loss_that_plateaus_fires_at_the_first_check_without_enough_decrease():
    values = [2.0, 1.9, 1.8, 1.7, 1.6, 1.5, 1.4, 1.3, 1.2, 1.1] + [1.0] * 15  # 25 datapoints
    outcome = loss_not_decreasing(series(values), metric="train:loss", num_steps=10, diff_percent=0.1,
                                  increase_threshold_percent=5)
    assert outcome.first_step == 20  # step 10: 2.0 -> 1.0 is 50 %; step 20: 1.0 -> 1.0 is 0 %
    assert [(v["step"], v["kind"], v["previous"], v["decrease_percent"]) for v in outcome.violations] == [
        (20, "not decreasing", 1.0, 0.0)]
    assert outcome.details["checks"] == 2 and outcome.details["lowest"] == 1.0
    assert outcome.explanation == ("train:loss went from 1 at step 10 to 1 at step 20 (2025-11-29T07:20:00Z): a "
                                   "decrease of 0%, less than diff_percent 0.1")


def test_loss_that_keeps_falling_slowly_enough_passes_and_a_spike_fires_at_once():
    falling = [10.0 * 0.99 ** i for i in range(21)]  # 1 % per step: about 9.6 % per 10 steps
    quiet = loss_not_decreasing(series(falling), metric="l", num_steps=10, diff_percent=0.1,
                                increase_threshold_percent=5)
    assert quiet.violations == [] and quiet.not_applicable is None
    spiked = loss_not_decreasing(series([1.0, 0.9, 0.96]), metric="l", num_steps=10, diff_percent=0.1,
                                 increase_threshold_percent=5)
    [violation] = spiked.violations  # 0.96 is 6.67 % above the lowest 0.9
    assert (violation["step"], violation["kind"]) == (2, "increase")
    assert violation["increase_percent"] == pytest.approx(100 * 0.06 / 0.9)
    assert spiked.not_applicable is None
    short = loss_not_decreasing(series([1.0] * 10), metric="l", num_steps=10, diff_percent=0.1,
                                increase_threshold_percent=5)
    assert short.not_applicable == "l has 10 datapoint(s); the check needs more than num_steps (10)"


def test_overfit_pairs_each_validation_point_with_the_latest_training_point_and_honours_patience():
    train = series([1.0, 0.9, 0.8, 0.7, 0.6, 0.5])
    # validation every second minute, 30 s after the training point: ratios 0, 0.125 (0.9 / 0.8), 0.5 (0.9 / 0.6)
    validation = [[S0 + 30, 1.0], [S0 + 150, 0.9], [S0 + 270, 0.9]]
    outcome = overfit(train, validation, train_metric="t", validation_metric="v", start_step=0, patience=1,
                      ratio_threshold=0.1)
    assert outcome.details["pairs"] == 3 and outcome.details["largest_ratio"] == pytest.approx(0.5)
    [violation] = outcome.violations  # the second consecutive ratio above 0.1 exceeds patience 1
    assert violation["step"] == 2 and violation["training"] == 0.6 and violation["consecutive"] == 2
    patient = overfit(train, validation, train_metric="t", validation_metric="v", start_step=0, patience=2,
                      ratio_threshold=0.1)
    assert patient.violations == []
    skipped = overfit(train, validation, train_metric="t", validation_metric="v", start_step=3, patience=1,
                      ratio_threshold=0.1)
    assert skipped.not_applicable == "no v datapoint after step 3 has a t datapoint at or before it"


def test_stalled_metric_is_a_gap_in_the_timestamps():
    points = series([1.0, 0.9]) + [[S0 + 60 + 1860, 0.8]]  # 31 minutes without a datapoint after 07:01
    outcome = stalled(points, metric="train:loss", threshold=1800, training_since=S0, reference=S0 + 1980)
    assert [(g["from"], g["to"], g["seconds"]) for g in outcome.violations] == [
        ("2025-11-29T07:01:00Z", "2025-11-29T07:32:00Z", 1860.0)]
    assert outcome.first_step == 2
    recent = stalled(series([1.0]), metric="m", threshold=1800, training_since=S0, reference=S0 + 1800)
    assert recent.violations == [] and recent.details["longest_gap_seconds"] == 1800
    assert stalled([], metric="m", threshold=1800, training_since=None, reference=None).not_applicable == (
        "the job has not started training yet")


def test_a_metric_that_never_got_a_datapoint_is_not_applicable_not_stalled():
    """A MetricDefinitions regex that never matches looks like a stall from the first minute; firing (with
    StopTraining) stopped a healthy job although the docs said NotApplicable."""
    never = stalled([], metric="train:loss", threshold=1800, training_since=S0, reference=S0 + 7200)
    assert never.violations == [] and never.first_step is None
    assert never.not_applicable.startswith("train:loss has no datapoint in the 7200 s since training started: its "
                                           "MetricDefinitions regex may never match")


# ---- the evaluation and its state ----------------------------------------------------------------------------------


def loss_rule(name: str = "LossNotDecreasing", **parameters: Any) -> RuleConfig:
    return RuleConfig(name, "LossNotDecreasing", {"metric": "train:loss", "num_steps": 10, "diff_percent": 0.1,
                                                  "increase_threshold_percent": 5, **parameters})


def test_bad_parameters_report_error_and_a_metric_the_job_does_not_define_is_not_applicable():
    evaluation = MetricEvaluation([loss_rule(num_steps="ten"), RuleConfig("Stall", "StalledTraining",
                                                                          {"metric": "val:loss"})])
    evaluation.defined = ["train:loss"]
    broken, stall = evaluation.results(final=True)
    assert broken.status == "Error"
    assert broken.status_details == ("RuleConfigError: LossNotDecreasing: num_steps='ten' is not a usable whole number "
                                     "(at least 1)")
    [zero] = MetricEvaluation([loss_rule(num_steps="0")]).results(final=False)
    assert zero.status_details == "RuleConfigError: LossNotDecreasing: num_steps=0 is not a usable whole number (at " \
                                  "least 1)"
    [nan] = MetricEvaluation([loss_rule(diff_percent=math.nan)]).results(final=False)
    assert nan.status == "Error"
    assert stall.status == "NoIssuesFound"
    assert stall.status_details == "NotApplicable: the job defines no metric 'val:loss' (its MetricDefinitions: " \
                                   "'train:loss')"


def test_state_round_trips_and_damage_is_reported():
    evaluation = MetricEvaluation([loss_rule()])
    evaluation.series["train:loss"] = series([1.0, 0.5])
    evaluation.through = int(S0) + 60
    restored = MetricEvaluation.from_state(json.loads(json.dumps(evaluation.to_state())))
    assert restored.series == evaluation.series and restored.through == int(S0) + 60
    damaged = {**evaluation.to_state(), "series": {"train:loss": [[1.0]]}}
    with pytest.raises(TypeError, match="is not a list of \\[time, value\\] pairs"):
        MetricEvaluation.from_state(damaged)


# ---- the Lambda ------------------------------------------------------------------------------------------------------


def describe(status: str = "InProgress", end: datetime | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {
        "TrainingJobName": JOB, "TrainingJobArn": ARN, "TrainingJobStatus": status, "SecondaryStatus": "Training",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "123.dkr.ecr.us-east-1.amazonaws.com/t",
                                   "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}]},
        "ModelArtifacts": {"S3ModelArtifacts": f"s3://{BUCKET}/output/{JOB}/output/model.tar.gz"},
        "ResourceConfig": {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 2, "VolumeSizeInGB": 50},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400}, "CreationTime": T0 - timedelta(minutes=3),
        "TrainingStartTime": T0, "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/output"},
        "ProfilerConfig": {"DisableProfiler": True},
        "SecondaryStatusTransitions": [{"Status": "Training", "StartTime": T0}],
    }
    if end:
        response["TrainingEndTime"] = end
    return response


def metric_query(job: str = JOB) -> list[dict[str, Any]]:
    return [{"Id": "m0", "MetricStat": {"Metric": {"Namespace": "/aws/sagemaker/TrainingJobs", "MetricName": "train:loss",
                                                   "Dimensions": [{"Name": "TrainingJobName", "Value": job}]},
                                        "Period": 60, "Stat": "Average"}, "ReturnData": True}]


def test_lambda_reads_new_minutes_each_run_and_publishes_issues_found_once(aws):  # noqa: F811
    settings = lh.Settings(family=JobFamily(job_name_prefix="exp-"), rules=[loss_rule("loss")])
    sm = boto3.client("sagemaker", region_name=REGION)
    sm_stub = Stubber(sm)
    for response in (describe(), describe()):
        sm_stub.add_response("describe_training_job", response, {"TrainingJobName": JOB})
    cw = boto3.client("cloudwatch", region_name=REGION)
    cw_stub = Stubber(cw)
    minutes = [T0 + timedelta(minutes=m) for m in range(28)]
    values = [2.0 - 0.1 * m for m in range(10)] + [1.0] * 18
    # first run at 07:15 reads 07:00-07:12 (complete minutes, 2 minutes behind); the second at 07:30 reads 07:13-07:27
    for first, last in ((0, 13), (13, 28)):
        cw_stub.add_response("get_metric_data", {"MetricDataResults": [{
            "Id": "m0", "Label": "train:loss", "Timestamps": minutes[first:last], "Values": values[first:last],
            "StatusCode": "Complete"}]}, {"MetricDataQueries": metric_query(), "StartTime": T0 + timedelta(minutes=first),
                                          "EndTime": T0 + timedelta(minutes=last), "ScanBy": "TimestampAscending"})
    sm_stub.activate()
    cw_stub.activate()
    clients = lh.Clients(s3=aws["s3"], events=aws["events"], sagemaker=sm, cloudwatch=cw)

    first = lh.evaluate_job(JOB, settings, clients, deadline=math.inf, now=S0 + 15 * 60)
    assert first["statuses"] == {"loss": "InProgress"} and first["result"] == "in progress"
    second = lh.evaluate_job(JOB, settings, clients, deadline=math.inf, now=S0 + 30 * 60)
    assert second["statuses"] == {"loss": "IssuesFound"}
    sm_stub.assert_no_pending_responses()
    cw_stub.assert_no_pending_responses()

    events = received(aws)
    assert [e["detail"]["ProfilerRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] for e in events] == [
        "InProgress", "IssuesFound"]
    issue = events[1]["detail"]["ProfilerRuleEvaluationStatuses"][0]
    assert issue["StatusDetails"] == ("RuleEvaluationConditionMet: Evaluation of the rule LossNotDecreasing at step 20 "
                                      "resulted in the condition being met\n")
    assert issue["LastModifiedTime"] == "2025-11-29T07:28:00Z"  # the end of the data read
    folder = f"output/{JOB}/rule-output/loss/evaluator-output"
    summary = json.loads(aws["s3"].get_object(Bucket=BUCKET, Key=f"{folder}/evaluation-summary.json")["Body"].read())
    [verdict] = summary["rules"][0]["Verdicts"]
    assert verdict["Rule"] == "LossNotDecreasing" and verdict["Verdict"] == "IssuesFound"
    report = json.loads(aws["s3"].get_object(Bucket=BUCKET, Key=f"{folder}/profiler-reports/LossNotDecreasing.json")
                        ["Body"].read())
    assert (report["RuleTriggered"], report["Violations"], report["Datapoints"]) == (1, 1, 28)
    assert report["RuleParameters"] == "metric:train:loss\nnum_steps:10\ndiff_percent:0.1\nincrease_threshold_percent:5.0"
    html = aws["s3"].get_object(Bucket=BUCKET, Key=f"{folder}/profiler-report.html")["Body"].read().decode()
    assert 'data-chart="training-metrics"' in html and "TrainingJobName=exp-llm-0001" in html
    assert len(load_state(aws["s3"])["metrics"]["series"]["train:loss"]) == 28


def test_metric_rules_alone_finish_with_the_job(aws):  # noqa: F811
    end = T0 + timedelta(minutes=5)
    settings = lh.Settings(family=JobFamily(job_name_prefix="exp-"), rules=[RuleConfig("stall", "StalledTraining",
                                                                     {"metric": "train:loss", "threshold": 1800})])
    sm = boto3.client("sagemaker", region_name=REGION)
    sm_stub = Stubber(sm)
    sm_stub.add_response("describe_training_job", describe("Completed", end), {"TrainingJobName": JOB})
    cw = boto3.client("cloudwatch", region_name=REGION)
    cw_stub = Stubber(cw)
    cw_stub.add_response("get_metric_data", {"MetricDataResults": [{
        "Id": "m0", "Timestamps": [T0 + timedelta(minutes=m) for m in range(5)], "Values": [1.0] * 5,
        "StatusCode": "Complete"}]}, {"MetricDataQueries": metric_query(), "StartTime": T0,
                                      "EndTime": end + timedelta(minutes=2), "ScanBy": "TimestampAscending"})
    sm_stub.activate()
    cw_stub.activate()
    clients = lh.Clients(s3=aws["s3"], events=aws["events"], sagemaker=sm, cloudwatch=cw)
    outcome = lh.evaluate_job(JOB, settings, clients, deadline=math.inf, now=S0 + 3600)
    assert outcome["result"] == "final" and outcome["statuses"] == {"stall": "NoIssuesFound"}
    assert load_state(aws["s3"])["final"] is True
