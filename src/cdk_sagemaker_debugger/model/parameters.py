"""Typed parameter specifications and their validators, shared by the profiler and debugger rule catalogs.

The released ``smdebug-rulesconfig`` validates with ``assert`` (gone under ``python -O``) and lets ``0.5`` through as a
"positive integer". Here every check raises a real exception that names the rule, the parameter, the value and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigurationError, ConfigurationTypeError, did_you_mean

__all__ = ["Kind", "ParameterSpec", "validate_parameters", "is_token"]


def is_token(value: object) -> bool:
    """True for unresolved CDK tokens (``${Token[...]}`` strings or the number encodings), without importing aws_cdk."""
    if isinstance(value, str):
        return "${Token[" in value or "#{Token[" in value
    if isinstance(value, float):
        # CDK encodes number tokens as special negative doubles around -1.8881545897087626e+289.
        return value < -1e280
    return False


def _number(spec: ParameterSpec, value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationTypeError(
            f"expected a number, got {type(value).__name__} {value!r}. Pass it unquoted, e.g. {spec.name}={spec.example!r}.",
            where=where,
            field=spec.name,
            value=value,
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigurationError(f"must be a finite number, got {value!r}.", where=where, field=spec.name, value=value)
    return value


def _check_percentile(spec: ParameterSpec, value: Any, where: str) -> None:
    number = _number(spec, value, where)
    if not 0 <= number <= 100:
        raise ConfigurationError(
            f"is a percentage and must be between 0 and 100 inclusive, got {value!r}.",
            where=where,
            field=spec.name,
            value=value,
        )


def _check_proportion(spec: ParameterSpec, value: Any, where: str) -> None:
    number = _number(spec, value, where)
    if not 0 <= number <= 1:
        hint = f" Did you mean {number / 100:g} ({number:g}%)?" if 1 < number <= 100 else ""
        raise ConfigurationError(
            f"is a proportion between 0 and 1 (0.2 means 20%), got {value!r}.{hint}",
            where=where,
            field=spec.name,
            value=value,
        )


def _check_positive_int(spec: ParameterSpec, value: Any, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationTypeError(
            f"expected a positive integer, got {type(value).__name__} {value!r}.",
            where=where,
            field=spec.name,
            value=value,
        )
    if value <= 0:
        raise ConfigurationError(
            f"must be a positive integer (> 0), got {value!r}.", where=where, field=spec.name, value=value
        )


def _check_positive_number(spec: ParameterSpec, value: Any, where: str) -> None:
    if _number(spec, value, where) <= 0:
        raise ConfigurationError(f"must be greater than 0, got {value!r}.", where=where, field=spec.name, value=value)


def _check_choice(spec: ParameterSpec, value: Any, where: str) -> None:
    if value is None and spec.default is None:
        return
    if not isinstance(value, str):
        raise ConfigurationTypeError(
            f"expected one of {', '.join(map(repr, spec.choices))}"
            f"{' or None' if spec.default is None else ''}, got {type(value).__name__} {value!r}.",
            where=where,
            field=spec.name,
            value=value,
        )
    if value not in spec.choices:
        raise ConfigurationError(
            f"must be one of {', '.join(map(repr, spec.choices))}, got {value!r}.{did_you_mean(value, spec.choices)}",
            where=where,
            field=spec.name,
            value=value,
        )


def _check_any(spec: ParameterSpec, value: Any, where: str) -> None:
    return None


_CHECKS: dict[str, Callable[[ParameterSpec, Any, str], None]] = {
    "percentile": _check_percentile,
    "proportion": _check_proportion,
    "positive_int": _check_positive_int,
    "positive_number": _check_positive_number,
    "choice": _check_choice,
    "any": _check_any,
}

Kind = str


@dataclass(frozen=True)
class ParameterSpec:
    """One rule parameter: its name, the default SageMaker's released rule config sends, and how to validate it."""

    name: str
    default: Any
    #: How the value is checked: ``percentile``, ``proportion``, ``positive_int``, ``positive_number``, ``choice``, ``any``.
    kind: str
    doc: str = ""
    choices: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.kind not in _CHECKS:
            raise ValueError(f"unknown parameter kind {self.kind!r}")

    @property
    def example(self) -> Any:
        return self.default if self.default is not None else (self.choices[0] if self.choices else 1)

    @property
    def python_type(self) -> str:
        """Type annotation used in the generated stubs and the README table."""
        return {
            "percentile": "float",
            "proportion": "float",
            "positive_int": "int",
            "positive_number": "float",
            "choice": "str | None" if self.default is None else "str",
            "any": "object",
        }[self.kind]

    def validate(self, value: Any, *, where: str) -> None:
        if is_token(value):
            return
        _CHECKS[self.kind](self, value, where)


def validate_parameters(
    specs: tuple[ParameterSpec, ...], given: Mapping[str, Any], *, where: str, noun: str = "parameter"
) -> dict[str, Any]:
    """Validate ``given`` against ``specs`` and return every parameter in spec order with defaults filled in."""
    by_name = {s.name: s for s in specs}
    for key in given:
        if key not in by_name:
            accepted = ", ".join(by_name) or "none"
            raise ConfigurationTypeError(
                f"unknown {noun} {key!r}.{did_you_mean(key, by_name)} Accepted: {accepted}.",
                where=where,
                field=key,
                value=given[key],
            )
    result: dict[str, Any] = {}
    for spec in specs:
        value = given.get(spec.name, spec.default)
        if spec.name in given:
            spec.validate(value, where=where)
        result[spec.name] = value
    return result
