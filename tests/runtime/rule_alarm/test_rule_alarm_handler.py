"""Behaviour of the RuleAlarm handler, one scenario per test (SageMaker through the Stubber, the rest on moto)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from rule_alarm_world import (
    ACCOUNT,
    OUTPUT_BUCKET,
    REGION,
    SCHEDULED_EVENT,
    AwsClients,
    Harness,
    create_table,
    evaluator_event,
    minutes,
)

from cdk_sagemaker_debugger.runtime.evaluator.engine import RuleConfig
from cdk_sagemaker_debugger.runtime.evaluator.reading import evaluate_store
from cdk_sagemaker_debugger.runtime.evaluator.report import summary
from cdk_sagemaker_debugger.runtime.evaluator.storage import LocalStore
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import JobSpec, write_job
from cdk_sagemaker_debugger.runtime.rule_alarm.alarm import RuleAlarmProcessor
from cdk_sagemaker_debugger.runtime.rule_alarm.contract_shared import JobFamily
from cdk_sagemaker_debugger.runtime.rule_alarm.settings import Settings

RULES = ("LowGPUUtilization", "CPUBottleneck")


def _start(harness: Harness, name: str = "exp-resnet-0042") -> str:
    harness.world.add(name, RULES)
    return name


def _email(params: dict[str, Any]) -> str:
    return json.loads(params["Message"])["email"]


def test_issues_found_notifies_once_stops_once_and_announces(harness: Harness) -> None:
    job = _start(harness)
    harness.invoke(harness.world.state_change_event(job))
    assert harness.published == []  # nothing to report yet

    harness.clock.advance(minutes(20))
    harness.world.set_rule(job, "LowGPUUtilization", "IssuesFound")
    result = harness.invoke(harness.world.state_change_event(job))

    assert result == {"outcome": "processed", "notified": 1, "stop_calls": 1, "refused": 0, "job": job}
    assert harness.notifications() == {(job, "LowGPUUtilization", "IssuesFound"): 1}
    assert harness.stop_calls == [(job, ("LowGPUUtilization", "IssuesFound"), "stopped")]
    assert harness.world.jobs[job].status == "Stopping"
    params = harness.published[0]
    assert params["Subject"] == f"[IssuesFound] LowGPUUtilization on {job}"
    body = _email(params)
    assert "Rule LowGPUUtilization found issues on SageMaker training job exp-resnet-0042." in body
    assert "When:          2026-11-29 10:20:00 UTC" in body
    assert "RuleEvaluationConditionMet: Evaluation of the rule LowGPUUtilization at step 1200" in body
    assert "StopTrainingJob was called; the job is stopping." in body
    assert f"https://{REGION}.console.aws.amazon.com/sagemaker/home?region={REGION}#/jobs/{job}" in body
    assert f"s3://ml-artifacts-123456789012/output/{job}/rule-output/LowGPUUtilization/" in body
    assert json.loads(params["Message"])["sms"] == (
        f"IssuesFound: rule LowGPUUtilization on {job} at 2026-11-29 10:20:00 UTC. Training is being stopped."
    )
    assert harness.announced == [
        {
            "AlarmId": "Stack/Alarm",
            "TrainingJobName": job,
            "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{job}",
            "TrainingJobStatus": "InProgress",
            "RuleConfigurationName": "LowGPUUtilization",
            "RuleEvaluationStatus": "IssuesFound",
            # one line from the alarm on (SageMaker's text ends with a line break)
            "StatusDetails": "RuleEvaluationConditionMet: Evaluation of the rule LowGPUUtilization at step 1200 "
            "resulted in the condition being met",
            "LastModifiedTime": "2026-11-29T10:20:00+00:00",
            "ReportedBy": "SageMaker",
            "ConsoleUrl": f"https://{REGION}.console.aws.amazon.com/sagemaker/home?region={REGION}#/jobs/{job}",
            "RuleReportS3Uri": f"s3://ml-artifacts-123456789012/output/{job}/rule-output/LowGPUUtilization/",
            "StopOutcome": "requested",
        }
    ]
    items = {item["sk"]: item for item in harness.ledger_items()}
    assert items[job]["pk"] == "watched"
    transition = items["transition#IssuesFound#LowGPUUtilization"]
    assert transition["state"] == "done"
    assert transition["stop_outcome"] == "requested"
    assert int(transition["expires_at"]) == int(harness.clock.now) + 90 * 86400


def test_repeated_and_duplicated_events_do_not_notify_again(harness: Harness) -> None:
    job = _start(harness)
    harness.world.set_rule(job, "LowGPUUtilization", "IssuesFound")
    for _ in range(3):  # SageMaker's duplicates of one change
        harness.invoke(harness.world.state_change_event(job))
    harness.world.set_rule(job, "CPUBottleneck", "NoIssuesFound")
    harness.world.settle(job)
    harness.invoke(harness.world.state_change_event(job))  # a later change repeats the old IssuesFound

    assert harness.notifications() == {(job, "LowGPUUtilization", "IssuesFound"): 1}
    assert len(harness.stop_calls) == 1
    assert len(harness.announced) == 1
    assert harness.log_lines().count("skipped transition: already handled") == 3


def test_verdict_after_the_job_completed_notifies_without_stopping(harness: Harness) -> None:
    job = _start(harness)
    harness.world.end(job, "Completed")
    harness.world.set_rule(job, "LowGPUUtilization", "IssuesFound")
    harness.invoke(harness.world.state_change_event(job))

    assert harness.notifications() == {(job, "LowGPUUtilization", "IssuesFound"): 1}
    assert harness.stop_calls == []
    assert "The job was no longer running; nothing to stop." in _email(harness.published[0])


def test_job_already_stopping_counts_as_success(harness: Harness) -> None:
    job = _start(harness)
    harness.world.set_rule(job, "LowGPUUtilization", "IssuesFound")
    harness.world.set_rule(job, "CPUBottleneck", "IssuesFound")
    # another invocation stopped the job between this one's Describe and its StopTrainingJob
    harness.run_nested_at("StopTrainingJob", harness.world.state_change_event(job))
    harness.invoke(harness.world.state_change_event(job))

    assert harness.retry_queue == []
    assert sorted(harness.notifications().values()) == [1, 1]
    outcomes = sorted(item.get("stop_outcome") for item in harness.ledger_items() if item["sk"].startswith("transition#"))
    assert outcomes == ["already-ending", "requested"]


def test_events_outside_the_prefix_are_dropped_before_any_call(harness: Harness) -> None:
    harness.world.add("prod-resnet-1", RULES)
    harness.world.set_rule("prod-resnet-1", "LowGPUUtilization", "IssuesFound")
    result = harness.invoke(harness.world.state_change_event("prod-resnet-1"))

    assert result == {"outcome": "dropped", "reason": "job outside the watched prefix"}
    assert harness.published == [] and harness.stop_calls == [] and harness.ledger_items() == []


def test_unknown_job_is_dropped(harness: Harness) -> None:
    result = harness.invoke(harness.world.state_change_event("exp-never-created"))
    assert result == {"outcome": "dropped", "reason": "training job not found"}
    assert harness.ledger_items() == []


def _summary_key(job: str, rule: str) -> str:
    return f"output/{job}/rule-output/{rule}/evaluator-output/evaluation-summary.json"


def test_evaluator_statuses_are_acted_on_and_merged_with_describe(harness: Harness) -> None:
    job = _start(harness)
    event = harness.evaluator_verdict(
        job,
        [
            {
                "RuleConfigurationName": "StepOutlier",
                "RuleEvaluationStatus": "IssuesFound",
                "StatusDetails": "StepOutlier: 14 steps above mean + 3 stddev",
                "LastModifiedTime": "1764412925000",
            },
            {"RuleConfigurationName": "BatchSize", "RuleEvaluationStatus": "NoIssuesFound"},
            {"RuleConfigurationName": 7, "RuleEvaluationStatus": "IssuesFound"},  # unusable entry, logged
        ],
    )
    harness.invoke(event)
    harness.invoke(event)  # EventBridge may deliver twice

    assert harness.notifications() == {(job, "StepOutlier", "IssuesFound"): 1}
    body = _email(harness.published[0])
    # the time is when the evaluator wrote its summary (the event's LastModifiedTime is not trusted)
    written = harness.clients.s3.head_object(Bucket=OUTPUT_BUCKET, Key=_summary_key(job, "StepOutlier"))
    assert f"When:          {written['LastModified']:%Y-%m-%d %H:%M:%S} UTC" in body
    assert "StepOutlier: 14 steps above mean + 3 stddev" in body  # the summary's details
    assert "Reported by:   RuleEvaluator" in body
    assert harness.log_lines().count("ignored malformed rule status entry") == 2


def test_sweep_catches_a_change_that_emitted_no_event_and_then_stops_watching(harness: Harness) -> None:
    job = _start(harness)
    harness.invoke(harness.world.state_change_event(job))
    harness.world.set_rule(job, "CPUBottleneck", "IssuesFound")  # no event for this change
    harness.clock.advance(60)
    assert harness.invoke(SCHEDULED_EVENT)["released"] == 0
    assert harness.notifications() == {(job, "CPUBottleneck", "IssuesFound"): 1}

    harness.world.settle(job)
    harness.world.set_rule(job, "LowGPUUtilization", "NoIssuesFound")
    result = harness.invoke(SCHEDULED_EVENT)
    assert result["released"] == 1
    assert [item for item in harness.ledger_items() if item["pk"] == "watched"] == []
    assert harness.notifications() == {(job, "CPUBottleneck", "IssuesFound"): 1}


def test_sweep_keeps_watching_while_the_report_is_still_running(harness: Harness) -> None:
    job = _start(harness)
    harness.invoke(harness.world.state_change_event(job))
    harness.world.end(job, "Completed")  # ProfilerReport often finishes minutes after the job
    assert harness.invoke(SCHEDULED_EVENT)["released"] == 0
    harness.world.set_rule(job, "LowGPUUtilization", "IssuesFound")
    harness.world.set_rule(job, "CPUBottleneck", "NoIssuesFound")
    assert harness.invoke(SCHEDULED_EVENT)["released"] == 1
    assert harness.notifications() == {(job, "LowGPUUtilization", "IssuesFound"): 1}
    assert harness.stop_calls == []


def test_crash_before_publishing_is_resumed_by_the_sweep_after_the_lease(harness: Harness) -> None:
    job = _start(harness)
    harness.world.set_rule(job, "LowGPUUtilization", "IssuesFound")
    harness.crash_at("Publish")
    harness.invoke(harness.world.state_change_event(job))
    assert harness.published == [] and len(harness.stop_calls) == 1

    harness.invoke(SCHEDULED_EVENT)  # the lease (remaining time + margin) has not run out yet
    assert harness.published == []
    harness.clock.advance(120 + 60 + 1)
    harness.invoke(SCHEDULED_EVENT)
    assert harness.notifications() == {(job, "LowGPUUtilization", "IssuesFound"): 1}
    assert len(harness.stop_calls) == 1  # the stop was recorded before the crash
    assert "resuming transition after an earlier attempt failed" in harness.log_lines()


def test_crash_after_stop_call_does_not_stop_twice(harness: Harness) -> None:
    job = _start(harness)
    harness.world.set_rule(job, "LowGPUUtilization", "IssuesFound")
    harness.crash_at("StopTrainingJob:after")
    harness.invoke(harness.world.state_change_event(job))
    harness.clock.advance(minutes(5))
    harness.invoke(SCHEDULED_EVENT)

    assert len(harness.stop_calls) == 1
    assert harness.notifications() == {(job, "LowGPUUtilization", "IssuesFound"): 1}
    assert "The job was no longer running; nothing to stop." in _email(harness.published[0])


def test_crash_between_publish_and_ledger_write_resends_rather_than_loses(harness: Harness) -> None:
    """The one documented window: SNS has no idempotency key, so a kill right after Publish repeats the message."""
    job = _start(harness)
    harness.world.set_rule(job, "LowGPUUtilization", "IssuesFound")
    harness.crash_at("UpdateItem", lambda params: "message_id" in params["ExpressionAttributeNames"].values())
    harness.invoke(harness.world.state_change_event(job))
    harness.clock.advance(minutes(5))
    harness.invoke(SCHEDULED_EVENT)

    assert harness.notifications() == {(job, "LowGPUUtilization", "IssuesFound"): 2}
    assert len(harness.stop_calls) == 1


def test_throttled_publish_releases_the_lease_and_raises_for_a_retry(harness: Harness) -> None:
    job = _start(harness)
    harness.world.set_rule(job, "LowGPUUtilization", "IssuesFound")
    harness.fail_at("Publish")
    event = harness.world.state_change_event(job)
    harness.invoke(event)
    assert harness.retry_queue == [event]
    assert harness.published == []

    harness.invoke(harness.retry_queue.pop())  # Lambda's retry, no lease to wait for
    assert harness.notifications() == {(job, "LowGPUUtilization", "IssuesFound"): 1}
    assert len(harness.stop_calls) == 1


def test_throttled_describe_raises_so_the_event_is_kept(harness: Harness) -> None:
    job = _start(harness)
    harness.fail_at("DescribeTrainingJob")
    assert harness.invoke(harness.world.state_change_event(job)) is None
    assert len(harness.retry_queue) == 1
    assert harness.unexpected == []


def test_an_invocation_that_outlives_its_lease_stops_before_notifying(harness: Harness) -> None:
    """Cannot happen in Lambda (the lease outlasts the function timeout); if clocks ever disagree, the ledger write
    after the stop catches it, and the only extra effect is a StopTrainingJob call SageMaker refuses."""
    job = _start(harness)
    harness.invoke(harness.world.state_change_event(job))
    harness.world.set_rule(job, "CPUBottleneck", "IssuesFound")
    harness.run_nested_at("StopTrainingJob", SCHEDULED_EVENT, stall_seconds=minutes(10))
    harness.invoke(harness.world.state_change_event(job))

    assert harness.notifications() == {(job, "CPUBottleneck", "IssuesFound"): 1}
    assert harness.stop_calls == [
        (job, ("CPUBottleneck", "IssuesFound"), "stopped"),
        (job, ("CPUBottleneck", "IssuesFound"), "refused"),
    ]
    assert harness.world.jobs[job].status == "Stopping"
    assert "lost the lease on a transition; the new owner finishes it" in harness.log_lines()


def test_rule_names_and_statuses_filter(aws: AwsClients) -> None:
    settings = {"rule_names": frozenset({"CPUBottleneck"}), "statuses": frozenset({"IssuesFound", "Error"})}
    with Harness(aws, settings=settings) as harness:
        job = _start(harness)
        harness.world.set_rule(job, "LowGPUUtilization", "IssuesFound")
        harness.world.set_rule(job, "CPUBottleneck", "Error")
        harness.invoke(harness.world.state_change_event(job))
        assert harness.notifications() == {(job, "CPUBottleneck", "Error"): 1}
        assert harness.stop_calls == []  # StopTraining not configured
        assert "Action:" not in _email(harness.published[0])
        assert harness.published[0]["Subject"] == f"[Error] CPUBottleneck on {job}"


def test_an_error_status_notifies_but_does_not_stop(aws: AwsClients) -> None:
    with Harness(aws, settings={"statuses": frozenset({"IssuesFound", "Error"}), "stop_prefix": "exp-"}) as harness:
        job = _start(harness)
        harness.world.set_rule(job, "CPUBottleneck", "Error")
        harness.invoke(harness.world.state_change_event(job))
        assert harness.notifications() == {(job, "CPUBottleneck", "Error"): 1}
        assert harness.stop_calls == []
        assert "Rule CPUBottleneck could not evaluate" in _email(harness.published[0])
        assert "Action:" not in _email(harness.published[0])

        harness.world.set_rule(job, "LowGPUUtilization", "IssuesFound")
        harness.invoke(harness.world.state_change_event(job))
        assert harness.stop_calls == [(job, ("LowGPUUtilization", "IssuesFound"), "stopped")]


def test_stop_prefix_narrower_than_the_watched_prefix(aws: AwsClients) -> None:
    with Harness(aws, settings={"stop_prefix": "exp-gpu-"}) as harness:
        for name in ("exp-gpu-1", "exp-cpu-1"):
            _start(harness, name)
            harness.world.set_rule(name, "LowGPUUtilization", "IssuesFound")
            harness.invoke(harness.world.state_change_event(name))
        assert [call[0] for call in harness.stop_calls] == ["exp-gpu-1"]
        assert sum(harness.notifications().values()) == 2
        bodies = {p["MessageAttributes"]["job"]["StringValue"]: _email(p) for p in harness.published}
        assert "outside the prefix this alarm may stop" in bodies["exp-cpu-1"]


def test_requests_match_the_sagemaker_and_sns_models_exactly(aws: AwsClients) -> None:
    """Classic Stubber use: every call, in order, with exact parameters, validated against the service models."""
    settings = Settings(
        table_name=create_table(aws.dynamodb),
        topic_arn=f"arn:aws:sns:{REGION}:{ACCOUNT}:rule-alarm",
        family=JobFamily(job_name_prefix="resnet-"),
        alarm_id="Stack/Alarm",
        stop_prefix="resnet-",
    )
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    sns = boto3.client("sns", region_name=REGION)
    sample = _sample_description()
    processor = RuleAlarmProcessor(settings, sagemaker=sagemaker, sns=sns, events=aws.events, dynamodb=aws.dynamodb)
    with Stubber(sagemaker) as sm_stub, Stubber(sns) as sns_stub:
        sm_stub.add_response("describe_training_job", sample, {"TrainingJobName": "resnet-exp-0042"})
        sm_stub.add_response("stop_training_job", {}, {"TrainingJobName": "resnet-exp-0042"})
        url = f"https://{REGION}.console.aws.amazon.com/sagemaker/home?region={REGION}#/jobs/resnet-exp-0042"
        email = (
            "Rule LowGPUUtilization found issues on SageMaker training job resnet-exp-0042.\n\n"
            "Training job:  resnet-exp-0042 (InProgress, Training)\n"
            "Rule:          LowGPUUtilization\n"
            "Status:        IssuesFound\n"
            "When:          2025-11-29 10:42:05 UTC\n"
            "Details:       machine-reported: RuleEvaluationConditionMet: Evaluation of the rule LowGPUUtilization at step 1200 "
            "resulted in the condition being met\n"
            "Action:        StopTrainingJob was called; the job is stopping.\n"
            f"Console:       {url}\n"
            "Rule report:   s3://ml-artifacts-123456789012/output/resnet-exp-0042/rule-output/LowGPUUtilization/\n"
            "Reported by:   SageMaker\n"
        )
        sms = "IssuesFound: rule LowGPUUtilization on resnet-exp-0042 at 2025-11-29 10:42:05 UTC. Training is being stopped."
        sns_stub.add_response(
            "publish",
            {"MessageId": "5f9c1e2a-1111-2222-3333-444455556666"},
            {
                "TopicArn": settings.topic_arn,
                "Subject": "[IssuesFound] LowGPUUtilization on resnet-exp-0042",
                "MessageStructure": "json",
                "Message": json.dumps({"default": email, "email": email, "sms": sms}),
                "MessageAttributes": {
                    "job": {"DataType": "String", "StringValue": "resnet-exp-0042"},
                    "rule": {"DataType": "String", "StringValue": "LowGPUUtilization"},
                    "status": {"DataType": "String", "StringValue": "IssuesFound"},
                },
            },
        )
        event = {
            "source": "aws.sagemaker",
            "detail-type": "SageMaker Training Job State Change",
            "detail": {"TrainingJobName": "resnet-exp-0042", "TrainingJobStatus": "InProgress"},
        }
        result = processor.handle(event)
        sm_stub.assert_no_pending_responses()
        sns_stub.assert_no_pending_responses()
    assert result["notified"] == 1 and result["stop_calls"] == 1


def _sample_description() -> dict[str, Any]:
    """The reference sample state-change detail, as DescribeTrainingJob returns it (datetimes, not strings)."""
    from datetime import datetime, timezone

    def at(ms: int) -> datetime:
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)

    return {
        "TrainingJobName": "resnet-exp-0042",
        "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/resnet-exp-0042",
        "TrainingJobStatus": "InProgress",
        "SecondaryStatus": "Training",
        "ModelArtifacts": {"S3ModelArtifacts": ""},
        "AlgorithmSpecification": {"TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": "s3://ml-artifacts-123456789012/output"},
        "ResourceConfig": {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "CreationTime": at(1764410000000),
        "ProfilerRuleEvaluationStatuses": [
            {
                "RuleConfigurationName": "LowGPUUtilization",
                "RuleEvaluationJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:processing-job/resnet-exp-0042-lowgpuutilization-9f3c2b1a",
                "RuleEvaluationStatus": "IssuesFound",
                "StatusDetails": "RuleEvaluationConditionMet: Evaluation of the rule LowGPUUtilization at step 1200 "
                "resulted in the condition being met\n",
                "LastModifiedTime": at(1764412925000),
            },
            {
                "RuleConfigurationName": "CPUBottleneck",
                "RuleEvaluationJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:processing-job/resnet-exp-0042-cpubottleneck-41d7e0c2",
                "RuleEvaluationStatus": "InProgress",
                "LastModifiedTime": at(1764410500000),
            },
        ],
    }


@pytest.mark.parametrize("status", ["Stopped", "Failed"])
def test_finished_job_without_rules_is_released_by_the_sweep(harness: Harness, status: str) -> None:
    harness.world.add("exp-plain", ())
    harness.invoke(harness.world.state_change_event("exp-plain"))
    harness.world.jobs["exp-plain"].status = status
    assert harness.invoke(SCHEDULED_EVENT)["released"] == 1


def test_the_email_says_why_what_to_try_and_links_the_html_report(harness: Harness) -> None:
    """The e-mail of an evaluator verdict carries the evaluator's reason and what to try, read from the summary the
    evaluator wrote (the real one, from a real evaluation), and a console link to the HTML report beside it."""
    with tempfile.TemporaryDirectory() as tmp:
        root = write_job(Path(tmp) / "profiler-output", JobSpec(minutes=3, gpus=2, cores=4, gpu_util=lambda *a: 20.0))
        ev = evaluate_store(LocalStore(root), [RuleConfig("LowGPUUtilization", "LowGPUUtilization", {})],
                            read_workers=1)
    results = ev.results(final=True)
    assert results[0].status == "IssuesFound"
    job = _start(harness)
    entry = {"RuleConfigurationName": "LowGPUUtilization", "RuleEvaluationStatus": "IssuesFound",
             "StatusDetails": results[0].status_details, "LastModifiedTime": "1764412925000"}
    key = harness.write_summary(job, "LowGPUUtilization", "IssuesFound",
                                body=json.dumps(summary(results, ev.diagnostics())).encode())
    harness.invoke(evaluator_event(job, [entry]))

    body = _email(harness.published[0])
    assert "Why (machine-reported by the evaluator):\n  - LowGPUUtilization: GPU utilisation low or fluctuating on algo-1/gpu0 (p95 20" in body
    assert "What to try:\n  - LowGPUUtilization: Feed the GPUs faster" in body
    html_key = key.rsplit("/", 1)[0] + "/profiler-report.html"
    assert (f"HTML report:   https://{REGION}.console.aws.amazon.com/s3/object/{OUTPUT_BUCKET}?region={REGION}"
            f"&prefix={html_key}") in body
    assert body.index("Why (") < body.index("Training job:")  # the reason first, the facts after
    assert "LowGPUUtilization: GPU utilisation low" in json.loads(harness.published[0]["Message"])["sms"]


def test_a_damaged_summary_still_sends_the_email(harness: Harness) -> None:
    job = _start(harness)
    entry = {"RuleConfigurationName": "LowGPUUtilization", "RuleEvaluationStatus": "IssuesFound"}
    summary = {"rules": [{"RuleConfigurationName": "LowGPUUtilization", "RuleEvaluationStatus": "IssuesFound",
                          "Verdicts": [{"Rule": "x\u0007" * 500, "Verdict": "IssuesFound", "Reason": 7,
                                        "WhatToTry": "not a list"}, "junk"]}]}
    harness.write_summary(job, "LowGPUUtilization", "IssuesFound", body=json.dumps(summary).encode())
    harness.invoke(evaluator_event(job, [entry]))
    body = _email(harness.published[0])
    assert "Rule LowGPUUtilization found issues" in body and "What to try" not in body and "\u0007" not in body
