"""Exceptions raised by the model layer, and helpers that make their messages useful at 2 a.m.

Every validation error names *where* (construct path or rule name), *which field*, *the bad value* and *the fix*.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "ConfigurationError",
    "ConfigurationTypeError",
    "UnsupportedRegionError",
    "RequestValidationError",
    "did_you_mean",
    "describe_location",
]


def did_you_mean(value: str, candidates: Iterable[str]) -> str:
    """Return ``" Did you mean 'x'?"`` for the closest candidate (case-insensitive), or ``""``."""
    candidates = list(candidates)
    lowered = {c.lower(): c for c in candidates}
    if isinstance(value, str) and value.lower() in lowered and lowered[value.lower()] != value:
        return f" Did you mean '{lowered[value.lower()]}'?"
    matches = difflib.get_close_matches(str(value).lower(), list(lowered), n=1, cutoff=0.6)
    return f" Did you mean '{lowered[matches[0]]}'?" if matches else ""


def describe_location(where: str | None, field: str | None) -> str:
    """Join a construct path / rule name and a field into ``"Training/Job: Field.Sub"``."""
    parts = [str(p) for p in (where, field) if p]
    return ": ".join(parts)


class ConfigurationError(ValueError):
    """A configuration value is invalid. Subclass of ``ValueError`` so callers can catch it generically."""

    def __init__(self, message: str, *, where: object = None, field: str | None = None, value: object = None):
        # ``where`` may be computed late (a construct path is a round trip to jsii): it is spelled only here.
        where = None if where is None else str(where)
        self.where = where
        self.field = field
        self.value = value
        self.reason = message
        location = describe_location(where, field)
        super().__init__(f"{location}: {message}" if location else message)

    def at(self, where: str) -> ConfigurationError:
        """Return a copy of this error located at ``where`` (for example a construct path)."""
        if self.where:
            where = f"{where} > {self.where}"
        else:
            where = str(where)
        return type(self)(self.reason, where=where, field=self.field, value=self.value)


class ConfigurationTypeError(ConfigurationError, TypeError):
    """A configuration value has the wrong type (also a ``TypeError``)."""


class UnsupportedRegionError(ConfigurationError):
    """No rule image (or no Debugger at all) exists for the requested region."""


class RequestValidationError(ConfigurationError):
    """The rendered CreateTrainingJob request does not satisfy the SageMaker API model."""
