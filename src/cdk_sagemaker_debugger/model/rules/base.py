"""What profiler rules and debugger rules have in common: the rule configuration they render, its API limits, and the
fields and checks of custom rules.

ProfilerRuleConfiguration and DebugRuleConfiguration have the same shape (name, evaluator image, optional
InstanceType/VolumeSizeInGB/LocalPath/S3OutputPath, string RuleParameters), so one base class renders both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from ..api_model import enum_values
from ..errors import ConfigurationError, ConfigurationTypeError, did_you_mean
from ..images import builtin_rule_image, custom_rule_image
from ..tokens import is_token

__all__ = [
    "RuleBase",
    "CustomRuleFields",
    "S3_URI",
    "MAX_RULE_PARAMETERS",
    "MAX_PARAMETER_KEY_LENGTH",
    "MAX_PARAMETER_VALUE_LENGTH",
    "MAX_RULE_NAME_LENGTH",
    "check_rule_name",
    "check_rule_configuration",
    "check_instance_type",
    "check_volume_size",
    "check_rule_source",
    "check_custom_parameters",
]

#: API limits of a rule configuration (botocore service model: RuleParameters, ConfigKey, ConfigValue, name).
MAX_RULE_PARAMETERS = 100
MAX_PARAMETER_KEY_LENGTH = 256
MAX_PARAMETER_VALUE_LENGTH = 256
MAX_RULE_NAME_LENGTH = 256
MAX_VOLUME_SIZE_IN_GB = 16384
S3_URI = re.compile(r"(https|s3)://([^/]+)/?(.*)")


def check_rule_name(name: Any, where: str) -> None:
    """Raise unless ``name`` is a RuleConfigurationName the API accepts (1 to 256 characters)."""
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


def check_instance_type(instance_type: Any, *, where: str) -> None:
    """Raise unless ``instance_type`` is a SageMaker processing instance type (from botocore's enum)."""
    if is_token(instance_type):
        return
    allowed = enum_values("ProcessingInstanceType")
    if instance_type not in allowed:
        raise ConfigurationError(
            f"{instance_type!r} is not a SageMaker processing instance type."
            f"{did_you_mean(str(instance_type), allowed)} Use e.g. 'ml.m5.xlarge'.",
            where=where,
            field="instance_type",
            value=instance_type,
        )


def check_volume_size(volume_size_in_gb: Any, *, where: str) -> None:
    """Raise unless ``volume_size_in_gb`` is a whole number of GB from 1 to 16384."""
    if is_token(volume_size_in_gb):
        return
    if isinstance(volume_size_in_gb, bool) or not isinstance(volume_size_in_gb, int):
        raise ConfigurationTypeError(
            f"expected an integer number of GB, got {type(volume_size_in_gb).__name__} {volume_size_in_gb!r}.",
            where=where,
            field="volume_size_in_gb",
            value=volume_size_in_gb,
        )
    if not 1 <= volume_size_in_gb <= MAX_VOLUME_SIZE_IN_GB:
        raise ConfigurationError(
            f"must be between 1 and {MAX_VOLUME_SIZE_IN_GB} GB, got {volume_size_in_gb}.",
            where=where,
            field="volume_size_in_gb",
            value=volume_size_in_gb,
        )


def check_rule_source(source: Any, *, where: str) -> str:
    """Return ``source`` as a string after checking it is an s3:// URI or an existing local .py file."""
    if is_token(source):
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise ConfigurationTypeError(
            f"expected a file path or s3:// URI, got {type(source).__name__}.", where=where, field="source", value=source
        )
    source = os.fspath(source)
    if S3_URI.fullmatch(source):
        return source
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
    return source


def check_custom_parameters(
    parameters: Mapping[str, Any] | None, *, where: str, reserved: Mapping[str, str]
) -> dict[str, Any]:
    """Validate a custom rule's own RuleParameters and return them as a dict.

    ``reserved`` maps parameter names the library sets to the argument that sets them; a key ending in ``_`` matches
    every name with that prefix (``other_trial_`` covers ``other_trial_0``, ...).
    """
    if parameters is None:
        return {}
    if not isinstance(parameters, Mapping):
        raise ConfigurationTypeError(
            f"expected a dict of parameter name to value, got {type(parameters).__name__}.",
            where=where,
            field="parameters",
            value=parameters,
        )
    for key, value in parameters.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationTypeError(
                f"parameter names must be non-empty strings, got {key!r}.", where=where, field="parameters", value=key
            )
        argument = next(
            (arg for name, arg in reserved.items() if key == name or (name.endswith("_") and key.startswith(name))), None
        )
        if argument is not None:
            raise ConfigurationError(
                f"{key!r} is set by the library; pass it as the {argument}= argument instead.",
                where=where,
                field=f"parameters.{key}",
            )
        if not is_token(value) and (value is None or not isinstance(value, (str, int, float, bool))):
            raise ConfigurationTypeError(
                f"expected a string, number or boolean (sent as a string), got {type(value).__name__} {value!r}.",
                where=where,
                field=f"parameters.{key}",
                value=value,
            )
    return dict(parameters)


class RuleBase:
    """Name, output location and rendering shared by every profiler and debugger rule."""

    #: RuleConfigurationName; unique within a job.
    name: str
    #: Optional LocalPath / S3OutputPath of the rule's processing job.
    local_path: str | None
    s3_output_path: str | None
    #: Parameters as given (Python values), in the order they are sent.
    parameters: dict[str, Any]
    #: A custom rule's own evaluator image; when set it wins over the image the job passes.
    image_uri: str | None = None

    is_custom: ClassVar[bool] = False

    def _init_output(self, name: str, local_path: str | None, s3_output_path: str | None) -> None:
        self.name = name
        check_rule_name(name, self.where)
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

    def default_image(self, region: str) -> str:
        """The rule's evaluator image in ``region``: its own ``image_uri``, else the region's built-in/custom image."""
        if self.image_uri is not None:
            return self.image_uri
        lookup = custom_rule_image if self.is_custom else builtin_rule_image
        return lookup(region, where=self.where)

    def _optional_fields(self) -> dict[str, Any]:
        return {}

    def _render_configuration(
        self, *, region: str | None, image_uri: str | None, parameters: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The rule configuration dict with the SDK's key order; every parameter value is sent as a string."""
        if self.image_uri is not None:
            image_uri = self.image_uri
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
        # strings only: a CDK number token becomes its string form, which renders as a string, not a JSON number
        params = {key: value if isinstance(value, str) else str(value) for key, value in parameters.items()}
        if params:
            config["RuleParameters"] = params
        check_rule_configuration(config, where=self.where)
        return config

    def __repr__(self) -> str:
        args = ", ".join(f"{key}={value!r}" for key, value in self.parameters.items())
        return f"{type(self).__name__}(name={self.name!r}{', ' if args else ''}{args})"


class CustomRuleFields:
    """The fields of a custom rule (profiler or debugger): processing instance, volume, and a source or an own image.

    Mixed in before the rule base class; ``where`` and ``rule_to_invoke`` come from the rule.
    """

    is_custom: ClassVar[bool] = True
    where: str
    rule_to_invoke: str | None
    instance_type: str
    volume_size_in_gb: int
    image_uri: str | None
    source: str | None

    def _init_custom_fields(
        self, *, instance_type: str, volume_size_in_gb: int, image_uri: str | None, source: Any
    ) -> None:
        check_instance_type(instance_type, where=self.where)
        check_volume_size(volume_size_in_gb, where=self.where)
        self.instance_type = instance_type
        self.volume_size_in_gb = volume_size_in_gb
        self.image_uri = image_uri
        self.source = None if source is None else check_rule_source(source, where=self.where)

    @property
    def has_local_source(self) -> bool:
        """True when ``source`` is a local file the construct must upload (as an S3 asset) before rendering."""
        return self.source is not None and not is_token(self.source) and not S3_URI.fullmatch(self.source)

    def _optional_fields(self) -> dict[str, Any]:
        return {"InstanceType": self.instance_type, "VolumeSizeInGB": self.volume_size_in_gb}

    def _source_parameters(self, source_s3_uri: str | None) -> dict[str, Any]:
        """``source_s3_uri`` (the uploaded copy of a local source) and ``rule_to_invoke``, in the SDK's order."""
        if self.has_local_source and source_s3_uri is None:
            raise ConfigurationError(
                f"source {self.source!r} is a local file; upload it and pass source_s3_uri= (ProfiledTrainingJob and "
                "ProfilerRuleSet do this for you with an S3 asset).",
                where=self.where,
                field="source",
            )
        params: dict[str, Any] = {}
        source = source_s3_uri if source_s3_uri is not None else self.source
        if source:
            params["source_s3_uri"] = source
        if self.rule_to_invoke:
            params["rule_to_invoke"] = self.rule_to_invoke
        return params
