"""The rules for the failures that cost most at scale: TrainingHang, Straggler, GPUHealth, DataWait.

They read what the library's sampler writes (per-rank phases and data loader events, per-GPU health fields), so only
the RuleEvaluator (``RuleEngine.EVALUATOR``, the default) runs them; SageMaker Debugger has no such rules. Their
names and defaults match ``runtime/evaluator`` (a test keeps both in step); docs/health-rules.md explains each.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .errors import ConfigurationError
from .parameters import ParameterSpec
from .profiler_catalog import ProfilerRuleSpec
from .profiler_rules import BuiltinProfilerRule

__all__ = ["HEALTH_RULE_SPECS", "HEALTH_RULE_CLASSES", "HealthRule", "is_health_rule"]

_SCAN = ParameterSpec("scan_interval_us", 60_000_000, "positive_int", "How often the rule scans the data, in microseconds.")

_SPECS = (
    ProfilerRuleSpec(
        "TrainingHang",
        "Flags a rank without step or phase progress for `minutes` while the job's nodes still write samples (a hang), "
        "names the ranks that stopped first and the GPU signature; also flags nodes that stop writing samples.",
        "both",
        (
            ParameterSpec("minutes", 10, "positive_number", "Minutes without progress on a rank that count as a hang."),
            ParameterSpec("pause_factor", 2, "positive_number",
                          "The limit is at least this many times the longest pause the rank made before (checkpoints)."),
            ParameterSpec("silent_minutes", 5, "positive_number",
                          "Minutes a node may lag behind the others' samples before it counts as silent."),
            ParameterSpec("low_power_percent", 40, "percentile",
                          "Power, in percent of the limit, below which busy GPUs count as 'busy at low power'."),
            _SCAN,
        ),
        overridable=False,
    ),
    ProfilerRuleSpec(
        "Straggler",
        "Flags a rank whose data wait + forward pass takes `threshold` times the fastest rank's, or a GPU whose SM clock "
        "is `clock_drop` below the fastest; names the node, rank and GPU.",
        "both",
        (
            ParameterSpec("threshold", 1.5, "positive_number", "Ratio to the fastest rank that makes a rank slow."),
            ParameterSpec("min_delay_ms", 5, "positive_number", "Milliseconds a slow rank must lag the fastest by."),
            ParameterSpec("min_events", 5, "positive_int", "Phase events a rank needs in a window to be compared."),
            ParameterSpec("clock_drop", 0.15, "proportion", "Fraction below the fastest GPU's SM clock that is slow."),
            ParameterSpec("patience", 1, "positive_int", "Slow windows before the rule fires for a rank or GPU."),
            _SCAN,
        ),
        overridable=False,
    ),
    ProfilerRuleSpec(
        "GPUHealth",
        "Flags GPUs that throttle (thermal, hardware slowdown, power brake), report XID errors, uncorrectable ECC "
        "errors or remapped rows, or run too hot; names the node and GPU.",
        "system",
        (
            ParameterSpec("throttle_percent", 10, "percentile", "Percent of a window's samples throttled that fires."),
            ParameterSpec("max_temperature", 90, "positive_number", "GPU temperature, in °C, above which the rule fires."),
            ParameterSpec("ignore_xids", "", "any", "Comma-separated XID codes not to report (none by default)."),
            _SCAN,
        ),
        overridable=False,
    ),
    ProfilerRuleSpec(
        "DataWait",
        "Flags a rank that spends more than `threshold` % of its time blocked waiting for the next batch.",
        "framework",
        (
            ParameterSpec("threshold", 25, "percentile", "Percent of a window spent waiting for data that fires."),
            ParameterSpec("min_batches", 10, "positive_int", "Batches a rank needs in a window to be judged."),
            _SCAN,
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
