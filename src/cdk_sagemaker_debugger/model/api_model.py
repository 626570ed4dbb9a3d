"""Strict validation of SageMaker requests against botocore's service model.

botocore's own ``ParamValidator`` checks types, required members and minimums but skips ``max``, ``pattern`` and ``enum``.
This walker checks all of them, so a request that synthesizes is one the API accepts. Unresolved CDK tokens are skipped:
their values are only known at deploy time.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import regex
from botocore.model import ListShape, MapShape, ServiceModel, Shape, StructureShape

from .errors import RequestValidationError, did_you_mean
from .parameters import is_token

__all__ = ["sagemaker_model", "enum_values", "validate_request", "request_problems"]

_INT_TYPES = {"integer", "long"}


@functools.lru_cache(maxsize=1)
def sagemaker_model() -> ServiceModel:
    """The SageMaker service model shipped with the installed botocore (loaded once per process)."""
    import botocore.session

    return botocore.session.get_session().get_service_model("sagemaker")


@functools.cache
def enum_values(shape_name: str) -> tuple[str, ...]:
    """Enum members of a named shape, e.g. ``enum_values("ProcessingInstanceType")``."""
    return tuple(sagemaker_model().shape_for(shape_name).enum)


@functools.cache
def _compiled(pattern: str) -> Any:
    # The model's patterns use Unicode property classes (\p{L}) that only the ``regex`` package understands.
    return regex.compile(pattern, regex.DOTALL)


def _problems(value: Any, shape: Shape, path: str, out: list[tuple[str, str]]) -> None:
    """Append to ``out`` every way ``value`` breaks ``shape``, as (member path, problem); tokens are left to deploy
    time."""
    if is_token(value):
        return
    if isinstance(shape, StructureShape):
        _structure_problems(value, shape, path, out)
    elif isinstance(shape, ListShape):
        _list_problems(value, shape, path, out)
    elif isinstance(shape, MapShape):
        _map_problems(value, shape, path, out)
    elif shape.type_name == "string":
        _string_problems(value, shape, path, out)
    else:
        _scalar_problems(value, shape, path, out)


def _structure_problems(value: Any, shape: StructureShape, path: str, out: list[tuple[str, str]]) -> None:
    if not isinstance(value, Mapping):
        out.append((path, f"expected an object, got {type(value).__name__} {value!r}"))
        return
    for required in shape.required_members:
        if required not in value:
            out.append((f"{path}.{required}" if path else required, "is required"))
    for key, item in value.items():
        member = shape.members.get(key)
        child = f"{path}.{key}" if path else key
        if member is None:
            out.append((child, f"is not a member of {shape.name}.{did_you_mean(key, shape.members)}"))
        else:
            _problems(item, member, child, out)


def _list_problems(value: Any, shape: ListShape, path: str, out: list[tuple[str, str]]) -> None:
    if not isinstance(value, (list, tuple)):
        out.append((path, f"expected a list, got {type(value).__name__}"))
        return
    _bounds(len(value), shape.metadata, path, "items", out)
    for index, item in enumerate(value):
        _problems(item, shape.member, f"{path}[{index}]", out)


def _map_problems(value: Any, shape: MapShape, path: str, out: list[tuple[str, str]]) -> None:
    if not isinstance(value, Mapping):
        out.append((path, f"expected a map, got {type(value).__name__}"))
        return
    _bounds(len(value), shape.metadata, path, "entries", out)
    for key, item in value.items():
        _problems(key, shape.key, f"{path} key {key!r}", out)
        _problems(item, shape.value, f"{path}.{key}", out)


def _string_problems(value: Any, shape: Shape, path: str, out: list[tuple[str, str]]) -> None:
    if not isinstance(value, str):
        out.append((path, f"expected a string, got {type(value).__name__} {value!r}"))
        return
    meta = shape.metadata
    _bounds(len(value), meta, path, "characters", out)
    if shape.enum and value not in shape.enum:
        out.append((path, f"{value!r} is not one of the {len(shape.enum)} allowed values.{did_you_mean(value, shape.enum)}"))
    pattern = meta.get("pattern")
    if pattern and not _compiled(pattern).fullmatch(value):
        out.append((path, f"{value!r} does not match the pattern {pattern}"))


def _scalar_problems(value: Any, shape: Shape, path: str, out: list[tuple[str, str]]) -> None:
    """Integers and numbers (type and range), booleans and timestamps."""
    kind = shape.type_name
    if kind in _INT_TYPES:
        if isinstance(value, bool) or not isinstance(value, int):
            out.append((path, f"expected an integer, got {type(value).__name__} {value!r}"))
            return
        _range(value, shape.metadata, path, out)
    elif kind in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            out.append((path, f"expected a number, got {type(value).__name__} {value!r}"))
            return
        _range(value, shape.metadata, path, out)
    elif kind == "boolean":
        if not isinstance(value, bool):
            out.append((path, f"expected true or false, got {type(value).__name__} {value!r}"))
    elif kind == "timestamp" and not isinstance(value, (str, int, float)):
        out.append((path, f"expected a timestamp, got {type(value).__name__}"))


def _bounds(size: int, meta: Mapping[str, Any], path: str, unit: str, out: list[tuple[str, str]]) -> None:
    if "min" in meta and size < meta["min"]:
        out.append((path, f"has {size} {unit}, fewer than the minimum {meta['min']}"))
    if "max" in meta and size > meta["max"]:
        out.append((path, f"has {size} {unit}, more than the maximum {meta['max']}"))


def _range(value: float, meta: Mapping[str, Any], path: str, out: list[tuple[str, str]]) -> None:
    if "min" in meta and value < meta["min"]:
        out.append((path, f"{value} is below the minimum {meta['min']}"))
    if "max" in meta and value > meta["max"]:
        out.append((path, f"{value} is above the maximum {meta['max']}"))


def request_problems(request: Mapping[str, Any], operation: str = "CreateTrainingJob") -> list[tuple[str, str]]:
    """Every ``(field path, problem)`` of ``request`` against the operation's input shape; empty when valid."""
    out: list[tuple[str, str]] = []
    _problems(request, sagemaker_model().operation_model(operation).input_shape, "", out)
    return out


def validate_request(request: Mapping[str, Any], *, operation: str = "CreateTrainingJob", where: str | None = None) -> None:
    """Raise ``RequestValidationError`` listing every problem of ``request`` (types, required, lengths, ranges, patterns, enums)."""
    problems = request_problems(request, operation)
    if problems:
        lines = "\n".join(f"  - {path}: {problem}" for path, problem in problems)
        raise RequestValidationError(
            f"the {operation} request is not valid for the SageMaker API ({len(problems)} problem(s)):\n{lines}",
            where=where,
        )
