"""Profiler rules: the built-in catalog as classes, ProfilerReport with validated overrides, and custom rules.

``to_rule_configuration()`` renders the ProfilerRuleConfiguration dict exactly as the SageMaker Python SDK sends it: the
same keys in the same order, every RuleParameters value as ``str()`` of the Python value, and no InstanceType or
VolumeSizeInGB for built-in rules (the SDK drops them; the service chooses).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from .api_model import enum_values
from .errors import ConfigurationError, ConfigurationTypeError, did_you_mean
from .images import builtin_rule_image, custom_rule_image
from .parameters import is_token, validate_parameters
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

MAX_RULE_PARAMETERS = 100
MAX_PARAMETER_VALUE_LENGTH = 256
MAX_PARAMETER_KEY_LENGTH = 256
MAX_RULE_NAME_LENGTH = 256
S3_URI = re.compile(r"(https|s3)://([^/]+)/?(.*)")


def _check_name(name: Any, where: str) -> None:
    if is_token(name):
        return
    if not isinstance(name, str):
        raise ConfigurationTypeError(f"expected a string, got {type(name).__name__} {name!r}.", where=where, field="name", value=name)
    if not 1 <= len(name) <= MAX_RULE_NAME_LENGTH:
        raise ConfigurationError(
            f"RuleConfigurationName must be 1 to {MAX_RULE_NAME_LENGTH} characters, got {len(name)}. Choose a shorter name=.",
            where=where,
            field="name",
            value=name,
        )


def check_rule_configuration(config: Mapping[str, Any], *, where: str) -> None:
    """Enforce the API's per-rule limits the service would reject: <= 100 parameters, keys and values <= 256 chars."""
    params = config.get("RuleParameters") or {}
    if len(params) > MAX_RULE_PARAMETERS:
        raise ConfigurationError(
            f"has {len(params)} rule parameters; the API allows at most {MAX_RULE_PARAMETERS}. Remove some parameters.",
            where=where,
            field="RuleParameters",
        )
    for key, value in params.items():
        if is_token(value) or is_token(key):
            continue
        if not 1 <= len(key) <= MAX_PARAMETER_KEY_LENGTH:
            raise ConfigurationError(
                f"parameter name must be 1 to {MAX_PARAMETER_KEY_LENGTH} characters, got {len(key)}.",
                where=where,
                field=f"RuleParameters.{key}",
                value=key,
            )
        if len(value) > MAX_PARAMETER_VALUE_LENGTH:
            raise ConfigurationError(
                f"value is {len(value)} characters; the API allows at most {MAX_PARAMETER_VALUE_LENGTH} per rule parameter "
                f"(value starts {value[:40]!r}). Shorten it, or pass large inputs through S3 instead.",
                where=where,
                field=f"RuleParameters.{key}",
                value=value,
            )


