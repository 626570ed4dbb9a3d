"""Malformed input, logging, retries and packaging of the RuleAlarm runtime."""

from __future__ import annotations

import ast
import json
import logging
from pathlib import Path
from typing import Any

import boto3
import botocore.endpoint
import pytest
from botocore.awsrequest import AWSResponse
from hypothesis import given, settings
from hypothesis import strategies as st
from rule_alarm_world import REGION, AwsClients, Harness, evaluator_event

from cdk_sagemaker_debugger.runtime.rule_alarm import handler as handler_module
from cdk_sagemaker_debugger.runtime.rule_alarm.alarm import RuleAlarmProcessor
from cdk_sagemaker_debugger.runtime.rule_alarm.events import RULE_STATUSES
from cdk_sagemaker_debugger.runtime.rule_alarm.logs import JsonFormatter, get_logger
from cdk_sagemaker_debugger.runtime.rule_alarm.settings import Settings

RUNTIME = Path(handler_module.__file__).parent
SOURCES = ("aws.sagemaker", "cdk-sagemaker-debugger", "aws.events", "aws.s3")
DETAIL_TYPES = (
    "SageMaker Training Job State Change",
    "Profiler Rule Evaluation Status Change",
    "Scheduled Event",
    "Rule Alarm Transition",
)
JOB_NAMES = ("exp-gpu-1", "exp-missing", "prod-gpu-3", "exp_bad", "-x", "e" * 64, "")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=12,
)
timestamps = st.one_of(
    json_values,
    st.integers(-(2**63), 2**63).map(str),
    st.datetimes().map(lambda moment: moment.isoformat()),
    st.floats(allow_nan=True, allow_infinity=True),
)
status_entries = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {
            "RuleConfigurationName": st.one_of(st.sampled_from(("LowGPUUtilization", "StepOutlier")), json_values),
            "RuleEvaluationStatus": st.one_of(st.sampled_from(sorted(RULE_STATUSES)), json_values),
        },
        optional={"LastModifiedTime": timestamps, "StatusDetails": st.one_of(st.text(max_size=3000), json_values)},
    ),
)
details = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"TrainingJobName": st.one_of(st.sampled_from(JOB_NAMES), json_values)},
        optional={
            "ProfilerRuleEvaluationStatuses": st.one_of(json_values, st.lists(status_entries, max_size=4)),
            "TrainingJobStatus": json_values,
            "LastModifiedTime": timestamps,
        },
    ),
)
events = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"source": st.one_of(st.sampled_from(SOURCES), json_values)},
        optional={"detail-type": st.one_of(st.sampled_from(DETAIL_TYPES), json_values), "detail": details},
    ),
)


@pytest.fixture(scope="module")
def robust_harness(aws: AwsClients) -> Any:
    with Harness(aws, settings={"statuses": frozenset({"IssuesFound", "Error"}), "stop_prefix": "exp-"}) as harness:
        harness.world.add("exp-gpu-1", ("LowGPUUtilization",))
        harness.world.add("prod-gpu-3", ("LowGPUUtilization",))
        harness.world.set_rule("exp-gpu-1", "LowGPUUtilization", "IssuesFound")
        harness.world.set_rule("prod-gpu-3", "LowGPUUtilization", "IssuesFound")
        yield harness


@settings(max_examples=500, deadline=None)
@given(event=events)
def test_any_event_is_handled_or_dropped_without_a_crash_and_never_acts_twice(
    robust_harness: Harness, event: Any
) -> None:
    harness = robust_harness
    harness.unexpected.clear()
    before = len(harness.logs.records)
    result = harness.invoke(event)

    assert harness.unexpected == [] and harness.retry_queue == []
    assert result is not None and result["outcome"] in {"dropped", "processed", "swept"}
    new_records = harness.logs.records[before:]
    if result["outcome"] == "dropped":
        assert any(record.levelno == logging.WARNING and "dropped" in record.getMessage() for record in new_records)
    for record in new_records:  # every line renders as one JSON object
        assert json.loads(JsonFormatter().format(record))["message"] == record.getMessage()
    # whatever arrived, each transition was acted on at most once, and only for the job under the prefix
    notified = harness.notifications()
    assert all(count == 1 for count in notified.values())
    assert {job for job, _rule, _status in notified} <= {"exp-gpu-1"}
    assert all(name == "exp-gpu-1" for name, _transition, _outcome in harness.stop_calls)
    assert len(harness.stop_calls) <= 1


