"""The rules for the failures that cost most at scale: TrainingHang, Straggler, GPUHealth, DataWait.

They read what the library's sampler writes (per-rank phases and data loader events, per-GPU health fields), so only
the RuleEvaluator (``RuleEngine.EVALUATOR``, the default) runs them; SageMaker Debugger has no such rules. Their
names and defaults match ``runtime/evaluator`` (a test keeps both in step); docs/health-rules.md explains each.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ..errors import ConfigurationError
from .parameters import Param
from .profiler import BuiltinProfilerRule
from .profiler_catalog import SCAN_INTERVAL, ProfilerRuleSpec

__all__ = ["HEALTH_RULE_SPECS", "HEALTH_RULE_CLASSES", "HealthRule", "is_health_rule"]


_SPECS = (
    ProfilerRuleSpec(
        "TrainingHang",
        "Flags a rank without step or phase progress for `minutes` while the job's nodes still write samples (a hang), "
        "names the ranks that stopped first and the GPU signature; also flags nodes that stop writing samples.",
        "both",
        (
            Param.number("minutes", 10, "Minutes without progress on a rank that count as a hang.", above=0),
            Param.number("pause_factor", 2, "The limit is at least this many times the longest pause the rank made before (checkpoints).", above=0),
            Param.number("silent_minutes", 5, "Minutes a node may lag behind the others' samples before it counts as silent.", above=0),
            Param.percent("low_power_percent", 40, "Power, in percent of the limit, below which busy GPUs count as 'busy at low power'."),
            SCAN_INTERVAL,
        ),
        overridable=False,
    ),
    ProfilerRuleSpec(
        "Straggler",
        "Flags a rank whose data wait + forward pass takes `threshold` times the fastest rank's, or a GPU whose SM clock "
        "is `clock_drop` below the fastest; names the node, rank and GPU.",
        "both",
        (
            Param.number("threshold", 1.5, "Ratio to the fastest rank that makes a rank slow.", above=0),
            Param.number("min_delay_ms", 5, "Milliseconds a slow rank must lag the fastest by.", above=0),
            Param.integer("min_events", 5, "Phase events a rank needs in a window to be compared."),
            Param.proportion("clock_drop", 0.15, "Fraction below the fastest GPU's SM clock that is slow."),
            Param.integer("patience", 1, "Slow windows before the rule fires for a rank or GPU."),
            SCAN_INTERVAL,
        ),
        overridable=False,
    ),
    ProfilerRuleSpec(
        "GPUHealth",
        "Flags GPUs that throttle (thermal, hardware slowdown, power brake), report XID errors, uncorrectable ECC "
        "errors or remapped rows, or run too hot; names the node and GPU.",
        "system",
        (
            Param.percent("throttle_percent", 10, "Percent of a window's samples throttled that fires."),
            Param.number("max_temperature", 90, "GPU temperature, in °C, above which the rule fires.", above=0),
            Param.any("ignore_xids", "", "Comma-separated XID codes not to report (none by default)."),
            SCAN_INTERVAL,
        ),
        overridable=False,
    ),
    ProfilerRuleSpec(
        "DataWait",
        "Flags a rank that spends more than `threshold` % of its time blocked waiting for the next batch.",
        "framework",
        (
            Param.percent("threshold", 25, "Percent of a window spent waiting for data that fires."),
            Param.integer("min_batches", 10, "Batches a rank needs in a window to be judged."),
            SCAN_INTERVAL,
        ),
        overridable=False,
    ),
)

#: The evaluator-only rules by name.
HEALTH_RULE_SPECS: Mapping[str, ProfilerRuleSpec] = MappingProxyType({s.name: s for s in _SPECS})


class HealthRule(BuiltinProfilerRule):
    """A rule only the RuleEvaluator runs (it reads the library's sampler output)."""

    def debugger_error(self, where: str | None = None) -> ConfigurationError:
        """Why this rule cannot run on SageMaker Debugger."""
        return ConfigurationError(
            f"{self.spec.name} reads the per-rank phases and GPU health fields of the library's sampler, which "
            "SageMaker Debugger's rule containers do not know; use RuleEngine.EVALUATOR (the default) for it.",
            where=where or self.where, field="rules", value=self.name)


def _make_rule_class(spec: ProfilerRuleSpec) -> type[HealthRule]:
    lines = [spec.summary, "", "Evaluated by the RuleEvaluator only. Parameters:"]
    lines += [f"    {p.name} ({p.python_type}, default {p.default!r}): {p.doc}" for p in spec.parameters]
    return type(spec.name, (HealthRule,), {"spec": spec, "__doc__": "\n".join(lines), "__module__": __name__})


#: The rule classes by name (``rules.TrainingHang(minutes=15)``).
HEALTH_RULE_CLASSES: dict[str, type[HealthRule]] = {name: _make_rule_class(s) for name, s in HEALTH_RULE_SPECS.items()}
globals().update(HEALTH_RULE_CLASSES)
__all__ += list(HEALTH_RULE_CLASSES)


def is_health_rule(rule: Any) -> bool:
    return isinstance(rule, HealthRule)
