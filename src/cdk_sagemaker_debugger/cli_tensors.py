"""The CLI's tensor rules: ``--rule VanishingGradient`` etc. read the tensor collector's ``tensor-output/`` files.

The location given to ``evaluate`` may be the ``tensor-output/`` folder itself, the job folder above it, or the job's
``profiler-output/`` folder next to it (local or s3://).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .runtime.evaluator.engine import RuleConfig, RuleResult
from .runtime.evaluator.rules import RuleConfigError
from .runtime.evaluator.storage import LocalStore, S3Store, Store, split_s3_uri
from .runtime.evaluator.tensor_data import step_of
from .runtime.evaluator.tensor_evaluation import TENSOR_RULES, TensorEvaluation, TensorRuleRun, is_tensor_rule
from .runtime.evaluator.tensor_layout import FOLDER

__all__ = ["TENSOR_RULES", "tensor_config", "split_configs", "open_tensor_output", "evaluate_tensors"]


def tensor_config(name: str, params: dict[str, Any]) -> RuleConfig:
    """A checked RuleConfig of a tensor rule; RuleConfigError names the bad parameter."""
    config = RuleConfig(name, name, params)
    run = TensorRuleRun(config)
    if run.failed:
        raise RuleConfigError(run.failed.removeprefix("RuleConfigError: "))
    return config


def split_configs(configs: list[RuleConfig]) -> tuple[list[RuleConfig], list[RuleConfig]]:
    """(profiler and metric rules, tensor rules)."""
    return [c for c in configs if not is_tensor_rule(c)], [c for c in configs if is_tensor_rule(c)]


def _has_steps(store: Store) -> bool:
    return any(step_of(item.key) is not None for item in store.list(""))


def open_tensor_output(location: str, *, s3_client: Any = None) -> Store:
    """The ``tensor-output/`` tree at or next to ``location``; the first candidate holding step files (else the first)."""
    if location.startswith("s3://"):
        bucket, prefix = split_s3_uri(location)
        prefix = prefix.strip("/")
        parent = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        keys = [prefix, f"{prefix}/{FOLDER}".lstrip("/"), f"{parent}/{FOLDER}".lstrip("/")]
        candidates: list[Store] = [S3Store(bucket, key, s3_client) for key in keys]
    else:
        root = Path(location).expanduser()
        candidates = [LocalStore(root), LocalStore(root / FOLDER), LocalStore(root.parent / FOLDER)]
    for store in candidates:
        if _has_steps(store):
            return store
    return candidates[0]


def evaluate_tensors(location: str, configs: list[RuleConfig], *, s3_client: Any = None
                     ) -> tuple[list[RuleResult], TensorEvaluation, Store]:
    """Every recorded step judged (the training is over when the CLI runs)."""
    store = open_tensor_output(location, s3_client=s3_client)
    evaluation = TensorEvaluation(configs)
    evaluation.update(store, final=True)
    return evaluation.results(final=True), evaluation, store
