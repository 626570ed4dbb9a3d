"""Event recognition, timestamp reading, message limits, ledger keys and settings of the RuleAlarm runtime."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest
from rule_alarm_world import SCHEDULED_EVENT, evaluator_event

from cdk_sagemaker_debugger.runtime.rule_alarm.events import (
    JobEvent,
    MalformedEvent,
    SweepRequest,
    parse_event,
    parse_time,
    statuses_from_description,
)
from cdk_sagemaker_debugger.runtime.rule_alarm.ledger import transition_key
from cdk_sagemaker_debugger.runtime.rule_alarm.message import MAX_SUBJECT_CHARS, subject_line
from cdk_sagemaker_debugger.runtime.rule_alarm.settings import Settings, SettingsError

STATE_CHANGE = {"source": "aws.sagemaker", "detail-type": "SageMaker Training Job State Change"}
UTC = timezone.utc


def test_state_change_event_yields_only_the_job_name() -> None:
    event = {**STATE_CHANGE, "detail": {"TrainingJobName": "exp-1", "ProfilerRuleEvaluationStatuses": "ignored"}}
    assert parse_event(event) == JobEvent(job_name="exp-1", source="aws.sagemaker")


def test_schedule_event_is_a_sweep() -> None:
    assert parse_event(SCHEDULED_EVENT) == SweepRequest()


def test_evaluator_event_keeps_usable_entries_and_reports_the_rest() -> None:
    event = evaluator_event(
        "exp-1",
        [
            {
                "RuleConfigurationName": "StepOutlier",
                "RuleEvaluationStatus": "IssuesFound",
                "StatusDetails": "x" * 5000,
            },
            {"RuleConfigurationName": "BatchSize", "RuleEvaluationStatus": "Exploded"},
            "not an object",
        ],
    )
    parsed = parse_event(event)
    assert isinstance(parsed, JobEvent)
    assert [(s.rule, s.status, s.reported_by) for s in parsed.evaluator_statuses] == [
        ("StepOutlier", "IssuesFound", "RuleEvaluator")
    ]
    assert parsed.evaluator_statuses[0].details == "x" * 1021 + "..."
    assert parsed.rejected_entries == (
        "entry 1: 'RuleEvaluationStatus' 'Exploded' of rule 'BatchSize' is not one of "
        "['Error', 'InProgress', 'IssuesFound', 'NoIssuesFound', 'Stopped', 'Stopping']",
        "entry 2: rule status entry is a str, expected a JSON object",
    )


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ([1, 2], "event is a list, expected a JSON object"),
        (
            {"source": "aws.ec2", "detail-type": "EC2 Instance State-change Notification"},
            "unexpected source/detail-type",
        ),
        ({**STATE_CHANGE}, "'detail' is a NoneType, expected a JSON object"),
        ({**STATE_CHANGE, "detail": "exp-1"}, "'detail' is a str, expected a JSON object"),
        ({**STATE_CHANGE, "detail": {}}, "'detail.TrainingJobName' is a NoneType, expected a string"),
        ({**STATE_CHANGE, "detail": {"TrainingJobName": 42}}, "'detail.TrainingJobName' is a int, expected a string"),
        ({**STATE_CHANGE, "detail": {"TrainingJobName": "exp_1"}}, "'exp_1' is not a valid training job name"),
        ({**STATE_CHANGE, "detail": {"TrainingJobName": "-exp"}}, "'-exp' is not a valid training job name"),
        ({**STATE_CHANGE, "detail": {"TrainingJobName": "e" * 64}}, "is not a valid training job name"),
        (
            {**evaluator_event("exp-1", []), "detail": {"TrainingJobName": "exp-1"}},
            "'detail.ProfilerRuleEvaluationStatuses' is a NoneType, expected a list",
        ),
        (
            evaluator_event("exp-1", [{"RuleConfigurationName": "A", "RuleEvaluationStatus": "IssuesFound"}] * 101),
            "has 101 entries, at most 100 expected",
        ),
        (
            evaluator_event("exp-1", [{"RuleConfigurationName": "", "RuleEvaluationStatus": "IssuesFound"}]),
            "no usable rule status",
        ),
    ],
)
def test_malformed_events_are_rejected_with_the_reason(event: Any, reason: str) -> None:
    with pytest.raises(MalformedEvent) as caught:
        parse_event(event)
    assert reason in str(caught.value)


def test_a_huge_job_name_is_rejected_quickly_and_echoed_briefly() -> None:
    event = {**STATE_CHANGE, "detail": {"TrainingJobName": "a-" * 200_000}}
    with pytest.raises(MalformedEvent) as caught:
        parse_event(event)
    assert len(str(caught.value)) < 200


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (datetime(2026, 11, 29, 10, 42, 5, tzinfo=UTC), datetime(2026, 11, 29, 10, 42, 5, tzinfo=UTC)),
        (datetime(2026, 11, 29, 10, 42, 5), datetime(2026, 11, 29, 10, 42, 5, tzinfo=UTC)),
        (1764412925, datetime(2025, 11, 29, 10, 42, 5, tzinfo=UTC)),
        (1764412925000, datetime(2025, 11, 29, 10, 42, 5, tzinfo=UTC)),
        ("1764412925000", datetime(2025, 11, 29, 10, 42, 5, tzinfo=UTC)),
        (" 1764412925.5 ", datetime(2025, 11, 29, 10, 42, 5, 500000, tzinfo=UTC)),
        ("2026-11-29T10:42:07Z", datetime(2026, 11, 29, 10, 42, 7, tzinfo=UTC)),
        ("2026-11-29T11:42:07+01:00", datetime(2026, 11, 29, 10, 42, 7, tzinfo=UTC)),
        ("2026-11-29 10:42:07", datetime(2026, 11, 29, 10, 42, 7, tzinfo=UTC)),
    ],
)
def test_timestamps_in_every_shape_seen(value: Any, expected: datetime) -> None:
    assert parse_time(value) == expected


@pytest.mark.parametrize("value", [None, True, "yesterday", "", float("nan"), float("inf"), -5, 10**30, [], {}])
def test_unreadable_timestamps_become_none(value: Any) -> None:
    assert parse_time(value) is None


def test_statuses_from_description_reads_both_rule_kinds_and_skips_broken_entries() -> None:
    description = {
        "ProfilerRuleEvaluationStatuses": [
            {"RuleConfigurationName": "LowGPUUtilization", "RuleEvaluationStatus": "IssuesFound"},
            {"RuleEvaluationStatus": "IssuesFound"},
        ],
        "DebugRuleEvaluationStatuses": [
            {"RuleConfigurationName": "VanishingGradient", "RuleEvaluationStatus": "Error"}
        ],
    }
    assert [(s.rule, s.status) for s in statuses_from_description(description)] == [
        ("LowGPUUtilization", "IssuesFound"),
        ("VanishingGradient", "Error"),
    ]


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("LowGPUUtilization", "[IssuesFound] LowGPUUtilization on exp-resnet-0042"),
        ("R" * 256, "[IssuesFound] " + "R" * 63 + "... on exp-resnet-0042"),
        ("Règle\nGPU", "[IssuesFound] Regle GPU on exp-resnet-0042"),
        ("规则", "[IssuesFound] ? on exp-resnet-0042"),
    ],
)
def test_subject_is_short_ascii_and_names_rule_and_job(rule: str, expected: str) -> None:
    subject = subject_line("IssuesFound", rule, "exp-resnet-0042")
    assert subject == expected
    assert len(subject) <= MAX_SUBJECT_CHARS and subject.isascii() and subject.isprintable()


def test_subject_stays_within_limit_for_the_longest_job_name() -> None:
    subject = subject_line("NoIssuesFound", "CPUBottleneck" * 20, "j" * 63)
    assert len(subject) == MAX_SUBJECT_CHARS
    assert subject.endswith(" on " + "j" * 63)


def test_ledger_keys_stay_within_dynamodb_limits_and_apart() -> None:
    readable = "规" * 256  # 768 bytes in UTF-8: still fits
    too_long = "\U0001f600" * 256  # 1024 bytes: replaced by its digest
    other_too_long = "\U0001f600" * 255 + "x"
    keys = [transition_key("exp-1", rule, "IssuesFound") for rule in (readable, too_long, other_too_long, "a#b", "a")]
    assert all(len(key["sk"].encode()) <= 1024 for key in keys)
    assert keys[0]["sk"] == "transition#IssuesFound#" + readable
    assert keys[1]["sk"].startswith("transition#IssuesFound#sha256:")
    assert len({key["sk"] for key in keys}) == 5
    assert transition_key("exp-1", "a", "Error") != transition_key("exp-1", "a", "IssuesFound")
    assert transition_key("exp-1", "a", "Error")["pk"] == "job#exp-1"


ENVIRONMENT = {
    "TABLE_NAME": "alarm-table",
    "TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:alarm",
    "JOB_FAMILY": '{"job_name_prefix": "exp-"}',
    "ALARM_ID": "Stack/Alarm",
}


def test_settings_from_the_environment_with_defaults() -> None:
    settings = Settings.from_environment(ENVIRONMENT)
    assert settings.statuses == {"IssuesFound"}
    assert settings.rule_names is None and settings.stop_prefix is None
    assert settings.event_bus_name == "default"


def test_settings_from_the_environment_with_everything() -> None:
    settings = Settings.from_environment(
        {
            **ENVIRONMENT,
            "STATUSES": json.dumps(["IssuesFound", "Error"]),
            "RULE_NAMES": json.dumps(["LowGPUUtilization"]),
            "STOP": "true",
            "STOP_PREFIX": "exp-gpu-",
            "TRANSITION_TTL_DAYS": "30",
        }
    )
    assert settings.statuses == {"IssuesFound", "Error"}
    assert settings.rule_names == {"LowGPUUtilization"}
    assert settings.stop_prefix == "exp-gpu-"
    assert settings.transition_ttl_days == 30


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"TABLE_NAME": ""}, "environment variable TABLE_NAME is not set"),
        ({"STATUSES": "IssuesFound"}, "STATUSES must be a JSON list of strings"),
        ({"STATUSES": '["Exploded"]'}, "STATUSES must be a non-empty subset"),
        ({"RULE_NAMES": '{"a": 1}'}, "RULE_NAMES must be a JSON list of strings"),
        ({"STOP": "true", "STOP_PREFIX": "prod-"}, "STOP_PREFIX 'prod-' must start with the family's prefix 'exp-'"),
    ],
)
def test_settings_errors_name_the_variable(change: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_environment({**ENVIRONMENT, **change})
    assert message in str(caught.value)
