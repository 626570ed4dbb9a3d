"""Every reference state machine, executed by an independent ASL engine: moto's Step Functions interpreter.

The snapshots pin what we synthesize; this test runs it. For each reference stack the synthesized DefinitionString
is resolved to the JSON one deployment would see, created in moto with ``execute_state_machine`` and executed twice.
moto's ASL parser and interpreter (a port of LocalStack's) evaluate ``States.Format``/``States.UUID``/... themselves,
and the CreateTrainingJob request they compute is captured from the botocore client that sends it, checked against
botocore's service model and against the template, and must create exactly one training job named
``<job_name_prefix>-<20 hex>`` per execution.

Why ``.sync`` is swapped for ``aws-sdk:sagemaker:createTrainingJob``: moto routes ``states:::sagemaker:*`` to
``StateTaskServiceUnsupported``, whose only integration pattern is ``.waitForTaskToken``; ``.sync`` fails the
execution with ``States.Runtime: Unsupported sync callback procedure`` before any request is computed
(``test_sync_integration_is_what_moto_cannot_run`` pins this, so the swap goes away once moto learns it). Both
integrations take the CreateTrainingJob request as Parameters, so the request is tested as is. Not covered, therefore:
the ``.sync`` wait (DescribeTrainingJob polling until a terminal status) and the ResultSelector fields that only the
``.sync`` output (a DescribeTrainingJob response) has: here they are only checked to exist in that response's model;
IAM (moto's SageMaker checks neither the role nor the buckets, and the state machine role is not evaluated); and
the Retry, which no error in these executions reaches.
"""

from __future__ import annotations

import copy
import json
import re
import time
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
import boto3
import botocore.session
import pytest
import regex
from botocore.model import OperationModel, Shape
from botocore.validate import ParamValidator
from moto import mock_aws
from template_values import ACCOUNT, TemplateResolver, UnresolvableIntrinsic, partition_of

from cdk_sagemaker_debugger import ProfiledTrainingJob, RuleEngine
from cdk_sagemaker_debugger.constructs.sampler import SAMPLER_CHANNEL
from stacks.registry import REFERENCE_STACKS, build_app

#: Where an environment-agnostic stack is assumed to be deployed.
DEFAULT_REGION = "us-east-1"
SYNC_RESOURCE = re.compile(r"arn:(?P<partition>aws[a-z-]*):states:::sagemaker:createTrainingJob\.sync")
AWS_SDK_RESOURCE = "arn:{partition}:states:::aws-sdk:sagemaker:createTrainingJob"
#: Request fields moto's SageMaker accepts but does not store, so DescribeTrainingJob cannot echo them; the request
#: botocore sent still carries them (asserted against the template).
NOT_STORED_BY_MOTO = frozenset({"ProfilerConfig", "ProfilerRuleConfigurations", "Environment", "RetryStrategy"})
DEBUGGER_FIELDS = ("ProfilerConfig", "ProfilerRuleConfigurations", "DebugHookConfig", "DebugRuleConfigurations")
EXECUTION_TIME_LIMIT_S = 30.0

SAGEMAKER = botocore.session.get_session().get_service_model("sagemaker")
CREATE_TRAINING_JOB: OperationModel = SAGEMAKER.operation_model("CreateTrainingJob")
DESCRIBE_TRAINING_JOB: OperationModel = SAGEMAKER.operation_model("DescribeTrainingJob")


# ----------------------------------------------------------------------------------------------------------------------
# CloudFormation intrinsics -> the concrete values of one deployment


# ----------------------------------------------------------------------------------------------------------------------
# The reference app


@dataclass(frozen=True)
class Machine:
    stack_name: str
    region: str
    logical_id: str
    job: ProfiledTrainingJob
    definition: dict[str, Any]  # resolved, as synthesized

    @property
    def task(self) -> dict[str, Any]:
        return self.definition["States"]["CreateTrainingJob"]


def _region(stack: cdk.Stack) -> str:
    return DEFAULT_REGION if cdk.Token.is_unresolved(stack.region) else stack.region


