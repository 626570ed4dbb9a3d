"""ProfilerRuleSet: the profiler rules of a training job, rendered with the rule images of the stack's region."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from ..model.errors import ConfigurationError, ConfigurationTypeError
from ..model.parameters import is_token
from ..model.profiler_rules import CustomProfilerRule, ProfilerRule
from ._cdk.checks import located
from ._cdk.images import rule_image, rule_image_repository_arn
from ._cdk.lazy import LazyPath as _LazyPath

__all__ = ["ProfilerRuleSet", "MAX_PROFILER_RULES"]

#: The API's limit on ProfilerRuleConfigurations per training job.
MAX_PROFILER_RULES = 20


class ProfilerRuleSet(Construct):
    """The profiler rules attached to a ``ProfiledTrainingJob``.

    Holds built-in and custom rules, enforces the API's limits (at most 20 rules, unique RuleConfigurationName) when a
    rule is added, and renders ProfilerRuleConfigurations with the rule evaluator image of the stack's region (a
    region-to-account CfnMapping in an environment-agnostic stack). A custom rule's local ``source`` file becomes an S3
    asset that the training job's execution role may read.

    :param rules: the rules to start with (``add_rule`` adds more later, up to 20 in all). Default: none.
    """

    def __init__(self, scope: Construct, id: str, *, rules: Sequence[ProfilerRule] | None = None) -> None:
        super().__init__(scope, id)
        self._stack = scope if isinstance(scope, cdk.Stack) else cdk.Stack.of(self)
        self._rules: list[ProfilerRule] = []
        self._assets: dict[str, s3_assets.Asset] = {}
        self._listeners: list[Callable[[ProfilerRule], None]] = []
        self._needs_images = False
        for rule in rules or ():
            self.add_rule(rule)

    @property
    def rules(self) -> tuple[ProfilerRule, ...]:
        return tuple(self._rules)

    @property
    def source_assets(self) -> tuple[s3_assets.Asset, ...]:
        """S3 assets made from the custom rules' local source files."""
        return tuple(self._assets.values())

    def add_rule(self, rule: ProfilerRule) -> ProfilerRule:
        """Add a rule and return it. Raises at once on a duplicate name, the 21st rule or, once a Debugger job uses the
        set, a region without the rule's image."""
        path = _LazyPath(self)
        if not isinstance(rule, ProfilerRule):
            hint = " Debugger (tensor) rules go to ProfiledTrainingJob(debugger_rules=[...])." if hasattr(
                rule, "collections"
            ) else ""
            raise ConfigurationTypeError(
                f"expected a profiler rule from cdk_sagemaker_debugger.rules, got {type(rule).__name__}.{hint}",
                where=path,
                field="rules",
                value=rule,
            )
        if len(self._rules) >= MAX_PROFILER_RULES:
            raise ConfigurationError(
                f"cannot add rule {rule.name!r}: a training job takes at most {MAX_PROFILER_RULES} profiler rules. "
                "ProfilerReport alone runs every built-in rule; use it instead of listing them one by one.",
                where=path,
                field="rules",
                value=rule.name,
            )
        if not is_token(rule.name) and any(existing.name == rule.name for existing in self._rules):
            raise ConfigurationError(
                f"RuleConfigurationName {rule.name!r} is already used in this rule set; names must be unique. "
                f"Pass name='{rule.name}2' (or another unique name) to the second rule.",
                where=path,
                field="rules",
                value=rule.name,
            )
        if self._needs_images:
            self._check_image(rule)
        self._rules.append(rule)
        if isinstance(rule, CustomProfilerRule) and rule.has_local_source:
            self._assets[rule.name] = s3_assets.Asset(self, f"Source{len(self._assets)}", path=rule.source)
        for listener in self._listeners:
            listener(rule)
        return rule

    def require_rule_images(self) -> None:
        """Called by a job that runs these rules on SageMaker Debugger: each rule, now and later, needs Debugger's rule
        image in the stack's region (RuleEngine.EVALUATOR needs none, so the check waits until a job asks for it)."""
        self._needs_images = True
        for rule in self._rules:
            self._check_image(rule)

    def _check_image(self, rule: ProfilerRule) -> None:
        located(self, lambda: rule_image(self._stack, custom=rule.is_custom and getattr(rule, "image_uri", None) is None))

    def on_rule_added(self, listener: Callable[[ProfilerRule], None]) -> None:
        """Call ``listener`` for every rule in the set now and for each rule added later (the job grants its role
        what each rule needs this way, so rules added after the job get their permissions too)."""
        self._listeners.append(listener)
        for rule in self._rules:
            listener(rule)

    def add_rules(self, rules: Iterable[ProfilerRule]) -> list[ProfilerRule]:
        """Add each rule in order (as :meth:`add_rule`) and return them; a rule that fails stops the rest."""
        return [self.add_rule(rule) for rule in rules]

    def render(self) -> list[dict[str, Any]]:
        """The ProfilerRuleConfigurations list of the CreateTrainingJob request."""
        configurations = []
        for rule in self._rules:
            asset = self._assets.get(rule.name)
            source_uri = asset.s3_object_url if asset is not None else None
            custom_image = rule.is_custom and getattr(rule, "image_uri", None) is None
            image = getattr(rule, "image_uri", None) or rule_image(self._stack, custom=custom_image)
            configurations.append(
                located(self, lambda r=rule, i=image, s=source_uri: r.to_rule_configuration(image_uri=i, source_s3_uri=s))
            )
        return configurations

    def source_object_arn(self, rule: ProfilerRule) -> str | None:
        """ARN of ``rule``'s uploaded source file (None unless it is a custom rule with a local source)."""
        asset = self._assets.get(rule.name)
        return asset.bucket.arn_for_objects(asset.s3_object_key) if asset is not None else None

    def grant_read_source(self, grantee: iam.IGrantable, rule: ProfilerRule) -> iam.Grant | None:
        """Let ``grantee`` read ``rule``'s uploaded source file, and nothing else in the asset bucket."""
        arn = self.source_object_arn(rule)
        if arn is None:
            return None
        return iam.Grant.add_to_principal(grantee=grantee, actions=["s3:GetObject"], resource_arns=[arn])

    def image_repository_arn(self, rule: ProfilerRule) -> str | None:
        """ECR repository of the evaluator image that runs ``rule`` (None for a custom rule with its own image)."""
        if getattr(rule, "image_uri", None) is not None:
            return None
        return rule_image_repository_arn(self._stack, custom=rule.is_custom)
