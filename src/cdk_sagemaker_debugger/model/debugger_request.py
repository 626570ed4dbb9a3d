"""Render the Debugger part of a CreateTrainingJob request: DebugHookConfig, DebugRuleConfigurations and
TensorBoardOutputConfig, plus what the execution role needs for rule actions.

ProfiledTrainingJob calls :func:`render_debugger_request` once per job; everything it needs from the CDK side (images,
uploaded rule sources) comes in through plain strings or callbacks, so this stays free of ``aws_cdk``.
"""

# No ``from __future__ import annotations`` here: DebuggerRequest's constructor, which NamedTuple generates outside this
# module, then holds real types rather than names only this module can resolve (the API reference, ``make docs``).
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .debug_hook import CollectionRequest, DebugHookConfig, TensorBoardOutputConfig, merge_collections
from .errors import ConfigurationError, ConfigurationTypeError
from .frameworks import FrameworkInfo
from .rules.debugger import Rule, RulePermissions
from .rules.profiler import ProfilerRule
from .tokens import is_token

__all__ = ["DebuggerRequest", "render_debugger_request", "resolve_debug_hook", "MAX_DEBUGGER_RULES"]

#: API limit on DebugRuleConfigurations.
MAX_DEBUGGER_RULES = 20


class DebuggerRequest(NamedTuple):
    """What :func:`render_debugger_request` returns; unpack it as ``fragment, warnings, permissions``."""

    #: Members to merge into the CreateTrainingJob request (absent keys are not applicable).
    fragment: dict[str, Any]
    #: Human-readable warnings for synth output (e.g. ``Annotations.add_warning``).
    warnings: list[str]
    #: IAM needs of the rules' actions, for the job's execution role.
    permissions: RulePermissions


def _check_rules(rules: Sequence[Any], where: str | None) -> list[Rule]:
    if isinstance(rules, (Rule, ProfilerRule)) or not isinstance(rules, Sequence) or isinstance(rules, str):
        raise ConfigurationTypeError(
            f"expected a list of debugger rules, got {type(rules).__name__}. Wrap a single rule as [rule].",
            where=where,
            field="debugger_rules",
            value=rules,
        )
    for position, rule in enumerate(rules):
        if isinstance(rule, ProfilerRule):
            raise ConfigurationTypeError(
                f"item {position} ({rule.name}) is a profiler rule; add it to the job's ProfilerRuleSet (rule_set=). "
                "debugger_rules= takes tensor rules from cdk_sagemaker_debugger.debugger_rules.",
                where=where,
                field="debugger_rules",
                value=rule,
            )
        if not isinstance(rule, Rule):
            raise ConfigurationTypeError(
                f"item {position} is {type(rule).__name__} {rule!r}; expected a rule such as "
                "debugger_rules.LossNotDecreasing() or debugger_rules.Rule.custom(...).",
                where=where,
                field="debugger_rules",
                value=rule,
            )
    if len(rules) > MAX_DEBUGGER_RULES:
        raise ConfigurationError(
            f"has {len(rules)} debugger rules; the API allows at most {MAX_DEBUGGER_RULES} per training job. "
            "Split the checks across jobs or drop some rules.",
            where=where,
            field="debugger_rules",
        )
    seen: set[str] = set()
    for rule in rules:
        if is_token(rule.name):
            continue
        if rule.name in seen:
            raise ConfigurationError(
                f"two debugger rules are named {rule.name!r}; RuleConfigurationName must be unique within a job. "
                "Give one of them name='...'.",
                where=where,
                field="debugger_rules",
                value=rule.name,
            )
        seen.add(rule.name)
    return list(rules)


def resolve_debug_hook(
    debug_hook: DebugHookConfig | bool | None, has_rules: bool, where: str | None = None
) -> DebugHookConfig | None:
    """The hook a job runs: ``None`` means the default hook when there are debugger rules, ``True`` always, ``False``
    never (an error with rules)."""
    if debug_hook is None:
        return DebugHookConfig() if has_rules else None
    if debug_hook is True:
        return DebugHookConfig()
    if debug_hook is False:
        if has_rules:
            raise ConfigurationError(
                "debug_hook=False turns off the hook that saves the tensors debugger rules analyse, so the rules would "
                "have nothing to check. Keep the hook (debug_hook=None or a DebugHookConfig) or remove debugger_rules.",
                where=where,
                field="debug_hook",
            )
        return None
    if not isinstance(debug_hook, DebugHookConfig):
        raise ConfigurationTypeError(
            f"expected a DebugHookConfig, True, False or None, got {type(debug_hook).__name__}.",
            where=where,
            field="debug_hook",
            value=debug_hook,
        )
    return debug_hook


