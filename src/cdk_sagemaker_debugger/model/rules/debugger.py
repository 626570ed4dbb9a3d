"""Debugger (tensor) rules: the classes of the 21 built-in rules (generated from ``debugger_catalog.py``), and custom
rules.

``to_rule_configuration()`` renders the DebugRuleConfiguration the SageMaker Python SDK sends (same keys, same order,
same RuleParameters merge order), with two fixes where the SDK is wrong:

* Every RuleParameters value is sent as a string. The SDK passes ints and bools through unchanged and the API
  rejects them (``Invalid type for parameter ...RuleParameters.num_steps``).
* The collections a rule needs are returned by :attr:`Rule.collections` and merged deterministically with the hook's
  (:func:`~cdk_sagemaker_debugger.model.debug_hook.merge_collections`) instead of through a Python set.

Like the SDK, only the parameters you pass are sent; the documented defaults live in the rule container and are listed
here for validation and documentation. Unlike the SDK, parameter names and values are validated at synth time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..actions import ACTION_JSON_MAX_LENGTH, Action, ActionList, check_actions
from ..debug_hook import CollectionConfig
from ..errors import ConfigurationError, ConfigurationTypeError, did_you_mean
from ..job_family import job_name_pattern
from .base import S3_URI, CustomRuleFields, RuleBase, check_custom_parameters
from .debugger_catalog import (
    _SPECS,
    DEBUGGER_RULE_SPECS,
    DEEP_LEARNING,
    DEEP_LEARNING_AND_XGBOOST,
    DEEP_LEARNING_APPLICATIONS,
    XGBOOST,
    XGBOOST_REPORT,
    DebuggerRuleSpec,
    RuleScope,
)
from .parameters import Param, check_order, is_token, validate_parameters

#: The name the debugger catalog's parameter specs had; the one vocabulary's class (``parameters.Param``).
TensorParameterSpec = Param

__all__ = [
    "Rule",
    "BuiltinRule",
    "CustomRule",
    "RuleScope",
    "DebuggerRuleSpec",
    "TensorParameterSpec",
    "RulePermissions",
    "DEBUGGER_RULE_SPECS",
    "RULE_CLASSES",
    "DEEP_LEARNING",
    "DEEP_LEARNING_AND_XGBOOST",
    "DEEP_LEARNING_APPLICATIONS",
    "XGBOOST",
    "XGBOOST_REPORT",
    "from_name",
]

# --- IAM needs of rule actions -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RulePermissions:
    """What the rule container needs from the job's execution role to run the rules' actions.

    ``notification_topic``: the ``SMDebugRules`` SNS topic (Email and SMS actions); ``notification_endpoints`` the
    ``(protocol, endpoint)`` pairs the container subscribes to it. ``stop_training_job_prefixes``: StopTrainingJob on
    jobs with these name prefixes, plus ListTrainingJobs.
    """

    notification_topic: bool = False
    stop_training_job_prefixes: tuple[str, ...] = ()
    notification_endpoints: tuple[tuple[str, str], ...] = ()

    #: The topic the rule container publishes Email and SMS actions to.
    TOPIC_NAME: ClassVar[str] = "SMDebugRules"

    @property
    def stops_training(self) -> bool:
        return bool(self.stop_training_job_prefixes)

    def training_job_name_patterns(self) -> tuple[str, ...]:
        """Resource-name patterns for ``sagemaker:StopTrainingJob`` (``arn:...:training-job/<pattern>``).

        SageMaker writes job names in lowercase in ARNs, so the prefixes are lowercased (tokens are left as they are).
        ``sagemaker:ListTrainingJobs`` has no resource-level permissions and needs ``*``.
        """
        return tuple(job_name_pattern(prefix) for prefix in self.stop_training_job_prefixes)

    def __or__(self, other: RulePermissions) -> RulePermissions:
        prefixes = dict.fromkeys((*self.stop_training_job_prefixes, *other.stop_training_job_prefixes))
        endpoints = dict.fromkeys((*self.notification_endpoints, *other.notification_endpoints))
        return RulePermissions(self.notification_topic or other.notification_topic, tuple(prefixes), tuple(endpoints))


# --- rules ---------------------------------------------------------------------------------------------------------------


def _check_other_trials(value: Any, *, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigurationTypeError(
            f"expected a list of S3 URIs of other jobs' Debugger output, got {type(value).__name__} {value!r}.",
            where=where,
            field="other_trials",
            value=value,
        )
    trials = tuple(value)
    for trial in trials:
        if not is_token(trial) and (not isinstance(trial, str) or not S3_URI.fullmatch(trial)):
            raise ConfigurationError(
                f"every item must be an S3 URI like 's3://bucket/other-job/debug-output', got {trial!r}.",
                where=where,
                field="other_trials",
                value=trial,
            )
    return trials


def _check_collections(value: Any, *, where: str) -> tuple[CollectionConfig, ...] | None:
    if value is None:
        return None
    if isinstance(value, (CollectionConfig, str)) or not isinstance(value, Iterable):
        raise ConfigurationTypeError(
            f"expected a list of CollectionConfig, got {type(value).__name__} {value!r}.",
            where=where,
            field="collections_to_save",
            value=value,
        )
    items = tuple(value)
    for item in items:
        if not isinstance(item, CollectionConfig):
            raise ConfigurationTypeError(
                f"expected CollectionConfig items, got {type(item).__name__} {item!r}.",
                where=where,
                field="collections_to_save",
                value=item,
            )
    return items


class Rule(RuleBase):
    """Base class of debugger rules. Use the catalog classes (``debugger_rules.LossNotDecreasing(...)``) or
    :meth:`Rule.custom`."""

    rule_to_invoke: str | None
    other_trials: tuple[str, ...]
    actions: Action | ActionList | None

    #: Framework scope of a built-in rule; None for custom rules.
    scope: ClassVar[RuleScope | None] = None
    #: ``Rule.custom(name=..., ...)`` builds a :class:`CustomRule` (assigned below, once the class exists).
    custom: ClassVar[type[CustomRule]]

    def _init_common(
        self,
        *,
        name: str,
        actions: Any,
        local_path: str | None,
        s3_output_path: str | None,
        other_trials: Any,
        collections_to_save: Any,
    ) -> None:
        self._init_output(name, local_path, s3_output_path)
        self.actions = check_actions(actions, where=self.where)
        self.other_trials = _check_other_trials(other_trials, where=self.where)
        self._collections_to_save = _check_collections(collections_to_save, where=self.where)

    @property
    def collections(self) -> tuple[CollectionConfig, ...]:
        """The collections the hook must save for this rule (``collections_to_save`` replaces the built-in ones)."""
        return self._collections_to_save if self._collections_to_save is not None else self._default_collections()

    def _default_collections(self) -> tuple[CollectionConfig, ...]:
        return ()

    # -- hooks for subclasses ---------------------------------------------------------------------------------------------
    def _leading_parameters(self, source_s3_uri: str | None) -> dict[str, Any]:
        return {"rule_to_invoke": self.rule_to_invoke}

    def _rendered_parameters(self, job_name_prefix: str | None) -> dict[str, Any]:
        # RuleParameters are strings; a CDK number token is turned into its string form too (rendered as a string)
        return {key: value if isinstance(value, str) else str(value) for key, value in self.parameters.items()}

    # -- actions and permissions ------------------------------------------------------------------------------------------
    def _filled_actions(self, job_name_prefix: str | None) -> Action | ActionList | None:
        if self.actions is None:
            return None
        needs_prefix = any(getattr(action, "needs_job_prefix", False) for action in self.actions)
        if not needs_prefix:
            return self.actions
        if job_name_prefix is None:
            raise ConfigurationError(
                "StopTraining() without a prefix stops the job this rule belongs to, so rendering needs "
                "job_name_prefix=. Pass it, or give StopTraining('<job-name-prefix>') explicitly.",
                where=self.where,
                field="actions",
            )
        return self.actions.with_job_prefix(job_name_prefix)

    def _action_json(self, job_name_prefix: str | None) -> str | None:
        actions = self._filled_actions(job_name_prefix)
        if actions is None:
            return None
        text = actions.serialize()
        if not is_token(text) and len(text) > ACTION_JSON_MAX_LENGTH:
            raise ConfigurationError(
                f"the actions serialize to {len(text)} characters, but the API allows at most "
                f"{ACTION_JSON_MAX_LENGTH} per rule parameter (action_json = {text[:60]!r}...). Use fewer actions, "
                "a shorter StopTraining prefix or shorter addresses; or notify through one SNS topic subscription "
                "with RuleAlarm instead.",
                where=self.where,
                field="actions",
                value=len(text),
            )
        return text

    def permissions(self, *, job_name_prefix: str | None = None) -> RulePermissions:
        """What the job's execution role needs so the rule container can run this rule's actions."""
        actions = self._filled_actions(job_name_prefix)
        if actions is None:
            return RulePermissions()
        prefixes = tuple(action.training_job_prefix for action in actions if action.stops_training)  # type: ignore[attr-defined]
        endpoints = tuple((action.action_name, action.endpoint) for action in actions if action.notifies)  # type: ignore[attr-defined]
        return RulePermissions(
            any(action.notifies for action in actions), tuple(dict.fromkeys(prefixes)), tuple(dict.fromkeys(endpoints))
        )

    # -- rendering ------------------------------------------------------------------------------------------------------------
    def to_rule_configuration(
        self,
        *,
        region: str | None = None,
        image_uri: str | None = None,
        job_name_prefix: str | None = None,
        source_s3_uri: str | None = None,
    ) -> dict[str, Any]:
        """The DebugRuleConfiguration dict.

        Give ``region`` (the rule image is looked up) or ``image_uri`` (used as is, e.g. a CloudFormation token).
        ``job_name_prefix`` fills in StopTraining actions without a prefix.
        """
        params: dict[str, Any] = {f"other_trial_{index}": trial for index, trial in enumerate(self.other_trials)}
        params.update(self._leading_parameters(source_s3_uri))
        params.update(self._rendered_parameters(job_name_prefix))
        action_json = self._action_json(job_name_prefix)
        if action_json is not None:
            params["action_json"] = action_json
        return self._render_configuration(region=region, image_uri=image_uri, parameters=params)

    def framework_warning(self, framework_name: str | None) -> str | None:
        """A warning when the training framework is outside the rule's documented scope."""
        if self.scope is None or framework_name is None or framework_name in self.scope.frameworks:
            return None
        return (
            f"{self.where}: {type(self).__name__} applies to {self.scope.label} training, but the training image is "
            f"{framework_name}; the rule will probably find no tensors to check."
        )


