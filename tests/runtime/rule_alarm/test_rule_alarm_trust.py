"""What the RuleAlarm handler trusts: evaluator verdicts only when the evaluator's report confirms them and only for
watched rules, events only from its own account, jobs only when they run as the family's execution role, and at most
``max_messages_per_job`` notifications per job. SageMaker through the Stubber, the rest (S3 included) on moto."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterator
from typing import Any

import pytest
from rule_alarm_world import ACCOUNT, SCHEDULED_EVENT, AwsClients, Harness, evaluator_event

from cdk_sagemaker_debugger.constructs._cdk import layout as _common
from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as evaluator_handler
from cdk_sagemaker_debugger.runtime.evaluator import lease as evaluator_lease
from cdk_sagemaker_debugger.runtime.evaluator import report as evaluator_report
from cdk_sagemaker_debugger.runtime.evaluator import state as evaluator_state
from cdk_sagemaker_debugger.runtime.rule_alarm import reports
from cdk_sagemaker_debugger.runtime.rule_alarm.contract_shared import JobFamily
from cdk_sagemaker_debugger.runtime.rule_alarm.events import parse_time
from cdk_sagemaker_debugger.runtime.rule_alarm.settings import Settings

FAMILY_ROLE = f"arn:aws:iam::{ACCOUNT}:role/team-a-training"
ISSUES = {"RuleConfigurationName": "StepOutlier", "RuleEvaluationStatus": "IssuesFound"}


@pytest.fixture
def guarded(aws: AwsClients) -> Iterator[Harness]:
    settings = {"stop_prefix": "exp-", "account_id": ACCOUNT,
                "family": JobFamily(job_name_prefix="exp-", execution_role_arns=(FAMILY_ROLE,)),
                "known_rules": frozenset({"StepOutlier", "LowGPUUtilization"})}
    with Harness(aws, settings=settings) as running:
        yield running


def _family_job(harness: Harness, name: str = "exp-resnet-1", rules: tuple[str, ...] = ()) -> str:
    harness.world.add(name, rules).role_arn = FAMILY_ROLE
    return name


def test_a_verdict_without_a_report_is_not_acted_on(guarded: Harness) -> None:
    job = _family_job(guarded)
    outcome = guarded.invoke(evaluator_event(job, [ISSUES]))  # published by someone, but the evaluator wrote nothing

    assert outcome is not None and outcome["outcome"] == "processed"
    assert guarded.published == [] and guarded.stop_calls == [] and guarded.announced == []
    assert "ignored evaluator verdict its report does not confirm" in guarded.log_lines()


def test_a_verdict_the_report_contradicts_is_not_acted_on(guarded: Harness) -> None:
    job = _family_job(guarded)
    guarded.write_summary(job, "StepOutlier", "NoIssuesFound")
    guarded.invoke(evaluator_event(job, [ISSUES]))
    assert guarded.published == [] and guarded.stop_calls == []

    guarded.invoke(guarded.evaluator_verdict(job, [ISSUES]))  # the evaluator's own verdict, with its report
    assert guarded.notifications() == {(job, "StepOutlier", "IssuesFound"): 1}
    assert [name for name, _transition, _outcome in guarded.stop_calls] == [job]


@pytest.mark.parametrize("body", [b"{not json", b"[]", b"{}", json.dumps({"rules": [{"RuleConfigurationName": 7}]}).encode(),
                                  b" " * (reports.MAX_SUMMARY_BYTES + 1)])
def test_an_unusable_report_confirms_nothing(guarded: Harness, body: bytes) -> None:
    job = _family_job(guarded)
    guarded.write_summary(job, "StepOutlier", "IssuesFound", body=body)
    guarded.invoke(evaluator_event(job, [ISSUES]))
    assert guarded.published == [] and guarded.stop_calls == [] and guarded.retry_queue == []


def test_verdicts_for_rules_the_alarm_does_not_watch_are_ignored(guarded: Harness) -> None:
    job = _family_job(guarded)
    forged_rule = {"RuleConfigurationName": "Forged-1", "RuleEvaluationStatus": "IssuesFound"}
    guarded.invoke(guarded.evaluator_verdict(job, [forged_rule]))  # even with a report beside it
    assert guarded.published == [] and guarded.stop_calls == []
    assert "ignored evaluator verdict for a rule the alarm does not watch" in guarded.log_lines()


@pytest.mark.parametrize("account", ["210987654321", None, 12])
def test_events_from_another_account_are_dropped_before_any_call(guarded: Harness, account: Any) -> None:
    job = _family_job(guarded, rules=("LowGPUUtilization",))
    guarded.world.set_rule(job, "LowGPUUtilization", "IssuesFound")
    for event in (guarded.evaluator_verdict(job, [ISSUES]), guarded.world.state_change_event(job)):
        event = {**event, "account": account} if account is not None else {k: v for k, v in event.items() if k != "account"}
        assert guarded.invoke(event)["outcome"] == "dropped"
    assert guarded.published == [] and guarded.stop_calls == [] and guarded.ledger_items() == []


def test_a_job_that_only_borrows_the_name_is_neither_stopped_nor_notified(guarded: Harness) -> None:
    job = guarded.world.add("exp-resnet-1", ("LowGPUUtilization",))  # someone else's job, named like the family's
    job.role_arn = f"arn:aws:iam::{ACCOUNT}:role/someone-else"
    guarded.world.set_rule(job.name, "LowGPUUtilization", "IssuesFound")
    for event in (guarded.world.state_change_event(job.name), guarded.evaluator_verdict(job.name, [ISSUES])):
        outcome = guarded.invoke(event)
        assert outcome == {"outcome": "dropped", "reason": "the job does not run as the family's execution role"}
    assert guarded.published == [] and guarded.stop_calls == [] and guarded.ledger_items() == []


def test_the_sweep_lets_go_of_a_job_that_changed_hands(guarded: Harness) -> None:
    job = _family_job(guarded, rules=("LowGPUUtilization",))
    guarded.invoke(guarded.world.state_change_event(job))
    assert [item["sk"] for item in guarded.ledger_items() if item["pk"] == "watched"] == [job]
    guarded.world.jobs[job].role_arn = f"arn:aws:iam::{ACCOUNT}:role/someone-else"  # a new job under the old name
    guarded.world.set_rule(job, "LowGPUUtilization", "IssuesFound")
    guarded.invoke(SCHEDULED_EVENT)
    assert guarded.published == [] and guarded.stop_calls == []
    assert [item for item in guarded.ledger_items() if item["pk"] == "watched"] == []


def test_notifications_per_job_stop_at_the_cap_but_the_stop_does_not(aws: AwsClients) -> None:
    rules = ("R1", "R2", "R3")
    with Harness(aws, settings={"stop_prefix": "exp-", "max_messages_per_job": 2}) as harness:
        job = harness.world.add("exp-resnet-1", rules).name
        for rule in rules:
            harness.world.set_rule(job, rule, "IssuesFound")
        harness.invoke(harness.world.state_change_event(job))
        harness.invoke(SCHEDULED_EVENT)

        assert sum(harness.notifications().values()) == 2 and len(harness.announced) == 2
        assert [outcome for _name, _transition, outcome in harness.stop_calls] == ["stopped"]
        transitions = [item for item in harness.ledger_items() if item["sk"].startswith("transition#")]
        assert sorted(item["state"] for item in transitions) == ["done", "done", "done"]
        assert sorted(item["message_id"] == "capped" for item in transitions) == [False, False, True]
        assert "not notifying: the job reached its message cap" in harness.log_lines()
        assert harness.retry_queue == []


def test_an_overflowing_timestamp_in_an_evaluator_event_is_not_used(guarded: Harness) -> None:
    """Valid ISO 8601 whose UTC equivalent is past year 9999: the event's time is not read at all (the time is when
    the evaluator wrote its summary), and the verdicts still count."""
    job = _family_job(guarded)
    entries = [
        {**ISSUES, "LastModifiedTime": "9999-12-31T23:59:59-05:00"},
        {"RuleConfigurationName": "LowGPUUtilization", "RuleEvaluationStatus": "IssuesFound",
         "LastModifiedTime": "0001-01-01T00:00:00+14:00"},
    ]
    guarded.invoke(guarded.evaluator_verdict(job, entries))

    assert guarded.retry_queue == [] and guarded.unexpected == []
    assert guarded.notifications() == {(job, "StepOutlier", "IssuesFound"): 1, (job, "LowGPUUtilization", "IssuesFound"): 1}
    assert not any("time not reported" in json.loads(params["Message"])["email"] for params in guarded.published)


def test_a_directly_invoked_evaluator_event_only_makes_the_alarm_read_the_evaluators_report(guarded: Harness) -> None:
    """lambda:InvokeFunction delivers any event, bypassing the verdict bus. Its status, details and time are ignored:
    the alarm reads the evaluator's summary and reports what the evaluator wrote, or nothing."""
    job = _family_job(guarded, "exp-direct-invoke-1")
    phishing = {**ISSUES, "StatusDetails": "Your job was stopped. Re-enter your credentials at https://evil.example",
                "LastModifiedTime": "2001-01-01T00:00:00Z"}
    guarded.invoke(evaluator_event(job, [phishing]))  # nothing written by the evaluator: nothing happens
    assert guarded.published == [] and guarded.stop_calls == [] and guarded.announced == []

    guarded.write_summary(job, "StepOutlier", "IssuesFound", details="StepOutlier: 14 steps above mean + 3 stddev")
    guarded.invoke(evaluator_event(job, [phishing]))  # the evaluator's verdict exists: it is reported, in its words
    (message,) = [json.loads(params["Message"]) for params in guarded.published]
    assert "StepOutlier: 14 steps above mean + 3 stddev" in message["email"]
    assert "evil.example" not in json.dumps(message) and "2001-01-01" not in message["email"]
    (announced,) = guarded.announced
    assert "evil.example" not in json.dumps(announced)

    claimed_error = {"RuleConfigurationName": "StepOutlier", "RuleEvaluationStatus": "Error"}
    guarded.invoke(evaluator_event(job, [claimed_error]))  # a claim the report contradicts changes nothing
    assert len(guarded.published) == 1 and len(guarded.stop_calls) == 1