def _render_rules(
    rules: Sequence[Rule],
    *,
    region: str | None,
    stop_name: str | None,
    where: str | None,
    framework: FrameworkInfo | None,
    image: Callable[[Rule], str | None],
    source_uri: Callable[[Rule], str | None],
) -> tuple[list[dict[str, Any]], list[str], RulePermissions]:
    """DebugRuleConfigurations, framework warnings and the rule actions' IAM needs (StopTraining gets ``stop_name``)."""
    configurations = []
    warnings: list[str] = []
    permissions = RulePermissions()
    for rule in rules:
        image_uri, source_s3_uri = image(rule), source_uri(rule)  # their errors are located already
        try:
            configurations.append(rule.to_rule_configuration(
                region=region, image_uri=image_uri, job_name_prefix=stop_name, source_s3_uri=source_s3_uri
            ))
        except ConfigurationError as error:
            raise error.at(where) if where else error from None
        permissions = permissions | rule.permissions(job_name_prefix=stop_name)
        framework_warning = rule.framework_warning(framework.name if framework is not None else None)
        if framework_warning:
            warnings.append(framework_warning)
    return configurations, warnings, permissions


def render_debugger_request(
    *,
    rules: Sequence[Rule] = (),
    debug_hook: DebugHookConfig | bool | None = None,
    tensorboard: TensorBoardOutputConfig | None = None,
    default_s3_output_path: str | None,
    job_name_prefix: str | None = None,
    job_name: str | None = None,
    region: str | None = None,
    image_for: Callable[[Rule], str] | None = None,
    builtin_image: str | None = None,
    custom_image: str | None = None,
    source_uri_for: Callable[[Rule], str | None] | None = None,
    framework: FrameworkInfo | None = None,
    where: str | None = None,
) -> DebuggerRequest:
    """Render the Debugger members of CreateTrainingJob.

    Rule images come from ``image_for(rule)`` if given, else ``custom_image`` / ``builtin_image`` (e.g. CloudFormation
    tokens in environment-agnostic stacks), else a lookup by ``region``; a custom rule's own ``image_uri`` always wins.
    ``source_uri_for(rule)`` returns the S3 URI of an uploaded local rule source. ``debug_hook=None`` adds the default
    hook only when there are rules; ``True`` always; ``False`` never. StopTraining actions without a prefix, and
    StalledTrainingRule(stop_training_on_fire=True), get ``job_name`` (the run's own name, which is what the SageMaker
    SDK fills in at ``fit()``: the rule container stops a job only when exactly one running job matches), or
    ``job_name_prefix`` without one. TensorBoard's default path uses ``job_name_prefix``.
    """
    checked = _check_rules(rules, where)
    hook = resolve_debug_hook(debug_hook, bool(checked), where)
    if tensorboard is not None and not isinstance(tensorboard, TensorBoardOutputConfig):
        raise ConfigurationTypeError(
            f"expected a TensorBoardOutputConfig, got {type(tensorboard).__name__}.",
            where=where,
            field="tensorboard",
            value=tensorboard,
        )

    stop_name = job_name if job_name is not None else job_name_prefix
    configurations, warnings, permissions = _render_rules(
        checked, region=region, stop_name=stop_name, where=where, framework=framework,
        image=lambda rule: image_for(rule) if image_for is not None else custom_image if rule.is_custom else builtin_image,
        source_uri=lambda rule: source_uri_for(rule) if source_uri_for is not None else None,
    )

    fragment: dict[str, Any] = {}
    if hook is not None:
        requests = [CollectionRequest(rule.where, rule.collections) for rule in checked]
        requests.append(CollectionRequest("debug_hook", hook.collection_configs))
        collections = merge_collections(requests, where=where)
        fragment["DebugHookConfig"] = hook.to_request(
            default_s3_output_path=default_s3_output_path, collections=collections
        )
        warnings += hook.warnings()
    if configurations:
        fragment["DebugRuleConfigurations"] = configurations
    if tensorboard is not None:
        fragment["TensorBoardOutputConfig"] = tensorboard.to_request(
            default_s3_output_path=default_s3_output_path, job_name_prefix=job_name_prefix
        )
    return DebuggerRequest(fragment, warnings, permissions)
