"""How a ProfiledTrainingJob is profiled: metric and health rules checked as they are added, Debugger's profiler
features checked, and the sampler chosen (through the rule engine's binding)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ...model.errors import ConfigurationTypeError
from ...model.frameworks import parse_training_image
from ...model.health_rules import is_health_rule
from ...model.metric_rules import MetricRule
from ...model.profiler_rules import ProfilerRule
from ..sampler import Sampler

if TYPE_CHECKING:  # pragma: no cover
    from ._parts import JobParts

__all__ = ["choose_profiling"]


def choose_profiling(job: JobParts, sampler: Any) -> Sampler | None:
    """Metric rules checked against metric_definitions as they are added, the framework read from the image, Debugger's
    profiler features checked, and the sampler chosen. Returns the sampler."""
    if job.rule_set is not None:
        job.rule_set.on_rule_added(functools.partial(_check_rule, job))
    job.framework = parse_training_image(job.training_image)
    job._engine.check_profiler_features()
    if sampler is not None and not isinstance(sampler, Sampler):
        raise ConfigurationTypeError(f"expected a Sampler such as Sampler(interval_millis=500) or None, got "
                                     f"{type(sampler).__name__}.", where=job._where, field="sampler", value=sampler)
    return None if sampler is None else job._engine.sampler(sampler)


def _check_rule(job: JobParts, rule: ProfilerRule) -> None:
    """A metric rule runs in the RuleEvaluator only, on metrics this job's MetricDefinitions produce; a health rule
    (model/health_rules.py) in the RuleEvaluator only."""
    if isinstance(rule, MetricRule):
        job._engine.check_metric_rule(rule)
    elif is_health_rule(rule):
        job._engine.check_health_rule(rule)
