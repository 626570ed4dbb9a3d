"""Helpers shared by the constructs: error locations, region-aware rule images, cdk-nag acknowledgements."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct, IConstruct

from ..model.errors import ConfigurationError, ConfigurationTypeError
from ..model.images import (
    BUILTIN_RULE_ACCOUNTS,
    BUILTIN_RULE_REPOSITORY,
    CUSTOM_RULE_ACCOUNTS,
    CUSTOM_RULE_REPOSITORY,
    IMAGE_TAG,
    builtin_rule_image,
    custom_rule_image,
)
from ..model.parameters import is_token

T = TypeVar("T")

_MAPPING_ID = "CdkSageMakerDebuggerRuleImageAccounts"
_REGION_RULE_ID = "CdkSageMakerDebuggerRuleImageRegions"


class LazyPath:
    """A construct path computed only when an error message needs it (each lookup is a round trip to jsii)."""

    def __init__(self, scope: IConstruct) -> None:
        self._scope = scope

    def __str__(self) -> str:
        return self._scope.node.path

    def __bool__(self) -> bool:
        return True


def located(scope: IConstruct, action: Callable[[], T]) -> T:
    """Run ``action`` and re-raise model errors located at the construct path of ``scope``."""
    try:
        return action()
    except ConfigurationError as error:
        raise error.at(scope.node.path) from None


# Synthesis crosses into the jsii (Node.js) process for every CDK call; these per-stack memos keep the many rule
# renderings of a stack from asking the same questions again.
_REGIONS: weakref.WeakKeyDictionary[cdk.Stack, str | None] = weakref.WeakKeyDictionary()
_IMAGES: weakref.WeakKeyDictionary[cdk.Stack, dict[tuple[str, bool], str]] = weakref.WeakKeyDictionary()


def concrete_region(scope: IConstruct) -> str | None:
    """The stack's region, or None in an environment-agnostic stack."""
    stack = _stack_of(scope)
    if stack not in _REGIONS:
        region = stack.region
        _REGIONS[stack] = None if cdk.Token.is_unresolved(region) else region
    return _REGIONS[stack]


def _accounts_mapping(stack: cdk.Stack) -> cdk.CfnMapping:
    existing = stack.node.try_find_child(_MAPPING_ID)
    if existing is not None:
        return existing  # type: ignore[return-value]
    regions = sorted(set(BUILTIN_RULE_ACCOUNTS) | set(CUSTOM_RULE_ACCOUNTS))
    mapping = cdk.CfnMapping(
        stack,
        _MAPPING_ID,
        mapping={
            region: {
                key: table[region]
                for key, table in (("builtin", BUILTIN_RULE_ACCOUNTS), ("custom", CUSTOM_RULE_ACCOUNTS))
                if region in table
            }
            for region in regions
        },
    )
    return mapping


def _require_region_rule(stack: cdk.Stack, kind: str, regions: Iterable[str]) -> None:
    """Template Rule that fails the deployment early, with the supported list, in a region without the image."""
    rule_id = f"{_REGION_RULE_ID}{kind.capitalize()}"
    if stack.node.try_find_child(rule_id) is not None:
        return
    regions = sorted(regions)
    cdk.CfnRule(
        stack,
        rule_id,
        assertions=[
            cdk.CfnRuleAssertion(
                assert_=cdk.Fn.condition_contains(regions, cdk.Aws.REGION),
                assert_description=(
                    f"SageMaker Debugger publishes no {kind} rule evaluator image in this region. "
                    f"Supported: {', '.join(regions)}."
                ),
            )
        ],
    )


def _stack_of(scope: IConstruct) -> cdk.Stack:
    return scope if isinstance(scope, cdk.Stack) else cdk.Stack.of(scope)


def _per_stack(kind: str, build: Callable[[cdk.Stack, bool], str]) -> Callable[..., str]:
    """Memoize ``build(stack, custom)`` per stack, and locate its errors at the caller's construct path."""

    def lookup(scope: IConstruct, *, custom: bool) -> str:
        if not isinstance(scope, cdk.Stack):
            return located(scope, lambda: lookup(cdk.Stack.of(scope), custom=custom))
        cache = _IMAGES.setdefault(scope, {})
        if (kind, custom) not in cache:
            cache[(kind, custom)] = build(scope, custom)
        return cache[(kind, custom)]

    return lookup


def _image_table(custom: bool) -> tuple[str, Mapping[str, str], str]:
    """(mapping key, region -> account table, repository) of the built-in or the custom rule evaluator image."""
    if custom:
        return "custom", CUSTOM_RULE_ACCOUNTS, CUSTOM_RULE_REPOSITORY
    return "builtin", BUILTIN_RULE_ACCOUNTS, BUILTIN_RULE_REPOSITORY


