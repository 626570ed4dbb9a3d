"""Who evaluates a training job's profiler rules."""

from __future__ import annotations

import enum

__all__ = ["RuleEngine"]


class RuleEngine(enum.Enum):
    """Who evaluates the profiler rules of a :class:`~cdk_sagemaker_debugger.ProfiledTrainingJob`."""

    #: Our own RuleEvaluator (a Lambda) reads the files of our sampler, or SageMaker's CloudWatch metrics for jobs
    #: without them. The request carries no Debugger member, so it works in every account and region, including
    #: accounts that cannot use SageMaker Debugger (closed to new customers since 2026-07-30).
    EVALUATOR = "EVALUATOR"
    #: SageMaker Debugger: the request carries ProfilerConfig and ProfilerRuleConfigurations, exactly as the SageMaker
    #: Python SDK sends them, and Debugger's rule containers evaluate the rules. Only for accounts that still have
    #: Debugger; needed for debugger (tensor) rules, the debug hook and Debugger's own rule actions.
    DEBUGGER = "DEBUGGER"
