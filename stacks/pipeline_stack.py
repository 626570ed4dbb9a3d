"""Reference stack for SageMaker Pipelines: the same validated, profiled request as a Training step of a pipeline."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from cdk_sagemaker_debugger import ProfiledTrainingJob, ProfilerRuleSet, TrainingPipeline, rules

from .training_stacks import PYTORCH_IMAGE


class PipelineStack(cdk.Stack):
    """A job with metric definitions, retries and a warm pool, launched by Step Functions and, as its pipeline step,
    by a TrainingPipeline (``AWS::SageMaker::Pipeline``)."""

    def __init__(self, scope: Construct, id: str, **kwargs) -> None:
        super().__init__(scope, id, env=kwargs.pop("env", cdk.Environment(region="us-east-1")), **kwargs)
        self.rule_set = ProfilerRuleSet(self, "Rules", rules=[rules.LowGPUUtilization(threshold_p95=80)])
        self.job = ProfiledTrainingJob(self, "Job",
            job_name_prefix="churn-xgb",
            training_image=PYTORCH_IMAGE,
            instance_type="ml.g5.2xlarge",
            rule_set=self.rule_set,
            metric_definitions={"train:loss": r"loss=([0-9.]+)", "val:loss": r"val_loss=([0-9.]+)"},
            retry_attempts=2,
            keep_alive=cdk.Duration.minutes(10),
        )
        self.pipeline = TrainingPipeline(self, "Pipeline", steps=[self.job.pipeline_step("Train")],
                                         description="Trains the churn model with the profiled request of Job.")
