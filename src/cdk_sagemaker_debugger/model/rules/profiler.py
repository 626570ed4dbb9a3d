"""Profiler rules: the built-in catalog as classes, ProfilerReport with validated overrides, and custom rules.

``to_rule_configuration()`` renders the ProfilerRuleConfiguration dict exactly as the SageMaker Python SDK sends it: the
same keys in the same order, every RuleParameters value as ``str()`` of the Python value, and no InstanceType or
VolumeSizeInGB for built-in rules (the SDK drops them; the service chooses).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar

from ..actions import profiler_rule_actions_error
from ..errors import ConfigurationError, ConfigurationTypeError, did_you_mean
from .base import (
    MAX_PARAMETER_VALUE_LENGTH,
    MAX_RULE_NAME_LENGTH,
    MAX_RULE_PARAMETERS,
    CustomRuleFields,
    RuleBase,
    check_custom_parameters,
    check_rule_configuration,
)
from .parameters import check_order, validate_parameters
from .profiler_catalog import OVERRIDABLE_BY_PROFILER_REPORT, PROFILER_REPORT, PROFILER_RULE_SPECS, ProfilerRuleSpec

__all__ = [
    "ProfilerRule",
    "BuiltinProfilerRule",
    "ProfilerReport",
    "CustomProfilerRule",
    "from_name",
    "RULE_CLASSES",
    "MAX_RULE_PARAMETERS",
    "MAX_PARAMETER_VALUE_LENGTH",
    "MAX_RULE_NAME_LENGTH",
    "check_rule_configuration",
]

#: Parameters of a custom profiler rule that the library sets, and the argument that sets each.
_RESERVED_PARAMETERS = {"rule_to_invoke": "rule_to_invoke", "source_s3_uri": "source"}


def _reject_actions(actions: object, where: str) -> None:
    # Accepting actions= only to refuse it turns the SDK habit into an explanation instead of "unknown parameter".
    if actions is not None:
        raise profiler_rule_actions_error(where=where)


class ProfilerRule(RuleBase):
    """Base class of every profiler rule. Use the catalog classes (``rules.LowGPUUtilization(...)``) or ``custom()``."""

    #: The rule the evaluator container runs (RuleParameters["rule_to_invoke"]).
    rule_to_invoke: str
    #: ``ProfilerRule.custom(name=..., ...)`` builds a :class:`CustomProfilerRule` (assigned once the class exists).
    custom: ClassVar[type[CustomProfilerRule]]

    def _init_common(
        self, name: str | None, local_path: str | None, s3_output_path: str | None, default_name: str, actions: object
    ) -> None:
        self._init_output(default_name if name is None else name, local_path, s3_output_path)
        _reject_actions(actions, self.where)

    # -- rendering -------------------------------------------------------------------------------------------------------
    def _rule_parameters(self, source_s3_uri: str | None) -> dict[str, Any]:
        return {**self.parameters, "rule_to_invoke": self.rule_to_invoke}

    def to_rule_configuration(
        self, *, region: str | None = None, image_uri: str | None = None, source_s3_uri: str | None = None
    ) -> dict[str, Any]:
        """The ProfilerRuleConfiguration dict. Give ``region`` (image looked up) or ``image_uri`` (used as is)."""
        return self._render_configuration(region=region, image_uri=image_uri, parameters=self._rule_parameters(source_s3_uri))


class BuiltinProfilerRule(ProfilerRule):
    """A built-in profiler rule from the catalog; subclasses are generated from ``PROFILER_RULE_SPECS``."""

    spec: ClassVar[ProfilerRuleSpec]

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        actions: object = None,
        **parameters: Any,
    ) -> None:
        self.rule_to_invoke = self.spec.rule_to_invoke
        self._init_common(name, local_path, s3_output_path, self.spec.name, actions)
        self.parameters = validate_parameters(self.spec.parameters, parameters, where=self.where)
        check_order(self.spec.parameters, parameters, self.spec.ordered, where=self.where)


class ProfilerReport(ProfilerRule):
    """Runs every built-in profiler rule and writes the profiler report.

    Overrides are keyword arguments named ``<RuleName>_<parameter>`` (``CPUBottleneck_threshold=90``), each validated
    against that rule's real parameters and sent with the key as written, as the SDK does.
    """

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        actions: object = None,
        **overrides: Any,
    ) -> None:
        self.rule_to_invoke = PROFILER_REPORT
        self._init_common(name, local_path, s3_output_path, PROFILER_REPORT, actions)
        self.parameters = {}
        for key, value in overrides.items():
            spec, parameter = self._resolve_override(key)
            validate_parameters(spec.parameters, {parameter: value}, where=f"{self.where} > {spec.name}")
            self.parameters[key] = value

    def _resolve_override(self, key: str) -> tuple[ProfilerRuleSpec, str]:
        valid_keys = [f"{s.name}_{p.name}" for s in OVERRIDABLE_BY_PROFILER_REPORT.values() for p in s.parameters]
        rule_name, sep, parameter = key.partition("_")
        spec = OVERRIDABLE_BY_PROFILER_REPORT.get(rule_name)
        if not sep or spec is None or parameter not in {p.name for p in spec.parameters}:
            if rule_name in PROFILER_RULE_SPECS and rule_name not in OVERRIDABLE_BY_PROFILER_REPORT:
                reason = f"ProfilerReport does not accept overrides for {rule_name}."
            elif spec is not None:
                accepted = ", ".join(p.name for p in spec.parameters)
                reason = f"{rule_name} has no parameter {parameter!r} (accepted: {accepted})."
            else:
                reason = (
                    "overrides are named <RuleName>_<parameter>, where RuleName is one of "
                    f"{', '.join(OVERRIDABLE_BY_PROFILER_REPORT)}."
                )
            raise ConfigurationTypeError(
                f"unknown override {key!r}: {reason}{did_you_mean(key, valid_keys)}", where=self.where, field=key, value=key
            )
        return spec, parameter


class CustomProfilerRule(CustomRuleFields, ProfilerRule):
    """A profiler rule you wrote: ``source`` (local .py file or s3:// URI) with the custom evaluator, or your own image."""

    def __init__(
        self,
        *,
        name: str,
        rule_to_invoke: str,
        instance_type: str,
        volume_size_in_gb: int,
        image_uri: str | None = None,
        source: str | os.PathLike[str] | None = None,
        parameters: Mapping[str, Any] | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        actions: object = None,
    ) -> None:
        self._init_common(name, local_path, s3_output_path, name, actions)
        if not isinstance(rule_to_invoke, str) or not rule_to_invoke:
            raise ConfigurationError(
                "is required: the name of the rule class in your source that the evaluator invokes.",
                where=self.where,
                field="rule_to_invoke",
                value=rule_to_invoke,
            )
        if image_uri is None and source is None:
            raise ConfigurationError(
                "a custom rule needs source= (a local .py file or s3:// URI run by the custom rule evaluator image) "
                "or image_uri= (your own rule container).",
                where=self.where,
                field="source",
            )
        self.rule_to_invoke = rule_to_invoke
        self._init_custom_fields(
            instance_type=instance_type, volume_size_in_gb=volume_size_in_gb, image_uri=image_uri, source=source
        )
        self.parameters = check_custom_parameters(parameters, where=self.where, reserved=_RESERVED_PARAMETERS)

    def _rule_parameters(self, source_s3_uri: str | None) -> dict[str, Any]:
        return {**self._source_parameters(source_s3_uri), **self.parameters}


ProfilerRule.custom = CustomProfilerRule


def _make_rule_class(spec: ProfilerRuleSpec) -> type[BuiltinProfilerRule]:
    lines = [spec.summary, "", "Parameters (defaults as sent by the released rule config):"]
    lines += [f"    {p.name} ({p.python_type}, default {p.default!r}): {p.doc}" for p in spec.parameters]
    return type(spec.name, (BuiltinProfilerRule,), {"spec": spec, "__doc__": "\n".join(lines), "__module__": __name__})


#: Every built-in rule class by name, ProfilerReport included.
RULE_CLASSES: dict[str, type[ProfilerRule]] = {name: _make_rule_class(spec) for name, spec in PROFILER_RULE_SPECS.items()}
RULE_CLASSES[PROFILER_REPORT] = ProfilerReport
globals().update(RULE_CLASSES)
__all__ += [name for name in RULE_CLASSES if name not in __all__]


def from_name(rule_name: str, **parameters: Any) -> ProfilerRule:
    """Build a built-in rule by name: ``from_name("LowGPUUtilization", threshold_p95=80)``."""
    cls = RULE_CLASSES.get(rule_name)
    if cls is None:
        raise ConfigurationError(
            f"unknown profiler rule {rule_name!r}.{did_you_mean(rule_name, RULE_CLASSES)} "
            f"Built-in rules: {', '.join(RULE_CLASSES)}.",
            field="rule",
            value=rule_name,
        )
    return cls(**parameters)
