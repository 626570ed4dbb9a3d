"""The synth warning for a job sampled coarser than its rules' sample counts assume (model/sample_counts.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk

from ...model.sample_counts import coarse_sampling_warnings

if TYPE_CHECKING:  # pragma: no cover
    from ...model.profiler_rules import ProfilerRule
    from ._parts import JobParts

WARNING_ID = "cdk-sagemaker-debugger:coarseSampling"


def warn_about_coarse_sampling(job: JobParts) -> None:
    """Warn at synth, for each rule of the job's rule set (now and added later), when its sample counts take longer
    than half an hour at the job's sampling interval."""
    interval = job._engine.sampling_interval_ms()  # the sampler's, or Debugger's profiler's
    if interval is None or job.rule_set is None:
        return

    def check(rule: ProfilerRule) -> None:
        for message in coarse_sampling_warnings(rule.rule_to_invoke, rule.parameters, interval):
            cdk.Annotations.of(job).add_warning_v2(WARNING_ID, message)

    job.rule_set.on_rule_added(check)