@pytest.fixture(scope="module")
def machines() -> dict[str, list[Machine]]:
    """Every state machine of every reference stack, with the ProfiledTrainingJob that created it."""
    app = build_app(cdk.App(), nag=False)
    assembly = app.synth()
    found: dict[str, list[Machine]] = {}
    for stack in (child for child in app.node.children if isinstance(child, cdk.Stack)):
        template = assembly.get_stack_by_name(stack.stack_name).template
        resolver = TemplateResolver(stack.stack_name, template, _region(stack))
        jobs = {
            stack.resolve(job.state_machine.node.default_child.logical_id): job
            for job in stack.node.find_all()
            if isinstance(job, ProfiledTrainingJob)
        }
        found[stack.stack_name] = []
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] != "AWS::StepFunctions::StateMachine":
                continue
            assert logical_id in jobs, f"{stack.stack_name}/{logical_id} is no ProfiledTrainingJob's: teach this test"
            definition = resolver.resolve(resource["Properties"]["DefinitionString"])
            assert isinstance(definition, str), f"{stack.stack_name}/{logical_id}: DefinitionString is no string"
            found[stack.stack_name].append(
                Machine(stack.stack_name, resolver.region, logical_id, jobs[logical_id], json.loads(definition))
            )
    return found


def as_aws_sdk_task(machine: Machine) -> dict[str, Any]:
    """The definition with CreateTrainingJob's ``.sync`` integration replaced by the aws-sdk one (see the module
    docstring). Its output is CreateTrainingJob's response, so the ResultSelector keeps only the fields that response
    has; the others must at least exist in DescribeTrainingJob's response, which is what ``.sync`` returns."""
    definition = copy.deepcopy(machine.definition)
    task = definition["States"]["CreateTrainingJob"]
    match = SYNC_RESOURCE.fullmatch(task["Resource"])
    assert match, (
        f"{machine.stack_name}: CreateTrainingJob's Resource is {task['Resource']!r}, not the .sync integration"
    )
    task["Resource"] = AWS_SDK_RESOURCE.format(partition=match["partition"])
    selector = {}
    for key, path in task.get("ResultSelector", {}).items():
        field = path.removeprefix("$.")
        assert field in DESCRIBE_TRAINING_JOB.output_shape.members, (
            f"{machine.stack_name}: ResultSelector {key}: {path} is not in DescribeTrainingJob's response (.sync output)"
        )
        if field in CREATE_TRAINING_JOB.output_shape.members:
            selector[key] = path
    assert selector, f"{machine.stack_name}: the ResultSelector keeps nothing of CreateTrainingJob's response"
    task["ResultSelector"] = selector
    return definition


# ----------------------------------------------------------------------------------------------------------------------
# The request against botocore's model


def model_violations(value: Any, shape: Shape, where: str = "") -> list[str]:
    """What SageMaker's service-side validation would reject and botocore's ParamValidator does not check: maximum
    lengths and values, patterns (Java regexes, matched against the whole value) and enums."""
    problems: list[str] = []
    metadata = shape.metadata
    if shape.type_name == "structure":
        for key, item in value.items():
            if key in shape.members:
                problems += model_violations(item, shape.members[key], f"{where}.{key}")
    elif shape.type_name == "list":
        for index, item in enumerate(value):
            problems += model_violations(item, shape.member, f"{where}[{index}]")
    elif shape.type_name == "map":
        for key, item in value.items():
            problems += model_violations(key, shape.key, f"{where} key {key!r}")
            problems += model_violations(item, shape.value, f"{where}[{key!r}]")
    if "max" in metadata:
        size = value if isinstance(value, (int, float)) else len(value)
        if size > metadata["max"]:
            problems.append(f"{where}: {size} exceeds the maximum {metadata['max']}")
    if isinstance(value, str) and "pattern" in metadata and not regex.fullmatch(metadata["pattern"], value):
        problems.append(f"{where}: {value!r} does not match {metadata['pattern']!r}")
    if isinstance(value, str) and "enum" in metadata and value not in metadata["enum"]:
        problems.append(f"{where}: {value!r} is not one of the model's values")
    return problems


def assert_valid_create_training_job(request: dict[str, Any], where: str) -> None:
    report = ParamValidator().validate(request, CREATE_TRAINING_JOB.input_shape)
    assert not report.has_errors(), f"{where}: botocore rejects the request:\n{report.generate_report()}"
    problems = model_violations(request, CREATE_TRAINING_JOB.input_shape)
    assert not problems, f"{where}: the request breaks the sagemaker model's constraints:\n" + "\n".join(problems)


# ----------------------------------------------------------------------------------------------------------------------
# Executions


def run_to_completion(sfn, state_machine_arn: str, name: str) -> dict[str, Any]:
    """Start an execution and wait (bounded) until it leaves RUNNING; its describe_execution."""
    execution_arn = sfn.start_execution(stateMachineArn=state_machine_arn, name=name, input="{}")["executionArn"]
    deadline = time.monotonic() + EXECUTION_TIME_LIMIT_S
    while (execution := sfn.describe_execution(executionArn=execution_arn))["status"] == "RUNNING":
        if time.monotonic() > deadline:
            pytest.fail(f"{name} still RUNNING after {EXECUTION_TIME_LIMIT_S:.0f} s:\n{history(sfn, execution_arn)}")
        time.sleep(0.05)
    return execution


