"""JSON encoding of evaluator state: dicts with float keys, tuples, sets, deques and value multisets survive a round trip.

Rule state is persisted between Lambda runs as JSON rather than pickle, so a state object in S3 can never execute
code when it is loaded.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .stats import ExactHistogram, FixedBins, Moments, ThresholdCounts

_TAG = "__t"
_REGISTRY: dict[str, Any] = {}
# The mergeable statistics (stats.py): their to_state() is plain JSON already, written and read without a walk.
_PLAIN: dict[type, str] = {cls: cls.STATE_TAG for cls in (ExactHistogram, Moments, FixedBins, ThresholdCounts)}
_PLAIN_BY_TAG: dict[str, Any] = {tag: cls for cls, tag in _PLAIN.items()}


def stateful(cls: Any) -> Any:
    """Class decorator: instances persist through ``to_state()`` and ``cls.from_state(state)`` under ``STATE_TAG``."""
    _REGISTRY[cls.STATE_TAG] = cls
    return cls


def encode(obj: Any) -> Any:
    kind = type(obj)
    if kind is float or kind is int or kind is str or obj is None or kind is bool:
        return obj
    plain = _PLAIN.get(kind)
    if plain is not None:
        return {_TAG: plain, "v": obj.to_state()}
    tag = getattr(kind, "STATE_TAG", None)
    if tag is not None:
        return {_TAG: tag, "v": encode(obj.to_state())}
    if isinstance(obj, deque):
        return {_TAG: "dq", "max": obj.maxlen, "v": [encode(v) for v in obj]}
    if isinstance(obj, tuple):
        return {_TAG: "tu", "v": [encode(v) for v in obj]}
    if isinstance(obj, (set, frozenset)):
        return {_TAG: "set", "v": [encode(v) for v in sorted(obj, key=repr)]}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and _TAG not in obj:
            return {k: encode(v) for k, v in obj.items()}
        return {_TAG: "d", "v": [[encode(k), encode(v)] for k, v in obj.items()]}
    if isinstance(obj, list):
        if all(type(v) is float or type(v) is int for v in obj):  # a series of numbers: nothing to encode
            return list(obj)
        return [encode(v) for v in obj]
    return obj


def decode(obj: Any) -> Any:
    if isinstance(obj, list):
        if all(type(v) is float or type(v) is int for v in obj):
            return list(obj)
        return [decode(v) for v in obj]
    if isinstance(obj, dict):
        tag = obj.get(_TAG)
        if tag is None:
            return {k: decode(v) for k, v in obj.items()}
        plain = _PLAIN_BY_TAG.get(tag)
        if plain is not None:
            return plain.from_state(obj["v"])
        if tag == "dq":
            return deque((decode(v) for v in obj["v"]), maxlen=obj["max"])
        if tag == "tu":
            return tuple(decode(v) for v in obj["v"])
        if tag == "set":
            return {decode(v) for v in obj["v"]}
        if tag == "d":
            return {_hashable(decode(k)): decode(v) for k, v in obj["v"]}
        if tag in _REGISTRY:
            return _REGISTRY[tag].from_state(decode(obj["v"]))
        raise ValueError(f"unknown state tag {tag!r}")
    return obj


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
