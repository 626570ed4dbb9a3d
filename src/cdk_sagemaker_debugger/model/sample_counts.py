"""Rule parameters counted in samples, and what a coarse sampling interval does to them.

``patience`` and ``window`` count profiler samples, as in the managed rules: LowGPUUtilization's defaults (patience
1000, window 500) wait 8 minutes before judging at the default 500 ms interval, 83 minutes at 5 s and 16.7 hours at
60 s. The evaluator does not rescale them (the managed rules do not; a user's explicit ``patience=1000`` means 1000
samples on either engine): a job sampled coarser than the default gets a synth warning instead, naming the duration
and the values that keep the default's duration (:func:`coarse_sampling_warnings`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .parameters import is_token
from .rules.profiler_catalog import PROFILER_REPORT, PROFILER_RULE_SPECS

__all__ = ["DEFAULT_INTERVAL_MS", "COUNTED_PARAMETERS", "SLOW_JUDGEMENT_S", "coarse_sampling_warnings"]

#: The profiler's (and the sampler's) default sampling interval, which the rules' defaults are made for.
DEFAULT_INTERVAL_MS = 500
#: Per rule, its parameters counted in samples and the smallest sensible value of each (as the CloudWatch rescale).
COUNTED_PARAMETERS: Mapping[str, Mapping[str, int]] = {
    "LowGPUUtilization": {"patience": 1, "window": 3},
    "BatchSize": {"patience": 1, "window": 3},
    "GPUMemoryIncrease": {"patience": 1, "window": 3},
    "CPUBottleneck": {"patience": 1},
    "IOBottleneck": {"patience": 1},
    "LoadBalancing": {"patience": 1},
}
#: A counted parameter that takes longer than this at the job's interval gets a warning.
SLOW_JUDGEMENT_S = 1800


def _minutes(seconds: float) -> str:
    return f"{seconds / 3600:.1f} hours" if seconds >= 5400 else f"{seconds / 60:.0f} minutes"


def _rule_values(rule_to_invoke: str, parameters: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each counted rule's counted values: its own parameters standalone, defaults plus overrides under ProfilerReport."""
    if rule_to_invoke != PROFILER_REPORT:
        counted = COUNTED_PARAMETERS.get(rule_to_invoke, {})
        return {rule_to_invoke: {name: parameters.get(name) for name in counted}} if counted else {}
    values = {}
    for rule, counted in COUNTED_PARAMETERS.items():
        defaults = {p.name: p.default for p in PROFILER_RULE_SPECS[rule].parameters}
        values[rule] = {name: parameters.get(f"{rule}_{name}", defaults[name]) for name in counted}
    return values


def coarse_sampling_warnings(rule_to_invoke: str, parameters: Mapping[str, Any], interval_ms: int) -> list[str]:
    """One sentence per rule whose sample counts take longer than :data:`SLOW_JUDGEMENT_S` at ``interval_ms``
    (none at the default interval or finer), with the values that keep the durations the defaults have at 500 ms."""
    if is_token(interval_ms) or interval_ms <= DEFAULT_INTERVAL_MS:
        return []
    warnings = []
    for rule, values in _rule_values(rule_to_invoke, parameters).items():
        usable = {k: v for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if not usable or max(usable.values()) * interval_ms / 1000 <= SLOW_JUDGEMENT_S:
            continue
        spans = ", ".join(f"{k}={v:g} takes {_minutes(v * interval_ms / 1000)} "
                          f"({_minutes(v * DEFAULT_INTERVAL_MS / 1000)} at {DEFAULT_INTERVAL_MS} ms)"
                          for k, v in usable.items())
        scaled = {k: max(COUNTED_PARAMETERS[rule][k], math.ceil(v * DEFAULT_INTERVAL_MS / interval_ms))
                  for k, v in usable.items()}
        if rule_to_invoke == PROFILER_REPORT:
            fix = f"pass {', '.join(f'{rule}_{k}={v}' for k, v in scaled.items())} to rules.ProfilerReport(...)"
        else:
            fix = f"use rules.{rule}({', '.join(f'{k}={v}' for k, v in scaled.items())})"
        warnings.append(
            f"{rule} counts samples and this job samples every {interval_ms} ms: {spans}, so the rule judges nothing "
            f"for that long (a short job never). To keep the durations the defaults have, {fix}; or sample more "
            "often.")
    return warnings
