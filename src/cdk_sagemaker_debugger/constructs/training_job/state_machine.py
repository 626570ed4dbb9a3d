"""How a ProfiledTrainingJob runs: a state machine that names each run (a Pass state), starts its job through the
``createTrainingJob.sync`` integration and waits for it, with a role scoped to the job's prefix; and the custom
resource that starts a run on deploy."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr

from ...model.request.training import example_job_name
from .._cdk.lazy import lazy_any
from ._shared import CONSTANTS, PSEUDO
from .multinode import with_run_name as hyperparameters_with_run_name

if TYPE_CHECKING:  # pragma: no cover
    from ._parts import JobParts

__all__ = ["Launch", "create_launch", "start_on_deploy"]

# Each execution names its job <prefix>-<first and last groups of two fresh UUIDs>: 20 hex characters, 80 random bits.
_UUID_PART = "States.ArrayGetItem(States.StringSplit(States.UUID(), '-'), {})"
# Where the naming state puts the run's job name; the CreateTrainingJob task and the Debugger rules read it there.
_RUN_PATH = "$.trainingRun"
_RUN_NAME = f"{_RUN_PATH}.TrainingJobName"
_STRING_TOKEN = re.compile(r"(\$\{Token\[[^\]]*\]\})")


@dataclass(frozen=True)
class Launch:
    """What ``create_launch`` builds."""

    naming_state: sfn.CustomState
    launch_state: sfn.CustomState
    log_group: logs.LogGroup
    state_machine: sfn.StateMachine


def create_launch(job: JobParts) -> Launch:
    """The state machine that names each run and starts its job; the request is rendered lazily, at synth, so
    rules added later are in it."""
    launch_state = sfn.CustomState(
        job,
        "CreateTrainingJob",
        state_json={
            "Type": "Task",
            "Comment": f"Runs one SageMaker training job {job.job_name_prefix}-* and waits for it to finish.",
            "Resource": f"arn:{job._partition}:states:::sagemaker:createTrainingJob.sync",
            "Parameters": lazy_any(lambda: state_parameters(job)),
            "ResultSelector": {
                "TrainingJobName.$": "$.TrainingJobName",
                "TrainingJobArn.$": "$.TrainingJobArn",
                "TrainingJobStatus.$": "$.TrainingJobStatus",
                "ModelArtifacts.$": "$.ModelArtifacts",
            },
            "ResultPath": "$.trainingJob",
            # Throttling and transient service errors of CreateTrainingJob; a failed training job is not retried.
            "Retry": [{"ErrorEquals": ["SageMaker.AmazonSageMakerException"], "IntervalSeconds": 30,
                       "MaxAttempts": 3, "BackoffRate": 2}],
        },
    )
    log_group = logs.LogGroup(job, "StateMachineLogs", retention=CONSTANTS["log_retention"])
    role = _state_machine_role(job)
    naming_state = _naming_state(job)
    state_machine = sfn.StateMachine(
        job,
        "StateMachine",
        role=role,
        definition_body=sfn.DefinitionBody.from_chainable(naming_state.next(launch_state)),
        tracing_enabled=True,
        logs=sfn.LogOptions(destination=log_group, level=CONSTANTS["log_level"], include_execution_data=False),
        comment=f"Starts a profiled SageMaker training job {job.job_name_prefix}-* per execution.",
    )
    # The StateMachine construct adds its statements to the role's default policy, which exists now. The role's
    # CloudFormation resources come in one list (each node lookup would be a round trip to jsii): its own
    # (StateMachineRole/Resource) and its default policy's (StateMachineRole/DefaultPolicy/Resource).
    for resource in role.node.find_all():
        if isinstance(resource, iam.CfnRole):
            job._findings.register("StateMachineRole", resource)
        elif isinstance(resource, iam.CfnPolicy):
            job._findings.register("StateMachineRole/DefaultPolicy", resource)
    return Launch(naming_state, launch_state, log_group, state_machine)


def _naming_state(job: JobParts) -> sfn.CustomState:
    """Name the run once (a Pass state); the job and the Debugger rules that act on it read the name there."""
    name = f"States.Format('{job.job_name_prefix}-{{}}{{}}', {_UUID_PART.format(0)}, {_UUID_PART.format(4)})"
    return sfn.CustomState(job, "NameTrainingJob", state_json={
        "Type": "Pass",
        "Comment": "The run's job name, computed once for the job and for the Debugger rules that stop it.",
        "Parameters": {"TrainingJobName.$": name},
        "ResultPath": _RUN_PATH,
    })


def state_parameters(job: JobParts) -> dict[str, Any]:
    """The task's Parameters: the request, with the run's name read from the naming state."""
    placeholder = example_job_name(job.job_name_prefix)
    request = job.render_request(job_name=placeholder)
    del request["TrainingJobName"]
    if "HyperParameters" in request:
        request["HyperParameters"] = hyperparameters_with_run_name(request["HyperParameters"], placeholder)
    for configuration in request.get("DebugRuleConfigurations", ()):
        if "RuleParameters" in configuration:
            configuration["RuleParameters"] = with_run_name(configuration["RuleParameters"], placeholder)
    return {"TrainingJobName.$": _RUN_NAME, **request}


def _state_machine_role(job: JobParts) -> iam.Role:
    """The state machine's role with exactly what createTrainingJob.sync needs, scoped to this construct's jobs."""
    role = iam.Role(
        job,
        "StateMachineRole",
        assumed_by=iam.ServicePrincipal("states.amazonaws.com", conditions={
            "ArnLike": {"aws:SourceArn": job._arn("states", "stateMachine:*")},
            "StringEquals": {"aws:SourceAccount": PSEUDO["account"]},
        }),
        inline_policies={"StartTrainingJobs": iam.PolicyDocument.from_json({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Resource": job.training_job_arn_pattern, "Action": [
                "sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob",
                "sagemaker:AddTags", "sagemaker:ListTags"]},
            {"Effect": "Allow", "Action": "iam:PassRole", "Resource": job._role_arn,
             "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}},
            {"Effect": "Allow", "Action": ["events:PutTargets", "events:PutRule", "events:DescribeRule"],
             "Resource": job._arn("events", "rule/StepFunctionsGetEventsForSageMakerTrainingJobsRule")},
        ]})},
    )
    job._findings.add("StateMachineRole", {
        f"Resource::{job.training_job_arn_pattern}": (
            "Each execution creates, tags, describes and stops a job named <prefix>-<random suffix>; the pattern "
            "matches only this construct's jobs."
        ),
    })
    # The StateMachine construct adds these to the role's default policy (it exists once the machine does).
    job._findings.add("StateMachineRole/DefaultPolicy", {
        "Resource::*": (
            "X-Ray tracing and CloudWatch Logs delivery actions added by the StateMachine construct have no "
            "resource-level permissions."
        ),
    })
    return role


def start_on_deploy(job: JobParts) -> cr.AwsCustomResource:
    """Starts a run on deploy, and again whenever the rendered request changes (its hash is a property)."""
    request_hash = hashlib.sha256(
        json.dumps(job._stack.resolve(job.render_request()), sort_keys=True, default=str).encode()
    ).hexdigest()[:16]
    call = cr.AwsSdkCall(
        service="SFN",
        action="startExecution",
        parameters={"stateMachineArn": job.state_machine.state_machine_arn, "input": "{}"},
        physical_resource_id=cr.PhysicalResourceId.from_response("executionArn"),
        output_paths=["executionArn"],
    )
    trigger = cr.AwsCustomResource(
        job,
        "StartOnDeploy",
        on_create=call,
        on_update=call,
        policy=cr.AwsCustomResourcePolicy.from_statements([
            iam.PolicyStatement(actions=["states:StartExecution"], resources=[job.state_machine.state_machine_arn])
        ]),
        install_latest_aws_sdk=False,
        resource_type="Custom::StartTrainingRun",
    )
    resource = trigger.node.find_child("Resource").node.default_child
    resource.add_property_override("RequestHash", request_hash)  # type: ignore[union-attr]
    trigger.node.add_dependency(job.state_machine)
    return trigger


def _escape_intrinsic(text: str) -> str:
    """``text`` as a string literal inside an intrinsic function: ' { } and \\ escaped (deploy-time tokens kept)."""
    return "".join(part if _STRING_TOKEN.fullmatch(part) else re.sub(r"([\\'{}])", r"\\\1", part)
                   for part in _STRING_TOKEN.split(text))


def with_run_name(parameters: dict[str, Any], name: str) -> dict[str, Any]:
    """Rule parameters that hold the run's job name (the example ``name``) read the real one from the state input:
    ``key.$`` with the path, or with a States.Format whose template is the value with {} for the name."""
    result: dict[str, Any] = {}
    for key, value in parameters.items():
        if not isinstance(value, str) or name not in value:
            result[key] = value
        elif value == name:
            result[f"{key}.$"] = _RUN_NAME
        else:
            template = "{}".join(_escape_intrinsic(part) for part in value.split(name))
            arguments = ", ".join([_RUN_NAME] * value.count(name))
            result[f"{key}.$"] = f"States.Format('{template}', {arguments})"
    return result
