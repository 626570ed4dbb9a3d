"""Helpers for the evaluator tests: write a synthetic job, evaluate it, look up one rule's verdict."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from cdk_sagemaker_debugger.runtime.evaluator.engine import Evaluator, RuleConfig, SubRuleResult
from cdk_sagemaker_debugger.runtime.evaluator.reading import evaluate_store
from cdk_sagemaker_debugger.runtime.evaluator.storage import LocalStore
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import JobSpec, write_job

#: Real profiler files and deployed reports, copied into the repository with their sources (tests/fixtures/README.md).
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def small_spec(**overrides: Any) -> JobSpec:
    """3 analysed minutes, 100 ms sampling, 2 GPUs and 4 cores: 1,800 samples per device, over the default patience."""
    values: dict[str, Any] = {"minutes": 3, "gpus": 2, "cores": 4, "interval_ms": 100}
    values.update(overrides)
    return JobSpec(**values)


def evaluate(spec: JobSpec, *configs: RuleConfig) -> Evaluator:
    with tempfile.TemporaryDirectory() as tmp:
        root = write_job(Path(tmp) / "profiler-output", spec)
        return evaluate_store(LocalStore(root), list(configs) or [report()], read_workers=1)


def report(**overrides: Any) -> RuleConfig:
    return RuleConfig("ProfilerReport", "ProfilerReport", dict(overrides))


def standalone(rule: str, **params: Any) -> RuleConfig:
    return RuleConfig(rule, rule, dict(params))


def verdict(evaluator: Evaluator, rule: str) -> SubRuleResult:
    for result in evaluator.results(final=True):
        for sub in result.rules:
            if sub.name == rule:
                return sub
    raise KeyError(rule)