def history(sfn, execution_arn: str) -> str:
    lines = []
    for event in sfn.get_execution_history(executionArn=execution_arn)["events"]:
        details = {key: value for key, value in event.items() if key.endswith("EventDetails")}
        lines.append(f"  {event['type']} {json.dumps(details, default=str)[:2000]}")
    return "\n".join(lines)


def scheduled_parameters(sfn, execution_arn: str) -> list[dict[str, Any]]:
    """The requests the interpreter computed (its TaskScheduled events)."""
    events = sfn.get_execution_history(executionArn=execution_arn)["events"]
    return [json.loads(e["taskScheduledEventDetails"]["parameters"]) for e in events if e["type"] == "TaskScheduled"]


class SentRequests:
    """Every CreateTrainingJob request a botocore client of the default boto3 session sends, as the client got it.

    moto's interpreter makes its aws-sdk calls with ``boto3.client(...)`` (so through botocore's serializer into moto's
    SageMaker) but with ``parameter_validation=False``: the requests are validated here instead."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        boto3.setup_default_session()  # inside mock_aws: a session that lives as long as the mock
        boto3.DEFAULT_SESSION.events.register("provide-client-params.sagemaker.CreateTrainingJob", self._record)

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        self.requests.append(copy.deepcopy(params))


def expected_request(machine: Machine, job_name: str) -> dict[str, Any]:
    """The template's Parameters with the one computed field, the job name, filled in."""
    parameters = copy.deepcopy(machine.task["Parameters"])
    dynamic = [key for key in parameters if key.endswith(".$")]
    assert dynamic == ["TrainingJobName.$"], f"{machine.stack_name}: unexpected computed parameters {dynamic}"
    del parameters["TrainingJobName.$"]
    return {"TrainingJobName": job_name, **parameters}


def assert_described_as_requested(described: dict[str, Any], request: dict[str, Any], where: str) -> None:
    for key, value in request.items():
        if key in NOT_STORED_BY_MOTO:
            continue
        assert key in described, f"{where}: DescribeTrainingJob lacks {key} (stored by moto? then check it here)"
        if key == "AlgorithmSpecification":  # moto puts its own MetricDefinitions there, whatever was requested
            described_value = {k: v for k, v in described[key].items() if k in value and k != "MetricDefinitions"}
            value = {k: v for k, v in value.items() if k != "MetricDefinitions"}
        else:
            described_value = described[key]
        assert described_value == value, f"{where}: {key} is {described_value!r}, requested {value!r}"


# ----------------------------------------------------------------------------------------------------------------------
# Tests


#: Stacks moto's interpreter cannot run, and why. strict: when moto learns it, the test fails and the entry goes.
MOTO_CANNOT = {
    "TrainingDebugger": "moto 5.2.5's States.Format runs Python's str.format on the template, so the escaped braces "
                        "(\\{ \\}) of Debugger's action_json, which Step Functions accepts, raise KeyError; "
                        "tests/constructs/test_training_job_debugger.py::TestRunName evaluates that Format string",
}


@pytest.mark.parametrize("stack_name", [
    pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=MOTO_CANNOT[name])) if name in MOTO_CANNOT else name
    for name in REFERENCE_STACKS
])
def test_state_machine_runs_in_moto(machines: dict[str, list[Machine]], stack_name: str) -> None:
    if not machines[stack_name]:
        pytest.skip(f"{stack_name} has no state machine")
    for machine in machines[stack_name]:
        with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
            run_machine(machine)


