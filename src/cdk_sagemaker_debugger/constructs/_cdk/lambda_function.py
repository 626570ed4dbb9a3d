"""The Lambda functions of the runtime layer: one runtime subpackage each, with its role, logs and dead-letter queue."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

__all__ = ["RUNTIME_DIR", "RuntimeFunction", "runtime_function"]

#: The runtime layer's folder: each Lambda ships one of its subpackages (importable there as a top-level package).
RUNTIME_DIR = Path(__file__).resolve().parents[2] / "runtime"


@functools.cache
def _constants() -> dict[str, object]:
    """CDK values every function shares, read from jsii once per process (each read is a round trip)."""
    return {"runtime": lambda_.Runtime.PYTHON_3_14, "architecture": lambda_.Architecture.ARM_64,
            "dead_letter_retention": cdk.Duration.days(14)}


@dataclass(frozen=True)
class RuntimeFunction:
    """A Lambda running one runtime subpackage, with the resources every such function gets."""

    function: lambda_.Function
    role: iam.Role
    log_group: logs.LogGroup
    dead_letter_queue: sqs.Queue


def runtime_function(
    scope: Construct,
    function_id: str,
    *,
    package: str,
    handler: str,
    description: str,
    role_description: str,
    environment: dict[str, str],
    memory_size: int,
    timeout: cdk.Duration,
    log_retention: logs.RetentionDays,
    exclude: tuple[str, ...] = (),
    max_event_age: cdk.Duration | None = None,
    reserved_concurrency: int | None = None,
) -> RuntimeFunction:
    """An arm64 Python Lambda running ``runtime/<package>`` only: its own role (no managed policies), a retained log
    group, and an encrypted, SSL-only dead-letter queue for invocations that still fail after two retries.
    ``reserved_concurrency`` caps (and reserves) concurrent executions: what a burst of events can cost."""
    shared = _constants()
    dead_letter_queue = sqs.Queue(
        scope, "DeadLetterQueue", encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True,
        retention_period=shared["dead_letter_retention"],  # type: ignore[arg-type]
    )
    log_group = logs.LogGroup(scope, "Logs", retention=log_retention, removal_policy=cdk.RemovalPolicy.RETAIN)
    role = iam.Role(scope, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=role_description)
    function = lambda_.Function(
        scope,
        function_id,
        runtime=shared["runtime"],  # type: ignore[arg-type]
        architecture=shared["architecture"],  # type: ignore[arg-type]
        handler=f"{package}.{handler}",
        # follow_symlinks: each package's contract_shared.py is a link to model/contract.py, shipped as a file
        code=lambda_.Code.from_asset(
            str(RUNTIME_DIR),
            follow_symlinks=cdk.SymlinkFollowMode.ALWAYS,
            exclude=["*", f"!{package}", f"!{package}/**", "**/__pycache__", "**/*.pyc", *exclude],
        ),
        memory_size=memory_size,
        timeout=timeout,
        role=role,
        log_group=log_group,
        dead_letter_queue=dead_letter_queue,
        retry_attempts=2,
        max_event_age=max_event_age,
        description=description,
        environment=environment,
        reserved_concurrent_executions=None if no_reservations(scope) else reserved_concurrency,
    )
    return RuntimeFunction(function, role, log_group, dead_letter_queue)


#: ``cdk deploy -c cdk-sagemaker-debugger:reservedConcurrency=none`` (or the same key in cdk.json or
#: ``cdk.App(context=...)``): no function of the library reserves concurrency. For accounts still at the new-account
#: Lambda concurrency quota of 10, where any reservation fails the deployment (Lambda keeps 10 unreserved).
NO_RESERVATIONS_CONTEXT = "cdk-sagemaker-debugger:reservedConcurrency"


def no_reservations(scope: Construct) -> bool:
    """True when the app asks for no reserved concurrency at all (:data:`NO_RESERVATIONS_CONTEXT` is "none")."""
    value = scope.node.try_get_context(NO_RESERVATIONS_CONTEXT)
    return isinstance(value, str) and value.strip().lower() == "none"
