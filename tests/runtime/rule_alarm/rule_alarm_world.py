"""Test harness for the RuleAlarm runtime.

* SageMaker: a botocore ``Stubber`` whose responses are queued just in time from ``TrainingJobs`` (the scenario's truth
  about each job). Every request is still validated against the real SageMaker model, and so is every response.
* DynamoDB, SNS, EventBridge and S3: moto, so conditional writes behave like DynamoDB's. The RuleEvaluator's report
  objects are written to moto's S3 the way the evaluator writes them, before its verdict event is delivered.
* Fault injection uses botocore's own event hooks on those real clients: a one-shot "hard crash" (a BaseException the
  handler cannot catch, like a Lambda timeout or an out-of-memory kill), a one-shot service error, or a nested
  invocation that runs at a chosen point of another one (two Lambda instances racing).
"""

from __future__ import annotations

import itertools
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from cdk_sagemaker_debugger.runtime.rule_alarm.alarm import RuleAlarmIncomplete, RuleAlarmProcessor
from cdk_sagemaker_debugger.runtime.rule_alarm.contract_shared import JobFamily
from cdk_sagemaker_debugger.runtime.rule_alarm.logs import LOGGER_NAME
from cdk_sagemaker_debugger.runtime.rule_alarm.settings import Settings

REGION = "us-east-1"
ACCOUNT = "123456789012"
OUTPUT_BUCKET = "ml-artifacts-123456789012"
EPOCH = datetime(2026, 11, 29, 10, 0, tzinfo=timezone.utc)
_table_numbers = itertools.count()


class SimulatedCrash(BaseException):
    """The Lambda instance died mid-invocation: nothing after this point runs, no cleanup."""


@dataclass
class Clock:
    now: float = EPOCH.timestamp()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Job:
    name: str
    status: str = "InProgress"
    secondary_status: str = "Training"
    rules: dict[str, str] = field(default_factory=dict)
    rule_changed_at: dict[str, datetime] = field(default_factory=dict)
    output_s3_uri: str = f"s3://{OUTPUT_BUCKET}/output"
    role_arn: str = f"arn:aws:iam::{ACCOUNT}:role/SmTrainingRole"

    @property
    def arn(self) -> str:
        return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{self.name.lower()}"