def run_machine(machine: Machine) -> None:
    where = f"{machine.stack_name}/{machine.logical_id}"
    prefix = machine.job.job_name_prefix
    name_pattern = re.compile(rf"{re.escape(prefix)}-[0-9a-f]{{20}}")
    sent = SentRequests()
    sfn = boto3.client("stepfunctions", region_name=machine.region)
    sagemaker = boto3.client("sagemaker", region_name=machine.region)
    state_machine_arn = sfn.create_state_machine(
        name=machine.logical_id,
        definition=json.dumps(as_aws_sdk_task(machine)),
        roleArn=f"arn:{partition_of(machine.region)}:iam::{ACCOUNT}:role/{machine.logical_id}Role",
    )["stateMachineArn"]

    names: list[str] = []
    for run in (1, 2):
        execution = run_to_completion(sfn, state_machine_arn, f"run-{run}")
        assert execution["status"] == "SUCCEEDED", (
            f"{where} run {run} {execution['status']}:\n{history(sfn, execution['executionArn'])}"
        )

        # The interpreter computed one request, botocore sent exactly that, and it is the template's request.
        (computed,) = scheduled_parameters(sfn, execution["executionArn"])
        assert len(sent.requests) == run, f"{where}: {len(sent.requests)} CreateTrainingJob calls after run {run}"
        request = sent.requests[-1]
        assert request == computed, f"{where}: botocore sent {request!r}\nthe interpreter computed {computed!r}"
        job_name = request["TrainingJobName"]
        assert name_pattern.fullmatch(job_name), f"{where}: job name {job_name!r} is not {prefix}-<20 hex>"
        assert request == expected_request(machine, job_name), f"{where}: the request differs from the template"
        assert_valid_create_training_job(request, where)

        # The job exists, once, and its output is what the (adapted) ResultSelector took from the response.
        jobs = sagemaker.list_training_jobs(MaxResults=100)["TrainingJobSummaries"]
        assert sorted(job["TrainingJobName"] for job in jobs) == sorted([*names, job_name]), (
            f"{where}: after run {run} the training jobs are {[job['TrainingJobName'] for job in jobs]}"
        )
        described = sagemaker.describe_training_job(TrainingJobName=job_name)
        output = json.loads(execution["output"])
        assert output["trainingJob"] == {"TrainingJobArn": described["TrainingJobArn"]}, f"{where}: output {output}"
        assert_described_as_requested(described, request, where)
        names.append(job_name)

    assert names[0] != names[1], f"{where}: two executions named their jobs alike: {names}"

    # What the reference stacks promise about the request.
    channels = [channel["ChannelName"] for channel in request.get("InputDataConfig", [])]
    if machine.job.rule_engine is RuleEngine.DEBUGGER:
        assert "ProfilerConfig" in request, f"{where}: a RuleEngine.DEBUGGER job without ProfilerConfig"
    else:
        present = [field for field in DEBUGGER_FIELDS if field in request]
        assert not present, f"{where}: a RuleEngine.EVALUATOR job sends Debugger fields {present}"
    assert (SAMPLER_CHANNEL in channels) == (machine.job.sampler is not None), (
        f"{where}: channels {channels} with sampler {machine.job.sampler!r}"
    )


def test_sync_integration_is_what_moto_cannot_run(machines: dict[str, list[Machine]]) -> None:
    """Why the other tests swap the integration: the definition as synthesized fails in moto before it computes a
    request. When this fails, moto runs ``sagemaker:createTrainingJob.sync``: execute the definitions unchanged."""
    machine = machines["Training"][0]
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        sfn = boto3.client("stepfunctions", region_name=machine.region)
        state_machine_arn = sfn.create_state_machine(
            name=machine.logical_id,
            definition=json.dumps(machine.definition),
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/{machine.logical_id}Role",
        )["stateMachineArn"]
        execution = run_to_completion(sfn, state_machine_arn, "as-synthesized")
        events = sfn.get_execution_history(executionArn=execution["executionArn"])["events"]
    failures = [e["executionFailedEventDetails"] for e in events if e["type"] == "ExecutionFailed"]
    assert execution["status"] == "FAILED" and len(failures) == 1, (
        f"moto now runs the .sync integration ({execution['status']}): drop as_aws_sdk_task and run it unchanged"
    )
    assert failures[0]["error"] == "States.Runtime"
    assert "Unsupported sync callback procedure" in failures[0]["cause"], failures[0]["cause"]


def test_resolver_refuses_what_it_does_not_know() -> None:
    # a resource type the resolver has no physical name for (it knows queues: the evaluator's environment names one)
    template = {"Resources": {"Queue": {"Type": "AWS::SQS::QueuePolicy"}}, "Parameters": {"BootstrapVersion": {}}}
    resolver = TemplateResolver("S", template, "us-east-1")
    assert resolver.resolve({"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":x"]]}) == "arn:aws:x"
    for unknown in (
        {"Fn::ImportValue": "Elsewhere"},
        {"Ref": "Queue"},
        {"Ref": "BootstrapVersion"},
        {"Ref": "AWS::NotificationARNs"},
        {"Fn::Sub": "${Missing}"},
    ):
        with pytest.raises(UnresolvableIntrinsic):
            resolver.resolve(unknown)