class ProfilerRule:
    """Base class of every profiler rule. Use the catalog classes (``rules.LowGPUUtilization(...)``) or ``custom()``."""

    #: The rule the evaluator container runs (RuleParameters["rule_to_invoke"]).
    rule_to_invoke: str
    #: RuleConfigurationName; unique within a job.
    name: str
    #: Parameters as Python values, in the order they are sent (without rule_to_invoke).
    parameters: dict[str, Any]
    #: Optional LocalPath / S3OutputPath of the rule's processing job.
    local_path: str | None
    s3_output_path: str | None

    is_custom: ClassVar[bool] = False

    def _init_common(self, name: str | None, local_path: str | None, s3_output_path: str | None, default_name: str) -> None:
        self.name = default_name if name is None else name
        _check_name(self.name, self.where)
        if s3_output_path is not None and not is_token(s3_output_path) and not S3_URI.fullmatch(str(s3_output_path)):
            raise ConfigurationError(
                f"must be an S3 URI like 's3://bucket/prefix', got {s3_output_path!r}.",
                where=self.where,
                field="s3_output_path",
                value=s3_output_path,
            )
        self.local_path = local_path
        self.s3_output_path = s3_output_path

    @property
    def where(self) -> str:
        """How error messages refer to this rule."""
        name = getattr(self, "name", None)
        return f"rule {name!r}" if name else f"rule {type(self).__name__}"

    # -- rendering -------------------------------------------------------------------------------------------------------
    def default_image(self, region: str) -> str:
        return builtin_rule_image(region, where=self.where)

    def _rule_parameters(self, source_s3_uri: str | None) -> dict[str, Any]:
        return {**self.parameters, "rule_to_invoke": self.rule_to_invoke}

    def _optional_fields(self) -> dict[str, Any]:
        return {}

    def to_rule_configuration(
        self, *, region: str | None = None, image_uri: str | None = None, source_s3_uri: str | None = None
    ) -> dict[str, Any]:
        """The ProfilerRuleConfiguration dict. Give ``region`` (image looked up) or ``image_uri`` (used as is)."""
        if image_uri is None:
            if region is None:
                raise ConfigurationError(
                    "needs region= (to look up the rule evaluator image) or image_uri=.", where=self.where, field="region"
                )
            image_uri = self.default_image(region)
        config: dict[str, Any] = {"RuleConfigurationName": self.name, "RuleEvaluatorImage": image_uri}
        # Same truthiness rule as the SDK's build_dict: falsy optional fields are omitted.
        for key, value in (
            *self._optional_fields().items(),
            ("LocalPath", self.local_path),
            ("S3OutputPath", self.s3_output_path),
        ):
            if value:
                config[key] = value
        params = {key: value if is_token(value) else str(value) for key, value in self._rule_parameters(source_s3_uri).items()}
        if params:
            config["RuleParameters"] = params
        check_rule_configuration(config, where=self.where)
        return config

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.parameters.items())
        return f"{type(self).__name__}(name={self.name!r}{', ' if args else ''}{args})"

    @staticmethod
    def custom(
        *,
        name: str,
        rule_to_invoke: str,
        instance_type: str,
        volume_size_in_gb: int,
        image_uri: str | None = None,
        source: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
    ) -> CustomProfilerRule:
        """A custom profiler rule: your Python ``source`` run by the custom rule evaluator image, or your own ``image_uri``."""
        return CustomProfilerRule(
            name=name,
            rule_to_invoke=rule_to_invoke,
            instance_type=instance_type,
            volume_size_in_gb=volume_size_in_gb,
            image_uri=image_uri,
            source=source,
            parameters=parameters,
            local_path=local_path,
            s3_output_path=s3_output_path,
        )


class BuiltinProfilerRule(ProfilerRule):
    """A built-in profiler rule from the catalog; subclasses are generated from ``PROFILER_RULE_SPECS``."""

    spec: ClassVar[ProfilerRuleSpec]

    def __init__(
        self, *, name: str | None = None, local_path: str | None = None, s3_output_path: str | None = None, **parameters: Any
    ) -> None:
        self.rule_to_invoke = self.spec.rule_to_invoke
        self._init_common(name, local_path, s3_output_path, self.spec.name)
        self.parameters = validate_parameters(self.spec.parameters, parameters, where=self.where)
        self._check_cross_parameter()

    def _check_cross_parameter(self) -> None:
        if self.spec.name == "Dataloader":
            low, high = self.parameters["min_threshold"], self.parameters["max_threshold"]
            if not (is_token(low) or is_token(high)) and low >= high:
                raise ConfigurationError(
                    f"min_threshold ({low}) must be lower than max_threshold ({high}).",
                    where=self.where,
                    field="min_threshold",
                    value=low,
                )


class ProfilerReport(ProfilerRule):
    """Runs every built-in profiler rule and writes the profiler report.

    Overrides are keyword arguments named ``<RuleName>_<parameter>`` (``CPUBottleneck_threshold=90``), each validated
    against that rule's real parameters and sent with the key as written, as the SDK does.
    """

    def __init__(
        self, *, name: str | None = None, local_path: str | None = None, s3_output_path: str | None = None, **overrides: Any
    ) -> None:
        self.rule_to_invoke = PROFILER_REPORT
        self._init_common(name, local_path, s3_output_path, PROFILER_REPORT)
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


