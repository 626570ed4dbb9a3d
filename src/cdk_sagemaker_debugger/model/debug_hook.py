"""The Debugger hook (which tensors the training container saves) and the TensorBoard output.

Differences from the SageMaker Python SDK, on purpose:

* Collection and hook parameter values are sent as strings (the API only accepts strings; the SDK passes ints through).
* Collections requested by rules and by the hook are merged deterministically (first appearance wins the position,
  exact duplicates are dropped). The SDK puts them in a Python set: random order, and the same collection twice when
  two sources disagree on its parameters. Here a disagreement is an error that names both sources.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ConfigurationError, ConfigurationTypeError, did_you_mean
from .parameters import is_token

__all__ = [
    "CollectionConfig",
    "DebugHookConfig",
    "TensorBoardOutputConfig",
    "CollectionRequest",
    "merge_collections",
    "DEFAULT_HOOK_LOCAL_PATH",
    "DEFAULT_TENSORBOARD_LOCAL_PATH",
    "MAX_COLLECTION_CONFIGURATIONS",
]

DEFAULT_HOOK_LOCAL_PATH = "/opt/ml/output/tensors/"
DEFAULT_TENSORBOARD_LOCAL_PATH = "/opt/ml/output/tensorboard"

#: API limits (botocore service model): CollectionConfigurations 0..20, CollectionParameters and HookParameters 0..20.
MAX_COLLECTION_CONFIGURATIONS = 20
_MAX_MAP_ENTRIES = 20
_MAX_NAME_LENGTH = 256
_MAX_VALUE_LENGTH = 256

_S3_URI = re.compile(r"(https|s3)://([^/]+)/?(.*)")

# Keys the smdebug hook reads from collection and hook parameters. Step keys also exist per mode (train., eval., ...).
_STEP_KEYS = ("save_interval", "save_steps", "start_step", "end_step")
_MODES = ("train", "eval", "predict", "global")
_COLLECTION_KEYS = frozenset(
    {"include_regex", "save_histogram", "reductions", *_STEP_KEYS, *(f"{mode}.{key}" for mode in _MODES for key in _STEP_KEYS)}
)


def _stringify(value: Any) -> str:
    # The API accepts only strings; booleans are written the way the SDK's str() does ("True"/"False"), and a CDK
    # number token as its string form (it then renders as a string, not as a JSON number).
    return value if isinstance(value, str) else str(value)


def _check_s3_uri(value: Any, *, where: str, field: str) -> None:
    if value is None or is_token(value):
        return
    if not isinstance(value, str) or not _S3_URI.fullmatch(value):
        raise ConfigurationError(
            f"must be an S3 URI like 's3://bucket/prefix', got {value!r}.", where=where, field=field, value=value
        )


def _check_local_path(value: Any, *, where: str, field: str) -> None:
    if is_token(value):
        return
    if not isinstance(value, str) or not value.startswith("/"):
        raise ConfigurationError(
            f"must be an absolute path inside the container such as '/opt/ml/output/...', got {value!r}.",
            where=where,
            field=field,
            value=value,
        )


def _string_map(
    given: Mapping[str, Any] | None, *, where: str, field: str
) -> tuple[tuple[str, str], ...]:
    """Validate a ConfigKey -> ConfigValue map and return it as ordered string pairs."""
    if given is None:
        return ()
    if not isinstance(given, Mapping):
        raise ConfigurationTypeError(
            f"expected a dict of parameter name to value, got {type(given).__name__}.", where=where, field=field, value=given
        )
    if len(given) > _MAX_MAP_ENTRIES:
        raise ConfigurationError(
            f"has {len(given)} entries; the API allows at most {_MAX_MAP_ENTRIES}.", where=where, field=field
        )
    pairs = []
    for key, value in given.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationTypeError(
                f"parameter names must be non-empty strings, got {key!r}.", where=where, field=field, value=key
            )
        if value is None or (not isinstance(value, (str, int, float, bool)) and not is_token(value)):
            raise ConfigurationTypeError(
                f"expected a string, number or boolean, got {type(value).__name__} {value!r}.",
                where=where,
                field=f"{field}.{key}",
                value=value,
            )
        text = _stringify(value)
        if not is_token(text) and len(text) > _MAX_VALUE_LENGTH:
            raise ConfigurationError(
                f"value is {len(text)} characters; the API allows at most {_MAX_VALUE_LENGTH}.",
                where=where,
                field=f"{field}.{key}",
                value=value,
            )
        pairs.append((key, text))
    return tuple(pairs)


def _unknown_key_warnings(pairs: Iterable[tuple[str, str]], *, where: str) -> list[str]:
    warnings = []
    for key, _ in pairs:
        if key not in _COLLECTION_KEYS:
            warnings.append(
                f"{where}: parameter {key!r} is not one the Debugger hook reads and will probably be ignored."
                f"{did_you_mean(key, _COLLECTION_KEYS)} Known: include_regex, save_histogram, reductions, "
                "save_interval, save_steps, start_step, end_step (step keys also as train./eval./predict./global.)."
            )
    return warnings


class CollectionConfig:
    """A tensor collection the hook saves: ``CollectionConfig("losses", {"save_interval": 50})``.

    Values may be given as numbers or booleans; they are sent as strings. Equal name and parameters mean equal configs.
    """

    __slots__ = ("name", "_parameters")

    def __init__(self, name: str, parameters: Mapping[str, Any] | None = None) -> None:
        where = "CollectionConfig"
        valid_name = isinstance(name, str) and (is_token(name) or 1 <= len(name) <= _MAX_NAME_LENGTH)
        if not valid_name:
            raise ConfigurationTypeError(
                f"expected a collection name of 1 to {_MAX_NAME_LENGTH} characters such as 'losses', got {name!r}.",
                where=where,
                field="name",
                value=name,
            )
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "_parameters", _string_map(parameters, where=f"{where} {name!r}", field="parameters"))

    @property
    def parameters(self) -> dict[str, str] | None:
        """The parameters as sent (string values), or None when the collection is saved with the hook's defaults."""
        return dict(self._parameters) if self._parameters else None

    def to_request(self) -> dict[str, Any]:
        """The CollectionConfiguration member of DebugHookConfig."""
        request: dict[str, Any] = {"CollectionName": self.name}
        if self._parameters:
            request["CollectionParameters"] = dict(self._parameters)
        return request

    def warnings(self) -> list[str]:
        return _unknown_key_warnings(self._parameters, where=f"CollectionConfig {self.name!r}")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"CollectionConfig is immutable; create a new one instead of setting {name!r}.")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, CollectionConfig)
            and other.name == self.name
            and dict(other._parameters) == dict(self._parameters)
        )

    def __hash__(self) -> int:
        return hash((self.name, frozenset(self._parameters)))

    def __repr__(self) -> str:
        if not self._parameters:
            return f"CollectionConfig({self.name!r})"
        return f"CollectionConfig({self.name!r}, {dict(self._parameters)!r})"


