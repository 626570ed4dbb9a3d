"""Recognise the deep-learning framework and version from a training image URI (AWS Deep Learning Containers naming)."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["FrameworkInfo", "parse_training_image"]

_VERSION = re.compile(r"(\d+(?:\.\d+)+|\d+)")
# Repository name fragments, most specific first.
_REPOSITORIES = (
    ("huggingface-pytorch", "pytorch"),
    ("huggingface-tensorflow", "tensorflow"),
    ("pytorch", "pytorch"),
    ("tensorflow", "tensorflow"),
    ("mxnet", "mxnet"),
    ("xgboost", "xgboost"),
)


@dataclass(frozen=True)
class FrameworkInfo:
    """Framework name (``pytorch``, ``tensorflow``, ``mxnet``, ``xgboost``) and version tuple when the tag has one."""

    name: str
    version: tuple[int, ...] | None = None

    def at_least(self, *version: int) -> bool:
        return self.version is not None and self.version >= version

    @property
    def version_string(self) -> str:
        return ".".join(map(str, self.version)) if self.version else "unknown"


def parse_training_image(uri: str | None) -> FrameworkInfo | None:
    """``763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311`` -> ``FrameworkInfo("pytorch", (2, 3, 0))``.

    Returns None for images that do not name a known framework (custom containers) or for unresolved tokens.
    """
    if not isinstance(uri, str) or "${Token[" in uri:
        return None
    path = uri.rsplit("/", 1)[-1]
    repository, _, tag = path.partition(":")
    repository = repository.lower()
    for fragment, name in _REPOSITORIES:
        if fragment in repository:
            match = _VERSION.match(tag) if tag else None
            version = tuple(int(part) for part in match.group(1).split(".")) if match else None
            return FrameworkInfo(name, version)
    return None