class TrainingJobs:
    """The scenario's SageMaker: what DescribeTrainingJob returns and what StopTrainingJob does."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.jobs: dict[str, Job] = {}

    def add(self, name: str, rules: Iterable[str]) -> Job:
        job = Job(name=name, rules={rule: "InProgress" for rule in rules})
        for rule in job.rules:
            job.rule_changed_at[rule] = self.time()
        self.jobs[name] = job
        return job

    def time(self) -> datetime:
        return datetime.fromtimestamp(self.clock.now, tz=timezone.utc)

    def set_rule(self, name: str, rule: str, status: str) -> bool:
        job = self.jobs[name]
        if job.rules.get(rule) != "InProgress":
            return False
        job.rules[rule] = status
        job.rule_changed_at[rule] = self.time()
        return True

    def end(self, name: str, status: str) -> bool:
        job = self.jobs[name]
        if job.status != "InProgress":
            return False
        job.status, job.secondary_status = status, status
        return True

    def settle(self, name: str) -> None:
        job = self.jobs[name]
        if job.status == "Stopping":
            job.status, job.secondary_status = "Stopped", "Stopped"

    def describe(self, name: str) -> dict[str, Any]:
        job = self.jobs[name]
        statuses = []
        for rule, status in job.rules.items():
            entry: dict[str, Any] = {
                "RuleConfigurationName": rule,
                "RuleEvaluationJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:processing-job/{name.lower()}-{rule.lower()}-1a2b3c4d",
                "RuleEvaluationStatus": status,
                "LastModifiedTime": job.rule_changed_at[rule],
            }
            if status == "IssuesFound":
                entry["StatusDetails"] = (
                    f"RuleEvaluationConditionMet: Evaluation of the rule {rule} at step 1200 resulted in the condition being met\n"
                )
            if status == "Error":
                entry["StatusDetails"] = "ClientError: No profiler data was found for the training job\n"
            statuses.append(entry)
        return {
            "TrainingJobName": name,
            "TrainingJobArn": job.arn,
            "ModelArtifacts": {"S3ModelArtifacts": f"{job.output_s3_uri}/{name}/output/model.tar.gz"},
            "TrainingJobStatus": job.status,
            "SecondaryStatus": job.secondary_status,
            "AlgorithmSpecification": {
                "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3-gpu-py311",
                "TrainingInputMode": "File",
            },
            "RoleArn": job.role_arn,
            "OutputDataConfig": {"S3OutputPath": job.output_s3_uri},
            "ResourceConfig": {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
            "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
            "CreationTime": EPOCH,
            "LastModifiedTime": self.time(),
            "ProfilerRuleEvaluationStatuses": statuses,
            "ProfilingStatus": "Enabled",
        }

    def state_change_event(self, name: str, *, detail: dict[str, Any] | None = None) -> dict[str, Any]:
        job = self.jobs.get(name) or Job(name=name)
        return {
            "version": "0",
            "id": "5b7e1c2a-0d4e-4c3f-9a51-2f7d9c0e1a11",
            "detail-type": "SageMaker Training Job State Change",
            "source": "aws.sagemaker",
            "account": ACCOUNT,
            "time": self.time().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": REGION,
            "resources": [job.arn],
            "detail": detail
            if detail is not None
            else {"TrainingJobName": name, "TrainingJobArn": job.arn, "TrainingJobStatus": job.status},
        }


def evaluator_event(name: str, statuses: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "version": "0",
        "id": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
        "detail-type": "Profiler Rule Evaluation Status Change",
        "source": "cdk-sagemaker-debugger",
        "account": ACCOUNT,
        "time": "2026-11-29T10:42:07Z",
        "region": REGION,
        "resources": [],
        "detail": {
            "TrainingJobName": name,
            "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{name.lower()}",
            "ProfilerRuleEvaluationStatuses": statuses,
        },
    }


SCHEDULED_EVENT = {
    "version": "0",
    "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
    "detail-type": "Scheduled Event",
    "source": "aws.events",
    "account": ACCOUNT,
    "time": "2026-11-29T10:43:00Z",
    "region": REGION,
    "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/AlarmSweep"],
    "detail": {},
}


class LambdaContext:
    """The two attributes of the Lambda context object the handler reads."""

    def __init__(self, request_id: str, remaining_ms: int = 120_000) -> None:
        self.aws_request_id = request_id
        self._remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self._remaining_ms


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def create_table(client: Any) -> str:
    name = f"rule-alarm-{next(_table_numbers)}"
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


class AwsClients:
    """Clients shared by all scenarios of a test module (inside one moto mock)."""

    def __init__(self) -> None:
        self.dynamodb = boto3.client("dynamodb", region_name=REGION)
        self.sns = boto3.client("sns", region_name=REGION)
        self.events = boto3.client("events", region_name=REGION)
        self.sagemaker = boto3.client("sagemaker", region_name=REGION)
        self.s3 = boto3.client("s3", region_name=REGION)
        self.topic_arn = self.sns.create_topic(Name="rule-alarm")["TopicArn"]
        self.s3.create_bucket(Bucket=OUTPUT_BUCKET)


class Harness:
    """One scenario: a fresh table, a world, a processor, and everything observed along the way."""

    def __init__(self, clients: AwsClients, *, settings: dict[str, Any] | None = None) -> None:
        self.clients = clients
        self.clock = Clock()
        self.world = TrainingJobs(self.clock)
        self.settings = Settings(
            table_name=create_table(clients.dynamodb),
            topic_arn=clients.topic_arn,
            alarm_id="Stack/Alarm",
            **{"family": JobFamily(job_name_prefix="exp-"), **(settings or {})},
        )
        self.logs = _Records()
        self.logger = logging.getLogger(f"{LOGGER_NAME}.test.{self.settings.table_name}")
        self.logger.addHandler(self.logs)
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False
        self.processor = RuleAlarmProcessor(
            self.settings,
            sagemaker=clients.sagemaker,
            sns=clients.sns,
            events=clients.events,
            dynamodb=clients.dynamodb,
            s3=clients.s3,
            clock=self.clock,
            logger=self.logger,
        )
        #: What the evaluator's summary of each (job, rule) says now (the last verdict it wrote).
        self.evaluator_reports: dict[tuple[str, str], str] = {}
        self.published: list[dict[str, Any]] = []
        self.announced: list[dict[str, Any]] = []
        # (job, (rule, status) being acted on, what SageMaker did: stopped / refused / throttled)
        self.stop_calls: list[tuple[str, tuple[str, str] | None, str]] = []
        self.retry_queue: list[Any] = []
        self.unexpected: list[BaseException] = []
        self._crash_at: dict[str, Callable[[dict[str, Any]], bool]] = {}
        self._fail_at: dict[str, Callable[[dict[str, Any]], bool]] = {}
        self._nested_at: dict[str, Any] = {}
        self._invocations = itertools.count()
        self._handling: list[Any] = []  # events of the invocations in progress, innermost last
        self._hooks: list[tuple[Any, str, Callable[..., Any]]] = []
        self.stubber = Stubber(clients.sagemaker)

    # -- the evaluator ----------------------------------------------------------------------------------------------

    def evaluator_verdict(self, name: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
        """What the RuleEvaluator does for a status change: write each rule's summary, then publish the event."""
        for entry in entries:
            rule, status = entry.get("RuleConfigurationName"), entry.get("RuleEvaluationStatus")
            if isinstance(rule, str) and rule and isinstance(status, str):
                details = entry.get("StatusDetails")
                self.write_summary(name, rule, status, details=details if isinstance(details, str) else None)
        return evaluator_event(name, entries)

    def write_summary(self, name: str, rule: str, status: str, *, body: bytes | None = None,
                      details: str | None = None) -> str:
        """The evaluator's evaluation-summary.json of one rule of a job (its key is returned)."""
        job = self.world.jobs.get(name) or Job(name=name)
        prefix = job.output_s3_uri.removeprefix(f"s3://{OUTPUT_BUCKET}/").strip("/")
        key = f"{prefix}/{name}/rule-output/{rule}/evaluator-output/evaluation-summary.json"
        entry = {"RuleConfigurationName": rule, "RuleEvaluationStatus": status, "StatusDetails": details}
        summary = {"rules": [entry], "Diagnostics": {}}
        self.clients.s3.put_object(Bucket=OUTPUT_BUCKET, Key=key, Body=body or json.dumps(summary).encode())
        self.evaluator_reports[(name, rule)] = status
        return key

    # -- wiring -----------------------------------------------------------------------------------------------------

    def __enter__(self) -> Harness:
        self._hook(self.clients.sagemaker, "provide-client-params.sagemaker", self._queue_sagemaker_response)
        self.stubber.activate()
        for client, service in (
            (self.clients.sns, "sns"),
            (self.clients.events, "events"),
            (self.clients.dynamodb, "dynamodb"),
            (self.clients.s3, "s3"),
        ):
            self._hook(client, f"provide-client-params.{service}", self._before_call)
        self._hook(self.clients.sagemaker, "after-call.sagemaker.StopTrainingJob", self._after_stop)
        self._hook(self.clients.sns, "after-call.sns.Publish", self._after_publish)
        self._hook(self.clients.events, "after-call.events.PutEvents", self._after_put_events)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stubber.deactivate()
        for client, event_name, hook in self._hooks:
            client.meta.events.unregister(event_name, hook)
        self.logger.removeHandler(self.logs)

    def _hook(self, client: Any, event_name: str, hook: Callable[..., Any]) -> None:
        client.meta.events.register(event_name, hook)
        self._hooks.append((client, event_name, hook))

    def _queue_sagemaker_response(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        # read before any nested invocation logs its own line
        in_hand = self._transition_in_hand() if model.name == "StopTrainingJob" else None
        # faults for SageMaker are decided here, before anything is queued, so the Stubber's queue stays in call order
        if self._inject(model.name, params):
            if model.name == "StopTrainingJob":
                self.stop_calls.append((params["TrainingJobName"], in_hand, "throttled"))
            self.stubber.add_client_error(
                _snake(model.name), "ThrottlingException", "Rate exceeded", 400, expected_params=params
            )
            return
        name = params.get("TrainingJobName")
        expected = {"TrainingJobName": name}
        if model.name == "DescribeTrainingJob":
            if name in self.world.jobs:
                self.stubber.add_response("describe_training_job", self.world.describe(name), expected)
            else:
                self.stubber.add_client_error(
                    "describe_training_job",
                    "ValidationException",
                    "Requested resource not found.",
                    400,
                    expected_params=expected,
                )
        elif model.name == "StopTrainingJob":
            job = self.world.jobs.get(name)
            if job is not None and job.status == "InProgress":
                self.stop_calls.append((name, in_hand, "stopped"))
                job.status, job.secondary_status = "Stopping", "Stopping"
                self.stubber.add_response("stop_training_job", {}, expected)
            else:
                self.stop_calls.append((name, in_hand, "refused"))
                status = job.status if job else "missing"
                self.stubber.add_client_error(
                    "stop_training_job",
                    "ValidationException",
                    f"The request was rejected because the training job is in status {status}.",
                    400,
                    expected_params=expected,
                )
        # any other SageMaker operation gets no response queued, so the Stubber fails the test

    def _transition_in_hand(self) -> tuple[str, str] | None:
        """The (rule, status) the processor announced it is stopping for, read from its structured log."""
        for record in reversed(self.logs.records):
            if record.getMessage() == "calling StopTrainingJob":
                return (record.__dict__["rule"], record.__dict__["status"])
        return None

    def _before_call(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context[_PARAMS] = params  # so the after-call hooks can see what was sent
        if self._inject(model.name, params):
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, model.name)

    def _inject(self, operation: str, params: dict[str, Any]) -> bool:
        """Run an armed nested invocation or crash for ``operation``; return True if a service error is due."""
        if operation in self._nested_at:
            event, stall_seconds = self._nested_at.pop(operation)
            self.clock.advance(stall_seconds)
            self.invoke(self._handling[-1] if event is None else event)
        if operation in self._crash_at and self._crash_at[operation](params):
            del self._crash_at[operation]
            raise SimulatedCrash(operation)
        if operation in self._fail_at and self._fail_at[operation](params):
            del self._fail_at[operation]
            return True
        return False

    def _after_stop(self, **_: Any) -> None:
        if "StopTrainingJob:after" in self._crash_at:
            del self._crash_at["StopTrainingJob:after"]
            raise SimulatedCrash("after StopTrainingJob")

    def _after_publish(self, context: dict[str, Any], parsed: dict[str, Any], **_: Any) -> None:
        if "MessageId" in parsed:  # only what SNS accepted counts as a notification
            self.published.append(context[_PARAMS])

    def _after_put_events(self, context: dict[str, Any], parsed: dict[str, Any], **_: Any) -> None:
        if parsed.get("FailedEntryCount") == 0:
            self.announced.extend(json.loads(entry["Detail"]) for entry in context[_PARAMS]["Entries"])

    # -- fault injection --------------------------------------------------------------------------------------------

    def crash_at(self, operation: str, when: Callable[[dict[str, Any]], bool] = lambda _params: True) -> None:
        self._crash_at[operation] = when

    def fail_at(self, operation: str, when: Callable[[dict[str, Any]], bool] = lambda _params: True) -> None:
        self._fail_at[operation] = when

    def run_nested_at(self, operation: str, event: Any = None, *, stall_seconds: float = 0) -> None:
        """Just before ``operation``, let another invocation handle ``event`` (after this one stalled a while).

        Without ``event``, the other invocation gets a copy of the event being handled: a duplicate delivered to two
        Lambda instances at once."""
        self._nested_at[operation] = (event, stall_seconds)

    def disarm(self) -> None:
        self._crash_at.clear()
        self._fail_at.clear()
        self._nested_at.clear()

    # -- running ----------------------------------------------------------------------------------------------------

    def invoke(self, event: Any) -> dict[str, Any] | None:
        """One asynchronous Lambda invocation; failures go to the retry queue like Lambda's own retries."""
        context = LambdaContext(f"request-{next(self._invocations)}")
        self._handling.append(event)
        try:
            return self.processor.handle(event, context)
        except (SimulatedCrash, RuleAlarmIncomplete, ClientError):  # the function failed: Lambda retries the event
            self.retry_queue.append(event)
            return None
        except Exception as error:  # anything else is a bug the property tests must report
            self.unexpected.append(error)
            return None
        finally:
            self._handling.pop()

    def drain(self) -> None:
        """Let the system settle: faults stop, retries run, leases expire, and the sweep catches up."""
        self.disarm()
        for name in self.world.jobs:
            if self.settings.family.name_may_belong(name):
                self.invoke(self.world.state_change_event(name))
        for _round in range(3):
            queued, self.retry_queue = self.retry_queue, []
            for event in queued:
                self.invoke(event)
            self.clock.advance(self.settings.default_lease_seconds + 180)
            self.invoke(SCHEDULED_EVENT)
            if not self.retry_queue:
                break

    # -- observations -----------------------------------------------------------------------------------------------

    def notifications(self) -> Counter[tuple[str, str, str]]:
        return Counter(
            (
                params["MessageAttributes"]["job"]["StringValue"],
                params["MessageAttributes"]["rule"]["StringValue"],
                params["MessageAttributes"]["status"]["StringValue"],
            )
            for params in self.published
        )

    def ledger_items(self) -> list[dict[str, Any]]:
        items = self.clients.dynamodb.scan(TableName=self.settings.table_name, ConsistentRead=True)["Items"]
        return [{name: next(iter(value.values())) for name, value in item.items()} for item in items]

    def log_lines(self) -> list[str]:
        return [record.getMessage() for record in self.logs.records]


_PARAMS = "rule_alarm_test_params"


def _snake(operation: str) -> str:
    return "".join(f"_{ch.lower()}" if ch.isupper() else ch for ch in operation).lstrip("_")


def minutes(count: float) -> float:
    return timedelta(minutes=count).total_seconds()
