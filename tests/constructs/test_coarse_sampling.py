"""A job sampled coarser than the rules' sample counts assume: a synth warning with the duration and the values that
keep the defaults' duration (the decision: warn, do not rescale; docs/evaluator.md "Sampling interval")."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match

from cdk_sagemaker_debugger import (
    ProfiledTrainingJob,
    ProfilerConfig,
    ProfilerRuleSet,
    RuleEngine,
    Sampler,
    rules,
)
from cdk_sagemaker_debugger.model.sample_counts import coarse_sampling_warnings

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"


def _warnings(stack: cdk.Stack) -> list[str]:
    found = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("counts samples"))
    return [w.entry.data for w in found]


def _job(*rule_list, **kwargs) -> tuple[cdk.Stack, ProfiledTrainingJob]:
    stack = cdk.Stack(cdk.App(), "Coarse", env=cdk.Environment(region="us-east-1"))
    rule_set = ProfilerRuleSet(stack, "Rules", rules=list(rule_list))
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="resnet", training_image=IMAGE,
                              instance_type="ml.g5.2xlarge", rule_set=rule_set, **kwargs)
    return stack, job


def test_low_gpu_at_five_seconds_warns_with_the_duration_and_the_fix():
    stack, _ = _job(rules.LowGPUUtilization(), sampler=Sampler(interval_millis=5000))
    [message] = _warnings(stack)
    assert message.startswith("LowGPUUtilization counts samples and this job samples every 5000 ms: patience=1000 "
                              "takes 83 minutes (8 minutes at 500 ms), window=500 takes 42 minutes")
    assert "use rules.LowGPUUtilization(patience=100, window=50)" in message


def test_profiler_report_at_a_minute_names_each_sub_rule_and_its_overrides():
    stack, _ = _job(rules.ProfilerReport(), sampler=Sampler(interval_millis=60000))
    found = _warnings(stack)
    assert {m.split(" ")[0] for m in found} == {"LowGPUUtilization", "BatchSize", "GPUMemoryIncrease",
                                                  "CPUBottleneck", "IOBottleneck", "LoadBalancing"}
    low = next(m for m in found if m.startswith("LowGPUUtilization"))
    assert "patience=1000 takes 16.7 hours" in low
    assert "pass LowGPUUtilization_patience=9, LowGPUUtilization_window=5 to rules.ProfilerReport(...)" in low


def test_debugger_engine_reads_the_profiler_interval_and_rules_added_later_are_checked():
    stack, job = _job(rules.StepOutlier(), rule_engine=RuleEngine.DEBUGGER,
                      profiler=ProfilerConfig(profiling_interval_millis=5000))
    assert _warnings(stack) == []  # StepOutlier counts steps, not samples
    job.rule_set.add_rule(rules.CPUBottleneck())
    assert [m.split(" ")[0] for m in _warnings(stack)] == ["CPUBottleneck"]


@pytest.mark.parametrize("kwargs", [{"sampler": Sampler(interval_millis=500)}, {"sampler": Sampler(interval_millis=1000)},
                                    {"sampler": None}],
                         ids=["default-interval", "one-second", "cloudwatch-minutes-rescaled-by-the-evaluator"])
def test_no_warning_where_the_counts_hold(kwargs):
    stack, _ = _job(rules.ProfilerReport(), **kwargs)
    assert _warnings(stack) == []


def test_adjusted_counts_are_not_warned_about():
    stack, _ = _job(rules.LowGPUUtilization(patience=100, window=50), sampler=Sampler(interval_millis=5000))
    assert _warnings(stack) == []
    assert coarse_sampling_warnings("ProfilerReport", {"LowGPUUtilization_patience": 100, "LowGPUUtilization_window":
                                                       50, "BatchSize_patience": 100, "BatchSize_window": 50,
                                                       "GPUMemoryIncrease_patience": 100, "CPUBottleneck_patience":
                                                       100, "IOBottleneck_patience": 100,
                                                       "LoadBalancing_patience": 100}, 5000) == []