class CustomProfilerRule(ProfilerRule):
    """A profiler rule you wrote: ``source`` (local .py file or s3:// URI) with the custom evaluator, or your own image."""

    is_custom = True

    def __init__(
        self,
        *,
        name: str,
        rule_to_invoke: str,
        instance_type: str,
        volume_size_in_gb: int,
        image_uri: str | None = None,
        source: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
    ) -> None:
        self._init_common(name, local_path, s3_output_path, name)
        where = self.where
        if not isinstance(rule_to_invoke, str) or not rule_to_invoke:
            raise ConfigurationError(
                "is required: the name of the rule class in your source that the evaluator invokes.",
                where=where,
                field="rule_to_invoke",
                value=rule_to_invoke,
            )
        if image_uri is None and source is None:
            raise ConfigurationError(
                "a custom rule needs source= (a local .py file or s3:// URI run by the custom rule evaluator image) "
                "or image_uri= (your own rule container).",
                where=where,
                field="source",
            )
        self.rule_to_invoke = rule_to_invoke
        self.image_uri = image_uri
        self.source = source
        if source is not None and not is_token(source):
            if not isinstance(source, (str, os.PathLike)):
                raise ConfigurationTypeError(
                    f"expected a file path or s3:// URI, got {type(source).__name__}.", where=where, field="source", value=source
                )
            source = os.fspath(source)
            self.source = source
            if not S3_URI.fullmatch(source):
                if not source.endswith(".py"):
                    raise ConfigurationError(
                        f"must be a Python file (.py) or an s3:// URI, got {source!r}.", where=where, field="source", value=source
                    )
                if not os.path.isfile(source):
                    raise ConfigurationError(
                        f"file {source!r} does not exist (relative paths resolve from {os.getcwd()!r}).",
                        where=where,
                        field="source",
                        value=source,
                    )
        allowed = enum_values("ProcessingInstanceType")
        if not is_token(instance_type) and instance_type not in allowed:
            raise ConfigurationError(
                f"{instance_type!r} is not a SageMaker processing instance type.{did_you_mean(str(instance_type), allowed)} "
                "Use e.g. 'ml.m5.xlarge'.",
                where=where,
                field="instance_type",
                value=instance_type,
            )
        self.instance_type = instance_type
        if not is_token(volume_size_in_gb):
            if isinstance(volume_size_in_gb, bool) or not isinstance(volume_size_in_gb, int):
                raise ConfigurationTypeError(
                    f"expected an integer number of GB, got {type(volume_size_in_gb).__name__} {volume_size_in_gb!r}.",
                    where=where,
                    field="volume_size_in_gb",
                    value=volume_size_in_gb,
                )
            if not 1 <= volume_size_in_gb <= 16384:
                raise ConfigurationError(
                    f"must be between 1 and 16384 GB, got {volume_size_in_gb}.",
                    where=where,
                    field="volume_size_in_gb",
                    value=volume_size_in_gb,
                )
        self.volume_size_in_gb = volume_size_in_gb
        params = dict(parameters or {})
        for reserved in ("rule_to_invoke", "source_s3_uri"):
            if reserved in params:
                raise ConfigurationError(
                    f"{reserved!r} is set by the library; pass it as the {reserved.replace('_s3_uri', '')}= argument instead.",
                    where=where,
                    field=f"parameters.{reserved}",
                )
        for key in params:
            if not isinstance(key, str):
                raise ConfigurationTypeError(f"parameter names must be strings, got {key!r}.", where=where, field="parameters")
        self.parameters = params

    @property
    def has_local_source(self) -> bool:
        return self.source is not None and not is_token(self.source) and not S3_URI.fullmatch(self.source)

    def default_image(self, region: str) -> str:
        return self.image_uri if self.image_uri is not None else custom_rule_image(region, where=self.where)

    def to_rule_configuration(
        self, *, region: str | None = None, image_uri: str | None = None, source_s3_uri: str | None = None
    ) -> dict[str, Any]:
        if self.image_uri is not None:
            image_uri = self.image_uri
        if self.has_local_source and source_s3_uri is None:
            raise ConfigurationError(
                f"source {self.source!r} is a local file; upload it and pass source_s3_uri= "
                "(ProfilerRuleSet does this for you with an S3 asset).",
                where=self.where,
                field="source",
            )
        return super().to_rule_configuration(region=region, image_uri=image_uri, source_s3_uri=source_s3_uri)

    def _optional_fields(self) -> dict[str, Any]:
        return {"InstanceType": self.instance_type, "VolumeSizeInGB": self.volume_size_in_gb}

    def _rule_parameters(self, source_s3_uri: str | None) -> dict[str, Any]:
        params: dict[str, Any] = {}
        source = source_s3_uri if source_s3_uri is not None else self.source
        if source:
            params["source_s3_uri"] = source
        params["rule_to_invoke"] = self.rule_to_invoke
        params.update(self.parameters)
        return params


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