def test_huge_payloads_are_dropped_and_logged_briefly(harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    harness.world.add("exp-gpu-1", ("LowGPUUtilization",))
    too_many = [{"RuleConfigurationName": "R", "RuleEvaluationStatus": "IssuesFound"}] * 10_000
    huge_name = {
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "detail": {"TrainingJobName": "exp-" + "a" * 250_000},
    }
    for event in (evaluator_event("exp-gpu-1", too_many), huge_name):
        assert harness.invoke(event)["outcome"] == "dropped"
    assert harness.published == [] and harness.ledger_items() == []

    processor = RuleAlarmProcessor(
        harness.settings, sagemaker=None, sns=None, events=None, dynamodb=harness.clients.dynamodb
    )  # default logger: JSON lines on stdout
    processor.handle(huge_name)
    lines = capsys.readouterr().out.strip().splitlines()
    entry = json.loads(lines[-1])
    assert entry["level"] == "WARNING" and entry["message"] == "dropped malformed event"
    assert entry["event_chars"] > 250_000
    assert len(lines[-1]) < 1000


def test_huge_status_details_are_cut_to_one_short_labelled_line(harness: Harness) -> None:
    harness.world.add("exp-gpu-1", ())
    entry = {
        "RuleConfigurationName": "StepOutlier",
        "RuleEvaluationStatus": "IssuesFound",
        "StatusDetails": "d" * 200_000,
    }
    harness.invoke(harness.evaluator_verdict("exp-gpu-1", [entry]))
    body = json.loads(harness.published[0]["Message"])["email"]
    assert "Details:       machine-reported: " + "d" * 197 + "...\n" in body


def test_log_lines_are_json_with_job_and_rule(harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    harness.world.add("exp-gpu-1", ("LowGPUUtilization",))
    harness.world.set_rule("exp-gpu-1", "LowGPUUtilization", "IssuesFound")
    processor = RuleAlarmProcessor(
        harness.settings,
        sagemaker=harness.clients.sagemaker,
        sns=harness.clients.sns,
        events=harness.clients.events,
        dynamodb=harness.clients.dynamodb,
        clock=harness.clock,
    )
    processor.handle(harness.world.state_change_event("exp-gpu-1"))
    entries = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    notified = next(entry for entry in entries if entry["message"] == "notified")
    assert notified["job"] == "exp-gpu-1"
    assert notified["rule"] == "LowGPUUtilization"
    assert notified["status"] == "IssuesFound"
    assert notified["level"] == "INFO"
    assert notified["time"].endswith("Z")


def test_logger_is_configured_once_and_does_not_propagate() -> None:
    logger = get_logger()
    assert get_logger() is logger
    assert len([h for h in logger.handlers if isinstance(h.formatter, JsonFormatter)]) == 1
    assert logger.propagate is False


def test_handler_builds_retrying_clients_from_the_environment(aws: AwsClients, monkeypatch: pytest.MonkeyPatch) -> None:
    environment = {
        "TABLE_NAME": "alarm-table",
        "TOPIC_ARN": aws.topic_arn,
        "JOB_FAMILY": '{"job_name_prefix": "exp-"}',
        "ALARM_ID": "Stack/Alarm",
        "STOP": "true",
        "STOP_PREFIX": "exp-",
        "AWS_DEFAULT_REGION": REGION,
    }
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(handler_module, "_processor", None)
    result = handler_module.handler({"source": "nowhere"}, None)
    assert result["outcome"] == "dropped"
    processor = handler_module._processor
    assert isinstance(processor, RuleAlarmProcessor)
    assert processor.settings == Settings.from_environment(environment)
    for client in (processor._sagemaker, processor._sns, processor._events, processor.ledger._client):
        assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 6}


def test_throttled_publish_is_retried_with_backoff(aws: AwsClients, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real client built with the handler's retry configuration, throttled twice by the transport, then accepted."""
    sns = boto3.client("sns", region_name=REGION, config=handler_module.RETRY_CONFIG)
    delays: list[float] = []
    monkeypatch.setattr(botocore.endpoint.time, "sleep", delays.append)
    throttled = {"left": 2, "seen": 0}

    def throttle(request: Any, **_: Any) -> AWSResponse | None:
        throttled["seen"] += 1
        if throttled["left"] == 0:
            return None  # let moto answer
        throttled["left"] -= 1
        body = (
            b"<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code>"
            b"<Message>Rate exceeded</Message></Error></ErrorResponse>"
        )
        return AWSResponse(request.url, 400, {}, _RawBody(body))

    sns.meta.events.register_first("before-send.sns.Publish", throttle)
    response = sns.publish(TopicArn=aws.topic_arn, Message="hello")
    assert response["MessageId"]
    assert throttled["seen"] == 3
    assert len(delays) == 2 and all(delay > 0 for delay in delays)


class _RawBody:
    """The minimal file-like object AWSResponse reads a body from."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Any:
        yield self._data

    def read(self, *_: Any) -> bytes:
        data, self._data = self._data, b""
        return data


def test_runtime_imports_only_the_standard_library_boto3_and_itself() -> None:
    """Lambda loads ``rule_alarm`` as a top-level package: no absolute imports of this library, no CDK, no jsii."""
    allowed_third_party = {"boto3", "botocore"}
    for path in sorted(RUNTIME.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in allowed_third_party or _is_stdlib(top), f"{path.name} imports {name}"


def _is_stdlib(name: str) -> bool:
    import sys

    return name in sys.stdlib_module_names or name == "__future__"