class BuiltinRule(Rule):
    """A built-in debugger rule from the catalog; the subclasses are generated from ``DEBUGGER_RULE_SPECS``."""

    spec: ClassVar[DebuggerRuleSpec]

    def __init__(
        self,
        *,
        name: str | None = None,
        actions: Action | ActionList | None = None,
        collections_to_save: Sequence[CollectionConfig] | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        other_trials: Sequence[str] | None = None,
        **parameters: Any,
    ) -> None:
        spec = self.spec
        self.rule_to_invoke = spec.rule_to_invoke
        self._init_common(
            name=spec.name if name is None else name,
            actions=actions,
            local_path=local_path,
            s3_output_path=s3_output_path,
            other_trials=other_trials,
            collections_to_save=collections_to_save,
        )
        if "rule_to_invoke" in parameters:
            raise ConfigurationError(
                "a built-in rule always invokes itself; to run your own rule class use debugger_rules.Rule.custom(...).",
                where=self.where,
                field="rule_to_invoke",
                value=parameters["rule_to_invoke"],
            )
        if spec.needs_other_trials and not self.other_trials:
            raise ConfigurationError(
                "needs other_trials=[...]: the S3 URIs of the Debugger output of the runs to compare with, e.g. "
                "['s3://bucket/output/other-job/debug-output'].",
                where=self.where,
                field="other_trials",
            )
        if self.other_trials and not spec.needs_other_trials:
            raise ConfigurationError(
                f"{spec.name} does not compare runs, so other_trials has no effect. Remove it (SimilarAcrossRuns "
                "and custom rules take other_trials).",
                where=self.where,
                field="other_trials",
            )
        given = {key: value for key, value in parameters.items() if value is not None}
        validate_parameters(spec.parameters, given, where=self.where)
        self.parameters = given
        self._check_combinations()

    def _default_collections(self) -> tuple[CollectionConfig, ...]:
        return self.spec.collections

    def _check_combinations(self) -> None:
        params = self.parameters
        check_order(self.spec.parameters, params, self.spec.ordered, where=self.where)
        if self.spec.name == "NLPSequenceRatio":
            self._check_token_lists()
        if self.spec.name == "StalledTrainingRule" and "training_job_name_prefix" in params:
            if not params.get("stop_training_on_fire"):
                raise ConfigurationError(
                    "training_job_name_prefix only matters with stop_training_on_fire=True. Set it, or remove the prefix.",
                    where=self.where,
                    field="training_job_name_prefix",
                    value=params["training_job_name_prefix"],
                )

    def _check_token_lists(self) -> None:
        specs = {spec.name: spec for spec in self.spec.parameters}
        values = specs["token_values"].render(self.parameters.get("token_values", specs["token_values"].default))
        thresholds = specs["token_thresholds_percent"].render(
            self.parameters.get("token_thresholds_percent", specs["token_thresholds_percent"].default)
        )
        if is_token(values) or is_token(thresholds):
            return
        if len(values.split(",")) != len(thresholds.split(",")):
            raise ConfigurationError(
                f"token_values ({values!r}) and token_thresholds_percent ({thresholds!r}) need one threshold per "
                "token value.",
                where=self.where,
                field="token_thresholds_percent",
                value=thresholds,
            )

    def _stops_training_on_fire(self) -> bool:
        return self.spec.name == "StalledTrainingRule" and self.parameters.get("stop_training_on_fire") is True

    def _rendered_parameters(self, job_name_prefix: str | None) -> dict[str, Any]:
        specs = {spec.name: spec for spec in self.spec.parameters}
        rendered = {key: specs[key].render(value) for key, value in self.parameters.items()}
        if self._stops_training_on_fire() and "training_job_name_prefix" not in rendered:
            if job_name_prefix is None:
                raise ConfigurationError(
                    "stop_training_on_fire=True needs the name prefix of the job to stop: pass job_name_prefix= when "
                    "rendering, or training_job_name_prefix=.",
                    where=self.where,
                    field="training_job_name_prefix",
                )
            rendered["training_job_name_prefix"] = job_name_prefix
        return rendered

    def permissions(self, *, job_name_prefix: str | None = None) -> RulePermissions:
        own = super().permissions(job_name_prefix=job_name_prefix)
        if not self._stops_training_on_fire():
            return own
        prefix = self.parameters.get("training_job_name_prefix", job_name_prefix)
        return own | RulePermissions(stop_training_job_prefixes=(prefix,) if prefix else ())


