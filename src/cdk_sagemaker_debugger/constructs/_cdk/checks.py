"""Prop checks every construct uses: errors located at a construct path, durations, CDK object kinds, prefixes."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TypeVar

import aws_cdk as cdk
from aws_cdk import aws_logs as logs
from constructs import IConstruct

from ...model.errors import ConfigurationError, ConfigurationTypeError
from ...model.parameters import is_token

__all__ = ["check_kind", "check_log_retention", "check_reserved_concurrency", "key_prefix", "located", "whole_seconds"]

T = TypeVar("T")


def located(scope: IConstruct, action: Callable[[], T]) -> T:
    """Run ``action`` and re-raise model errors located at the construct path of ``scope``."""
    try:
        return action()
    except ConfigurationError as error:
        raise error.at(scope.node.path) from None


# Durations are immutable: what one holds is read from jsii once (two round trips), however often it is checked.
_MILLISECONDS: weakref.WeakKeyDictionary[cdk.Duration, float | None] = weakref.WeakKeyDictionary()


def _milliseconds(duration: cdk.Duration) -> float | None:
    """The duration in milliseconds, or None for a deploy-time token."""
    if duration not in _MILLISECONDS:
        _MILLISECONDS[duration] = None if duration.is_unresolved() else duration.to_milliseconds(integral=False)
    return _MILLISECONDS[duration]


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
    milliseconds = _milliseconds(duration)
    if milliseconds is None:
        return duration.to_seconds()  # a deploy-time value: CloudFormation checks it
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
