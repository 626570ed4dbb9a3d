"""Profiler rules: ``rules.LowGPUUtilization(threshold_p95=80)``, ``rules.ProfilerReport(CPUBottleneck_threshold=90)``,
``rules.ProfilerRule.custom(...)``. The classes are generated from the catalog in ``model/profiler_catalog.py``;
``rules.pyi`` gives type checkers their signatures.
"""

from .model.profiler_rules import (
    RULE_CLASSES,
    BuiltinProfilerRule,
    CustomProfilerRule,
    ProfilerReport,
    ProfilerRule,
    from_name,
)

globals().update(RULE_CLASSES)

__all__ = ["ProfilerRule", "BuiltinProfilerRule", "CustomProfilerRule", "ProfilerReport", "from_name", *RULE_CLASSES]