# --- custom rules --------------------------------------------------------------------------------------------------------

#: Parameters of a custom debugger rule that the library sets, and the argument that sets each.
_RESERVED_PARAMETERS = {
    "rule_to_invoke": "rule_to_invoke",
    "source_s3_uri": "source",
    "action_json": "actions",
    "other_trial_": "other_trials",
}


class CustomRule(CustomRuleFields, Rule):
    """A debugger rule you wrote: ``source`` (a local .py file or s3:// URI) run by the custom rule evaluator image of
    the region, or your own ``image_uri``. ``source`` and ``rule_to_invoke`` go together; ``other_trials`` passes other
    jobs' Debugger output (``other_trial_0``, ...) for cross-run comparisons. ``parameters`` are your rule's own
    RuleParameters, sent as strings (the SDK calls them ``rule_parameters``)."""

    def __init__(
        self,
        *,
        name: str,
        instance_type: str,
        volume_size_in_gb: int,
        image_uri: str | None = None,
        source: str | os.PathLike[str] | None = None,
        rule_to_invoke: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        other_trials: Sequence[str] | None = None,
        collections_to_save: Sequence[CollectionConfig] | None = None,
        actions: Action | ActionList | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
    ) -> None:
        if not isinstance(name, str) and not is_token(name):
            raise ConfigurationTypeError(
                f"a custom rule needs name= (its RuleConfigurationName), got {name!r}.",
                where="custom debugger rule",
                field="name",
                value=name,
            )
        self._init_common(
            name=name,
            actions=actions,
            local_path=local_path,
            s3_output_path=s3_output_path,
            other_trials=other_trials,
            collections_to_save=collections_to_save,
        )
        where = self.where
        if (source is None) != (rule_to_invoke is None):
            missing = "rule_to_invoke" if rule_to_invoke is None else "source"
            raise ConfigurationError(
                "source and rule_to_invoke go together: the evaluator loads source and runs the rule class "
                f"rule_to_invoke from it. {missing} is missing.",
                where=where,
                field=missing,
            )
        if source is None and image_uri is None:
            raise ConfigurationError(
                "a custom rule needs source= and rule_to_invoke= (run by the custom rule evaluator image), or "
                "image_uri= (your own rule container).",
                where=where,
                field="source",
            )
        if rule_to_invoke is not None and (not isinstance(rule_to_invoke, str) or not rule_to_invoke):
            raise ConfigurationTypeError(
                f"expected the name of the rule class in source, got {rule_to_invoke!r}.",
                where=where,
                field="rule_to_invoke",
                value=rule_to_invoke,
            )
        self.rule_to_invoke = rule_to_invoke
        self._init_custom_fields(
            instance_type=instance_type, volume_size_in_gb=volume_size_in_gb, image_uri=image_uri, source=source
        )
        self.parameters = check_custom_parameters(parameters, where=where, reserved=_RESERVED_PARAMETERS)

    def _leading_parameters(self, source_s3_uri: str | None) -> dict[str, Any]:
        return self._source_parameters(source_s3_uri)


