"""Reference stack for debugger (tensor) rules: built-in rules with actions, a custom rule, the hook and TensorBoard."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from constructs import Construct

from cdk_sagemaker_debugger import (
    SMS,
    ActionList,
    CollectionConfig,
    DebugHookConfig,
    Distribution,
    Email,
    ProfiledTrainingJob,
    RuleEngine,
    StopTraining,
    TensorBoardOutputConfig,
    debugger_rules,
)

PYTORCH_IMAGE_US_WEST_2 = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
GRADIENT_NORM_SOURCE = Path(__file__).parent / "assets" / "gradient_norm_rule.py"


class DebuggerRulesStack(cdk.Stack):
    """Two-instance torch_distributed training in us-west-2 watched by debugger rules.

    LossNotDecreasing stops the job and notifies by email and SMS; StalledTrainingRule stops a job that writes no
    tensors for 30 minutes; a custom GradientNorm rule (a local file, uploaded as an asset) checks the gradients the
    hook saves for VanishingGradient too.
    """

    def __init__(self, scope: Construct, id: str, **kwargs) -> None:
        super().__init__(scope, id, env=kwargs.pop("env", cdk.Environment(region="us-west-2")), **kwargs)
        self.job = ProfiledTrainingJob(self, "Job",
            job_name_prefix="bert-debug",
            rule_engine=RuleEngine.DEBUGGER,  # debugger (tensor) rules and the hook need SageMaker Debugger
            training_image=PYTORCH_IMAGE_US_WEST_2,
            instance_type="ml.g5.12xlarge",
            instance_count=2,
            distribution=Distribution.torch_distributed(),
            max_runtime=cdk.Duration.hours(12),
            debugger_rules=[
                debugger_rules.LossNotDecreasing(
                    num_steps=20,
                    mode="TRAIN",
                    actions=ActionList(StopTraining(), Email("ml-team@example.com"), SMS("+15555550100")),
                ),
                debugger_rules.VanishingGradient(threshold=1e-6),
                debugger_rules.StalledTrainingRule(threshold=1800, stop_training_on_fire=True),
                debugger_rules.Rule.custom(
                    name="GradientNorm",
                    rule_to_invoke="GradientNorm",
                    source=GRADIENT_NORM_SOURCE,
                    instance_type="ml.m5.xlarge",
                    volume_size_in_gb=30,
                    parameters={"max_norm": 100},
                    collections_to_save=[CollectionConfig("gradients", {"save_interval": 500})],
                ),
            ],
            debug_hook=DebugHookConfig(hook_parameters={"save_interval": 100}),
            tensorboard=TensorBoardOutputConfig(),
        )