@pytest.mark.parametrize("text", ["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+14:00"])
def test_parse_time_gives_none_for_times_without_a_utc_equivalent(text: str) -> None:
    assert parse_time(text) is None
    assert parse_time("2026-11-29T10:42:05+02:00").isoformat() == "2026-11-29T08:42:05+00:00"


def test_settings_read_the_trust_environment() -> None:
    settings = Settings.from_environment({
        "TABLE_NAME": "t", "TOPIC_ARN": "arn:aws:sns:us-east-1:1:t", "JOB_FAMILY": json.dumps({"job_name_prefix": "exp-", "execution_role_arns": [FAMILY_ROLE]}), "ALARM_ID": "S/A",
        "ACCOUNT_ID": ACCOUNT, "KNOWN_RULES": '["A", "B"]',
        "MAX_MESSAGES_PER_JOB": "7",
    })
    assert (settings.account_id, settings.family.execution_role_arns) == (ACCOUNT, (FAMILY_ROLE,))
    assert settings.known_rules == frozenset({"A", "B"}) and settings.max_messages_per_job == 7


def test_the_alarm_reads_where_the_evaluator_writes() -> None:
    """The two runtime packages cannot import each other; their shared layout is checked here, with the constructs'."""
    assert reports.REPORT_FOLDER == evaluator_handler.REPORT_FOLDER == _common.EVALUATOR_REPORT_FOLDER
    assert reports.SUMMARY_NAME == evaluator_report.SUMMARY_NAME == _common.EVALUATOR_SUMMARY_FILE
    assert reports.HTML_NAME == evaluator_report.HTML_NAME  # the e-mail links the HTML report beside the summary
    assert evaluator_state.STATE_TAGGING == "=".join(_common.EVALUATOR_STATE_TAG)  # what the lifecycle rule filters on
    state_key = evaluator_state.state_key("out/exp-1/rule-output", "0123456789abcdef")
    for key in (state_key, state_key + evaluator_lease.LEASE_SUFFIX):  # what the grants and the Deny cover
        assert fnmatch.fnmatchcase(key, f"out/exp-1/rule-output/{_common.EVALUATOR_STATE_FILE}")
    description = {"TrainingJobName": "exp-1", "OutputDataConfig": {"S3OutputPath": "s3://bucket/out/"}}
    assert reports.summary_location(description, "StepOutlier") == (
        "bucket", "out/exp-1/rule-output/StepOutlier/evaluator-output/evaluation-summary.json")