Rule.custom = CustomRule


# --- generated classes ---------------------------------------------------------------------------------------------------


def _make_rule_class(spec: DebuggerRuleSpec) -> type[BuiltinRule]:
    lines = [
        spec.summary,
        "",
        f"Scope: {spec.scope.label}. SDK equivalent: rule_configs.{spec.function_name}().",
        "Parameters (documented container defaults; only the ones you pass are sent):",
    ]
    lines += [f"    {p.name} ({p.python_type}, default {p.default!r}): {p.doc}" for p in spec.parameters]
    if spec.collections:
        lines.append("Collections saved by the hook: " + ", ".join(repr(c) for c in spec.collections))
    attributes = {"spec": spec, "scope": spec.scope, "__doc__": "\n".join(lines), "__module__": __name__}
    return type(spec.name, (BuiltinRule,), attributes)


#: Every built-in debugger rule class by name.
RULE_CLASSES: dict[str, type[BuiltinRule]] = {name: _make_rule_class(spec) for name, spec in DEBUGGER_RULE_SPECS.items()}
globals().update(RULE_CLASSES)
__all__ += list(RULE_CLASSES)

_BY_FUNCTION_NAME = {spec.function_name: spec.name for spec in _SPECS}


def from_name(rule_name: str, **kwargs: Any) -> BuiltinRule:
    """A built-in rule by class name or SDK function name: ``from_name("loss_not_decreasing", num_steps=20)``."""
    cls = RULE_CLASSES.get(rule_name) or RULE_CLASSES.get(_BY_FUNCTION_NAME.get(rule_name, ""))
    if cls is None:
        names = [*RULE_CLASSES, *_BY_FUNCTION_NAME]
        raise ConfigurationError(
            f"unknown debugger rule {rule_name!r}.{did_you_mean(str(rule_name), names)} "
            f"Built-in rules: {', '.join(RULE_CLASSES)}.",
            field="rule",
            value=rule_name,
        )
    return cls(**kwargs)
