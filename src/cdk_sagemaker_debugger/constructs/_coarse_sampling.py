"""The synth warning for a job sampled coarser than its rules' sample counts assume (model/sample_counts.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk

from ..model.rule_engine import RuleEngine
from ..model.sample_counts import DEFAULT_INTERVAL_MS, coarse_sampling_warnings

if TYPE_CHECKING:  # pragma: no cover
    from ..model.profiler_rules import ProfilerRule
    from .training_job import ProfiledTrainingJob

WARNING_ID = "cdk-sagemaker-debugger:coarseSampling"


def sampling_interval_ms(job: ProfiledTrainingJob) -> int | None:
    """How often the job's rules get a sample: the sampler's interval (RuleEngine.EVALUATOR) or Debugger's profiler's;
    None when neither samples (the evaluator then reads CloudWatch minutes and rescales the counts itself)."""
    if job.rule_engine is RuleEngine.EVALUATOR:
        return job.sampler.interval_millis if job.sampler is not None else None
    if job.profiler.disable_profiler:
        return None
    return job.profiler.profiling_interval_millis or DEFAULT_INTERVAL_MS


def warn_about_coarse_sampling(job: ProfiledTrainingJob) -> None:
    """Warn at synth, for each rule of the job's rule set (now and added later), when its sample counts take longer
    than half an hour at the job's sampling interval."""
    interval = sampling_interval_ms(job)
    if interval is None or job.rule_set is None:
        return

    def check(rule: ProfilerRule) -> None:
        for message in coarse_sampling_warnings(rule.rule_to_invoke, rule.parameters, interval):
            cdk.Annotations.of(job).add_warning_v2(WARNING_ID, message)

    job.rule_set.on_rule_added(check)
