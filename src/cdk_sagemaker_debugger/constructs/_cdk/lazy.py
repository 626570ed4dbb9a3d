"""Values computed late: construct paths for error messages and strings or values rendered at synth."""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from typing import Any

import aws_cdk as cdk
import jsii
from constructs import IConstruct

__all__ = ["LazyPath", "lazy_any", "lazy_string", "path_of", "remember_path"]


class LazyPath:
    """A construct path computed only when an error message needs it (each lookup is a round trip to jsii)."""

    def __init__(self, scope: IConstruct) -> None:
        self._scope = scope

    def __str__(self) -> str:
        return path_of(self._scope)

    def __bool__(self) -> bool:
        return True


#: ``node.path`` of constructs, asked once each (two round trips) or known from their parent's path and their id.
_PATHS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: What ``constructs`` turns into ``--`` in an id (the separators of paths and addresses).
_SEPARATORS = re.compile("[/\n]")


def path_of(scope: IConstruct) -> str:
    """``scope.node.path``, crossing to Node.js only the first time it is asked for ``scope``."""
    path = _PATHS.get(scope)
    if path is None:
        path = _PATHS[scope] = scope.node.path
    return path


def remember_path(child: IConstruct, parent: IConstruct, id: str) -> str:
    """Record (and return) the path of ``child``, just created with ``id`` under ``parent``, the way ``constructs``
    spells it (the parent's path, ``/``, the id with its separators as ``--``) instead of asking Node.js for it later."""
    parent_path = path_of(parent)
    own = _SEPARATORS.sub("--", id)
    path = _PATHS[child] = f"{parent_path}/{own}" if parent_path else own
    return path


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
