"""Profiler rules: ``rules.LowGPUUtilization(threshold_p95=80)``, ``rules.ProfilerReport(CPUBottleneck_threshold=90)``,
``rules.ProfilerRule.custom(...)``. The classes are generated from the catalog in ``model/rules/profiler_catalog.py``;
``rules.pyi`` gives type checkers their signatures.

Training-health rules on the job's algorithm metrics (``model/rules/metric.py``), evaluated by the RuleEvaluator without
SageMaker Debugger: ``rules.LossNotDecreasing(metric="train:loss")``,
``rules.Overfit(train_metric="train:loss", validation_metric="val:loss")``,
``rules.StalledTraining(metric="train:loss", threshold_minutes=30)``,
``rules.Overtraining(train_metric="train:loss", validation_metric="val:loss")``.

Rules for the failures that cost most at scale (``model/rules/health.py``), on the sampler's per-rank phases and GPU
health fields, RuleEvaluator only: ``rules.TrainingHang(minutes=10)``, ``rules.Straggler()``, ``rules.GPUHealth()``,
``rules.DataWait(threshold=25)``.
"""

from .model.rules.health import HEALTH_RULE_CLASSES, HealthRule
from .model.rules.metric import METRIC_RULE_CLASSES, MetricRule
from .model.rules.profiler import (
    RULE_CLASSES,
    BuiltinProfilerRule,
    CustomProfilerRule,
    ProfilerReport,
    ProfilerRule,
    from_name,
)

globals().update(RULE_CLASSES)
globals().update(METRIC_RULE_CLASSES)
globals().update(HEALTH_RULE_CLASSES)

__all__ = ["ProfilerRule", "BuiltinProfilerRule", "CustomProfilerRule", "ProfilerReport", "MetricRule", "HealthRule",
           "from_name", *RULE_CLASSES, *METRIC_RULE_CLASSES, *HEALTH_RULE_CLASSES]
