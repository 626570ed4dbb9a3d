"""Values computed late: construct paths for error messages and strings or values rendered at synth."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aws_cdk as cdk
import jsii
from constructs import IConstruct

__all__ = ["LazyPath", "lazy_any", "lazy_string"]


class LazyPath:
    """A construct path computed only when an error message needs it (each lookup is a round trip to jsii)."""

    def __init__(self, scope: IConstruct) -> None:
        self._scope = scope

    def __str__(self) -> str:
        return self._scope.node.path

    def __bool__(self) -> bool:
        return True


@jsii.implements(cdk.IStableStringProducer)
class _StringProducer:
    def __init__(self, function: Callable[[], str]) -> None:
        self._function = function

    def produce(self) -> str:
        return self._function()


def lazy_string(function: Callable[[], str]) -> str:
    """A string computed when the template is rendered (after every ``add_rule``)."""
    return cdk.Lazy.string(_StringProducer(function))


@jsii.implements(cdk.IStableAnyProducer)
class _AnyProducer:
    """Adapter so ``Lazy.any`` can call a Python function when the template is rendered."""

    def __init__(self, function: Callable[[], Any]) -> None:
        self._function = function

    def produce(self) -> Any:
        return self._function()


def lazy_any(function: Callable[[], Any]) -> Any:
    """A value computed when the template is rendered (after every ``add_rule``)."""
    return cdk.Lazy.any(_AnyProducer(function))
