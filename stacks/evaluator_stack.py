"""Reference stack: a profiled training job whose profiler rules are evaluated by our own RuleEvaluator."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from cdk_sagemaker_debugger import MetricsSource, ProfiledTrainingJob, ProfilerRuleSet, RuleEvaluator, rules

PYTORCH_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"


class EvaluatorStack(cdk.Stack):
    """ProfilerReport with an override and a standalone LowGPUUtilization, evaluated every minute by a Lambda."""

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
        )
        self.evaluator = RuleEvaluator(self, "Evaluator",
            training_job=self.job,
            rules=self.rule_set,
            source=MetricsSource.AUTO,
        )