def _rule_image(stack: cdk.Stack, custom: bool) -> str:
    region = concrete_region(stack)
    if region is not None:
        return custom_rule_image(region) if custom else builtin_rule_image(region)
    kind, table, repository = _image_table(custom)
    _require_region_rule(stack, kind, table)
    account = _accounts_mapping(stack).find_in_map(cdk.Aws.REGION, kind)
    return cdk.Fn.join("", [account, ".dkr.ecr.", cdk.Aws.REGION, ".", cdk.Aws.URL_SUFFIX, f"/{repository}:{IMAGE_TAG}"])


def _rule_image_repository_arn(stack: cdk.Stack, custom: bool) -> str:
    kind, table, repository = _image_table(custom)
    region = concrete_region(stack)
    if region is not None:
        rule_image(stack, custom=custom)  # raises UnsupportedRegionError when absent
        account = table[region]
    else:
        account = _accounts_mapping(stack).find_in_map(cdk.Aws.REGION, kind)
    return stack.format_arn(service="ecr", account=account, resource="repository", resource_name=repository)


#: The rule evaluator image for the stack's region: a literal URI, or Fn::FindInMap on AWS::Region when agnostic.
#: ``scope`` may be the stack itself, which saves a lookup when rendering many rules.
rule_image = _per_stack("image", _rule_image)
#: ARN of the rule image's ECR repository, for the execution role's pull permission.
rule_image_repository_arn = _per_stack("repository", _rule_image_repository_arn)


def finding_target(scope: IConstruct) -> cdk.CfnResource:
    """The CloudFormation resource a finding about ``scope`` is reported on: ``scope`` itself or its default child.

    Acknowledgements go there and nowhere else: cdk-nag matches an acknowledgement to every finding of the resources
    *below* the construct it sits on, so one on a role or a whole job would also hide what a user adds later (a
    ``Resource::*`` statement in the role's DefaultPolicy, say)."""
    if cdk.CfnResource.is_cfn_resource(scope):
        return scope  # type: ignore[return-value]
    child = scope.node.default_child
    if child is None or not cdk.CfnResource.is_cfn_resource(child):
        raise TypeError(f"{scope.node.path} is not backed by one CloudFormation resource; acknowledge on that resource")
    return child  # type: ignore[return-value]


def acknowledge(scope: IConstruct, findings: dict[str, str]) -> None:
    """Acknowledge cdk-nag / validation findings on the one resource behind ``scope``, each with its specific reason."""
    if findings:
        cdk.Validations.of(finding_target(scope)).acknowledge(
            *(cdk.Acknowledgment(id=finding_id, reason=reason) for finding_id, reason in findings.items())
        )


