"""The stack's concrete region and the region-aware Debugger rule images (a literal URI, or a mapping on AWS::Region)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping

import aws_cdk as cdk
from constructs import IConstruct

from ...model.images import (
    BUILTIN_RULE_ACCOUNTS,
    BUILTIN_RULE_REPOSITORY,
    CUSTOM_RULE_ACCOUNTS,
    CUSTOM_RULE_REPOSITORY,
    IMAGE_TAG,
    builtin_rule_image,
    custom_rule_image,
)
from .checks import located

__all__ = ["concrete_region", "rule_image", "rule_image_repository_arn"]

_MAPPING_ID = "CdkSageMakerDebuggerRuleImageAccounts"
_REGION_RULE_ID = "CdkSageMakerDebuggerRuleImageRegions"

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
    if isinstance(scope, cdk.Stack):
        return scope
    known = getattr(scope, "_stack", None)  # a ProfiledTrainingJob keeps its stack: no round trip to jsii
    return known if isinstance(known, cdk.Stack) else cdk.Stack.of(scope)


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
