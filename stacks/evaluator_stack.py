"""Reference stack: rules without Debugger, tuned: 100 ms sampling and a stricter rule beside ProfilerReport."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from cdk_sagemaker_debugger import ProfiledTrainingJob, ProfilerRuleSet, Sampler, rules

PYTORCH_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"


class EvaluatorStack(cdk.Stack):
    """ProfilerReport with an override and a standalone LowGPUUtilization on a two-node job sampled every 100 ms; the
    job creates the RuleEvaluator that evaluates them every minute (``job.evaluator``)."""

    def __init__(self, scope: Construct, id: str, **kwargs) -> None:
        super().__init__(scope, id, env=kwargs.pop("env", cdk.Environment(region="us-east-1")), **kwargs)
        self.rule_set = ProfilerRuleSet(self, "Rules", rules=[
            rules.ProfilerReport(LowGPUUtilization_threshold_p95=60),
            rules.LowGPUUtilization(name="LowGPU-strict", threshold_p95=80, window=300),
        ])
        self.job = ProfiledTrainingJob(self, "Job",
            job_name_prefix="llm-finetune",
            training_image=PYTORCH_IMAGE,
            instance_type="ml.g5.12xlarge",
            instance_count=2,
            rule_set=self.rule_set,
            sampler=Sampler(interval_millis=100),
        )
        self.evaluator = self.job.evaluator