def _collection_list(value: Any, *, where: str, field: str) -> tuple[CollectionConfig, ...]:
    if value is None:
        return ()
    if isinstance(value, (CollectionConfig, str)) or not isinstance(value, Iterable):
        raise ConfigurationTypeError(
            f"expected a list of CollectionConfig, got {type(value).__name__} {value!r}.",
            where=where,
            field=field,
            value=value,
        )
    items = tuple(value)
    for position, item in enumerate(items):
        if not isinstance(item, CollectionConfig):
            raise ConfigurationTypeError(
                f"item {position} is {type(item).__name__} {item!r}; wrap it as CollectionConfig({item!r}).",
                where=where,
                field=field,
                value=item,
            )
    return items


@dataclass(frozen=True)
class CollectionRequest:
    """Collections one source (a rule or the hook) asks for; ``source`` is how errors name it."""

    source: str
    collections: tuple[CollectionConfig, ...]


def merge_collections(requests: Sequence[CollectionRequest], *, where: str | None = None) -> list[CollectionConfig]:
    """Merge collections from several sources into the hook's CollectionConfigurations.

    Order is the order of first appearance. Exact duplicates are dropped. A bare ``CollectionConfig(name)`` (hook
    defaults) is satisfied by a configured one of the same name, which takes its place. Two different configurations of
    one collection raise :class:`cdk_sagemaker_debugger.ConfigurationError` naming both sources, because the hook can only save it one way.
    """
    merged: dict[str, tuple[CollectionConfig, str]] = {}
    for request in requests:
        for collection in request.collections:
            seen = merged.get(collection.name)
            if seen is None:
                merged[collection.name] = (collection, request.source)
                continue
            kept, kept_source = seen
            if collection == kept or collection.parameters is None:
                continue
            if kept.parameters is None:
                merged[collection.name] = (collection, request.source)
                continue
            raise ConfigurationError(
                f"collection {collection.name!r} is requested with different parameters by {kept_source} "
                f"({kept.parameters}) and by {request.source} ({collection.parameters}); the hook can save a "
                "collection only one way. Make them agree, e.g. pass collections_to_save=[CollectionConfig("
                f"{collection.name!r}, {{...}})] with the same parameters to both, or remove one of them.",
                where=where,
                field="CollectionConfigurations",
                value=collection.name,
            )
    result = [collection for collection, _ in merged.values()]
    if len(result) > MAX_COLLECTION_CONFIGURATIONS:
        raise ConfigurationError(
            f"{len(result)} distinct collections are requested ({', '.join(c.name for c in result)}); the API allows "
            f"at most {MAX_COLLECTION_CONFIGURATIONS}. Use fewer rules, or collections_to_save= to share collections.",
            where=where,
            field="CollectionConfigurations",
        )
    return result