def _flatten(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref":
            return f"<{arg}>"
        if key == "Fn::GetAtt":
            return f"<{arg[0]}.{arg[1]}>"
        if key == "Fn::Join":
            separator, parts = arg
            return separator.join(_flatten(part) for part in parts)
    return str(value)


def acknowledge_wildcards(scope: IConstruct, findings: dict[str, str], *, stack: cdk.Stack | None = None) -> None:
    """Acknowledge each AwsSolutions-IAM5 finding of one resource on its own, with its own reason.

    ``scope`` is the policy-bearing resource (an ``iam.Policy``, a role whose inline policy holds the statements, or
    their CloudFormation resource): the acknowledgement covers that resource only. Keys are
    ``"Action::<action pattern>"`` or ``"Resource::<resource>"`` (cdk-nag's ``appliesTo``, the exact strings); a
    resource may hold CDK tokens (it is spelled the way cdk-nag spells it). Keys that already are finding ids
    (``"AwsSolutions::..."``) pass through unchanged.
    """
    parts = [key.partition("::") for key in findings]
    # One resolve for all tokenized resources instead of one jsii round trip each.
    tokenized = [target for kind, _, target in parts if kind == "Resource" and is_token(target)]
    spelled: dict[str, str] = {}
    if tokenized:
        resolved = (stack or cdk.Stack.of(scope)).resolve(tokenized)
        spelled = dict(zip(tokenized, (_flatten(v) for v in resolved), strict=True))
    ids = {}
    for (kind, _, target), (key, reason) in zip(parts, findings.items(), strict=True):
        if kind in ("Action", "Resource"):
            ids[f"AwsSolutions::AwsSolutions-IAM5[{kind}::{spelled.get(target, target)}]"] = reason
        else:
            ids[key] = reason
    acknowledge(scope, ids)


def whole_seconds(duration: object, *, where: object, field: str, minimum: int = 1, maximum: int | None = None,
                  optional: bool = False) -> int | None:
    """``duration`` in whole seconds, checked against ``[minimum, maximum]``; a clear error instead of jsii's.

    None is returned for None when ``optional``; a Duration holding a deploy-time token is returned as its token."""
    if duration is None and optional:
        return None
    if not isinstance(duration, cdk.Duration):
        raise ConfigurationTypeError(
            f"expected a Duration such as Duration.minutes(5), got {type(duration).__name__} {duration!r}.",
            where=str(where), field=field, value=duration)
    if duration.is_unresolved():
        return duration.to_seconds()  # a deploy-time value: CloudFormation checks it
    milliseconds = duration.to_milliseconds(integral=False)
    seconds = int(milliseconds // 1000)
    if milliseconds % 1000:
        exact = f"{milliseconds:.3f}".rstrip("0").rstrip(".")
        raise ConfigurationError(
            f"must be a whole number of seconds, got {exact} milliseconds. Use Duration.seconds(...) with an "
            f"integer, for example Duration.seconds({max(seconds, minimum)}).",
            where=str(where), field=field, value=f"{exact} ms")
    if seconds < minimum or (maximum is not None and seconds > maximum):
        limit = f"between {minimum} and {maximum} seconds" if maximum is not None else f"at least {minimum} seconds"
        raise ConfigurationError(f"must be {limit}, got {duration.to_human_string()} ({seconds} s).",
                                 where=str(where), field=field, value=duration.to_human_string())
    return seconds


def check_kind(value: object, attribute: str, *, where: object, field: str, expected: str) -> None:
    """``value`` (unless None) must be a CDK object with ``attribute`` (the interfaces are protocols: duck typing), so a
    string where a bucket, role or key belongs fails here, by name, rather than deep inside CDK."""
    if value is not None and (isinstance(value, (str, bytes, int, float, dict, list)) or not hasattr(value, attribute)):
        raise ConfigurationTypeError(f"expected {expected}, got {type(value).__name__} {value!r}.",
                                     where=str(where), field=field, value=value)


def check_log_retention(value: object, *, where: object) -> None:
    if not isinstance(value, logs.RetentionDays):
        raise ConfigurationTypeError(
            f"expected a RetentionDays such as logs.RetentionDays.THREE_MONTHS, got {type(value).__name__} {value!r}.",
            where=str(where), field="log_retention", value=value)


def key_prefix(value: object, *, where: object, field: str) -> str | None:
    """An S3 key prefix without surrounding slashes (None stays None)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigurationTypeError(f"expected a key prefix string such as 'training', got {type(value).__name__} "
                                     f"{value!r}.", where=str(where), field=field, value=value)
    return value.strip("/")


def check_reserved_concurrency(value: object, *, where: object) -> int | None:
    """None (no reservation) or a whole number of concurrent executions between 1 and 1000; tokens pass."""
    if value is None or is_token(value):
        return value  # type: ignore[return-value]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationTypeError(
            f"expected a whole number of concurrent executions or None, got {type(value).__name__} {value!r}.",
            where=str(where), field="reserved_concurrency", value=value)
    if not 1 <= value <= 1000:
        raise ConfigurationError(
            f"must be between 1 and 1000 concurrent executions (or None for no reservation), got {value}.",
            where=str(where), field="reserved_concurrency", value=value)
    return value


#: Where the RuleEvaluator keeps its own objects under ``<output>/<job>/rule-output/`` (the runtime writes them; a test
#: checks both layers agree): its state object, and ``<RuleConfigurationName>/evaluator-output/`` with the reports.
EVALUATOR_STATE_FILE = "evaluator-state.json.gz"
EVALUATOR_REPORT_FOLDER = "evaluator-output"
EVALUATOR_SUMMARY_FILE = "evaluation-summary.json"

#: The runtime layer's folder: each Lambda ships one of its subpackages (importable there as a top-level package).
RUNTIME_DIR = Path(__file__).resolve().parent.parent / "runtime"


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
    dead_letter_queue = sqs.Queue(
        scope, "DeadLetterQueue", encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True,
        retention_period=cdk.Duration.days(14),
    )
    log_group = logs.LogGroup(scope, "Logs", retention=log_retention, removal_policy=cdk.RemovalPolicy.RETAIN)
    role = iam.Role(scope, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=role_description)
    function = lambda_.Function(
        scope,
        function_id,
        runtime=lambda_.Runtime.PYTHON_3_14,
        architecture=lambda_.Architecture.ARM_64,
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


@jsii.implements(cdk.IStableStringProducer)
class _StringProducer:
    def __init__(self, function: Callable[[], str]) -> None:
        self._function = function

    def produce(self) -> str:
        return self._function()


def lazy_string(function: Callable[[], str]) -> str:
    """A string computed when the template is rendered (after every ``add_rule``)."""
    return cdk.Lazy.string(_StringProducer(function))
