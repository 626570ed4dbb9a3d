"""End to end, offline: a loss that stops decreasing in CloudWatch (Stubber) gives IssuesFound in the RuleEvaluator
(moto S3 and EventBridge), and its verdict event gives exactly one RuleAlarm notification and one StopTrainingJob
(moto SNS and DynamoDB, SageMaker through the harness's Stubber)."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from typing import Any

import boto3
from botocore.stub import Stubber
from rule_alarm_world import EPOCH, OUTPUT_BUCKET, REGION, Harness, minutes

from cdk_sagemaker_debugger import rules
from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
from cdk_sagemaker_debugger.runtime.evaluator.contract_shared import JOB_FAMILY_ENV, JobFamily

JOB = "exp-bert-0007"
METRIC = "train:loss"


def evaluator_settings() -> lh.Settings:
    """What the RuleEvaluator construct puts in the function's environment for this rule."""
    rule = rules.LossNotDecreasing(metric=METRIC, num_steps=10, diff_percent=0.1)
    config = {"configuration_name": rule.name, "rule_to_invoke": rule.rule_to_invoke, "parameters": rule.parameters}
    return lh.Settings.from_env({JOB_FAMILY_ENV: JobFamily(job_name_prefix="exp-").to_json(),
                                 "RULES": json.dumps([config])})


def described(harness: Harness) -> dict[str, Any]:
    """The world's description of the job, with the MetricDefinitions the construct rendered and its training start."""
    description = harness.world.describe(JOB)
    description.pop("ProfilerRuleEvaluationStatuses")
    description["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": METRIC, "Regex": r"loss=([0-9.]+)"}]
    description["TrainingStartTime"] = EPOCH
    description["SecondaryStatusTransitions"] = [{"Status": "Training", "StartTime": EPOCH}]
    return description


def loss_metric(values: list[float]) -> dict[str, Any]:
    stamps = [EPOCH + timedelta(minutes=m) for m in range(len(values))]
    return {"MetricDataResults": [{"Id": "m0", "Label": METRIC, "Timestamps": stamps, "Values": values,
                                   "StatusCode": "Complete"}]}


def verdict_events(harness: Harness) -> tuple[Any, str]:
    """An EventBridge rule that copies the evaluator's events to a queue, as the verdict bus delivers them."""
    sqs = boto3.client("sqs", region_name=REGION)
    queue = sqs.create_queue(QueueName="verdicts")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    harness.clients.events.put_rule(Name="verdicts", EventPattern=json.dumps({"source": ["cdk-sagemaker-debugger"]}))
    harness.clients.events.put_targets(Rule="verdicts", Targets=[{"Id": "q", "Arn": arn}])
    return sqs, queue


def drain(sqs: Any, queue: str) -> list[dict[str, Any]]:
    messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
    for message in messages:
        sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    return [json.loads(m["Body"]) for m in messages]


def test_a_loss_that_stops_decreasing_notifies_once_and_stops_once(harness: Harness) -> None:
    harness.world.add(JOB, ())
    sqs, queue = verdict_events(harness)
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    sagemaker_stub = Stubber(sagemaker)
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    cloudwatch_stub = Stubber(cloudwatch)
    # 2.0 falling by 0.1 a minute to 1.1, then flat at 1.0: the check at step 20 finds no decrease since step 10
    values = [2.0 - 0.1 * m for m in range(10)] + [1.0] * 18
    for _run in range(2):  # the second run reads no new minute: no new event
        sagemaker_stub.add_response("describe_training_job", described(harness), {"TrainingJobName": JOB})
    cloudwatch_stub.add_response("get_metric_data", loss_metric(values), {
        "MetricDataQueries": [{"Id": "m0", "MetricStat": {
            "Metric": {"Namespace": "/aws/sagemaker/TrainingJobs", "MetricName": METRIC,
                       "Dimensions": [{"Name": "TrainingJobName", "Value": JOB}]},
            "Period": 60, "Stat": "Average"}, "ReturnData": True}],
        "StartTime": EPOCH, "EndTime": EPOCH + timedelta(minutes=28), "ScanBy": "TimestampAscending"})
    sagemaker_stub.activate()
    cloudwatch_stub.activate()
    clients = lh.Clients(s3=harness.clients.s3, events=harness.clients.events, sagemaker=sagemaker,
                         cloudwatch=cloudwatch)

    now = EPOCH.timestamp() + minutes(30)
    first = lh.evaluate_job(JOB, evaluator_settings(), clients, deadline=math.inf, now=now)
    assert first["statuses"] == {"LossNotDecreasing": "IssuesFound"} and first["published"] == 1
    again = lh.evaluate_job(JOB, evaluator_settings(), clients, deadline=math.inf, now=now + 30)
    assert again["published"] == 0
    sagemaker_stub.assert_no_pending_responses()
    cloudwatch_stub.assert_no_pending_responses()

    [event] = drain(sqs, queue)
    harness.clock.advance(minutes(30))
    harness.invoke(event)
    harness.invoke(event)  # EventBridge delivers at least once
    harness.drain()

    assert harness.notifications() == {(JOB, "LossNotDecreasing", "IssuesFound"): 1}
    assert harness.stop_calls == [(JOB, ("LossNotDecreasing", "IssuesFound"), "stopped")]
    email = json.loads(harness.published[0]["Message"])["email"]
    assert "RuleEvaluationConditionMet: Evaluation of the rule LossNotDecreasing at step 20" in email
    assert f"s3://{OUTPUT_BUCKET}/output/{JOB}/rule-output/LossNotDecreasing/" in email