@dataclass(frozen=True)
class DebugHookConfig:
    """Where and what the Debugger hook in the training container saves.

    ``s3_output_path`` defaults to the job's output location. ``hook_parameters`` apply to every collection
    (``{"save_interval": 100}``); ``collection_configs`` are merged with the collections the rules need.
    """

    s3_output_path: str | None = None
    local_path: str = DEFAULT_HOOK_LOCAL_PATH
    hook_parameters: Mapping[str, Any] | None = None
    collection_configs: Sequence[CollectionConfig] = ()
    _hook_pairs: tuple[tuple[str, str], ...] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = "DebugHookConfig"
        _check_s3_uri(self.s3_output_path, where=where, field="s3_output_path")
        _check_local_path(self.local_path, where=where, field="local_path")
        object.__setattr__(self, "_hook_pairs", _string_map(self.hook_parameters, where=where, field="hook_parameters"))
        object.__setattr__(
            self, "collection_configs", _collection_list(self.collection_configs, where=where, field="collection_configs")
        )

    def warnings(self) -> list[str]:
        """Parameters the hook will not recognise (probably typos)."""
        found = _unknown_key_warnings(self._hook_pairs, where="DebugHookConfig hook_parameters")
        for collection in self.collection_configs:
            found += collection.warnings()
        return found

    def to_request(
        self, *, default_s3_output_path: str | None, collections: Sequence[CollectionConfig] | None = None
    ) -> dict[str, Any]:
        """The DebugHookConfig member of CreateTrainingJob; ``collections`` replaces the own list (use the merge)."""
        s3_output_path = self.s3_output_path or default_s3_output_path
        if not s3_output_path:
            raise ConfigurationError(
                "needs an S3 output path: set s3_output_path= or give the job an output location.",
                where="DebugHookConfig",
                field="s3_output_path",
            )
        _check_s3_uri(s3_output_path, where="DebugHookConfig", field="s3_output_path")
        request: dict[str, Any] = {"S3OutputPath": s3_output_path, "LocalPath": self.local_path}
        hook_pairs = self._hook_pairs
        if hook_pairs:
            request["HookParameters"] = dict(hook_pairs)
        chosen = self.collection_configs if collections is None else collections
        request["CollectionConfigurations"] = [collection.to_request() for collection in chosen]
        return request


@dataclass(frozen=True)
class TensorBoardOutputConfig:
    """Copy TensorBoard data the training script writes to ``local_path`` to S3.

    ``s3_output_path`` defaults to ``<job output>/<job name prefix>/tensorboard-output``, the layout the SDK's helpers use.
    """

    s3_output_path: str | None = None
    local_path: str = DEFAULT_TENSORBOARD_LOCAL_PATH

    def __post_init__(self) -> None:
        _check_s3_uri(self.s3_output_path, where="TensorBoardOutputConfig", field="s3_output_path")
        _check_local_path(self.local_path, where="TensorBoardOutputConfig", field="local_path")

    def to_request(self, *, default_s3_output_path: str | None, job_name_prefix: str | None = None) -> dict[str, Any]:
        """The TensorBoardOutputConfig member of CreateTrainingJob."""
        s3_output_path = self.s3_output_path
        if s3_output_path is None:
            if not default_s3_output_path:
                raise ConfigurationError(
                    "needs an S3 output path: set s3_output_path= or give the job an output location.",
                    where="TensorBoardOutputConfig",
                    field="s3_output_path",
                )
            parts = [default_s3_output_path.rstrip("/"), job_name_prefix, "tensorboard-output"]
            s3_output_path = "/".join(part for part in parts if part)
        return {"S3OutputPath": s3_output_path, "LocalPath": self.local_path}
