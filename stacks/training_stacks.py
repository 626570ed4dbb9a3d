"""Reference stacks for ProfiledTrainingJob: the README quick start (environment-agnostic, us-east-1, China), the same
job on SageMaker Debugger, and a custom rule (Debugger)."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from constructs import Construct

from cdk_sagemaker_debugger import Email, ProfiledTrainingJob, ProfilerRuleSet, RuleAlarm, RuleEngine, rules

PYTORCH_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
# The same AWS Deep Learning Container in the China regions' registry (account 727897471807, amazonaws.com.cn):
# SageMaker pulls the training image in the job's own region and partition.
PYTORCH_IMAGE_CHINA = "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/pytorch-training:2.3.0-gpu-py311"
CUSTOM_RULE_SOURCE = Path(__file__).parent / "assets" / "gpu_idle_rule.py"


class ContractStack(cdk.Stack):
    """The README quick start, exactly: rules evaluated by our own evaluator from the sampler's files, and e-mail when
    a rule finds issues. Nothing in it needs SageMaker Debugger, so it deploys in a brand-new account."""

    def __init__(self, scope: Construct, id: str, *, training_image: str = PYTORCH_IMAGE, **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        self.rule_set = ProfilerRuleSet(self, "Rules", rules=[
            rules.ProfilerReport(),
            rules.LowGPUUtilization(threshold_p95=80),
        ])
        self.job = ProfiledTrainingJob(self, "Job",
            job_name_prefix="resnet",
            training_image=training_image,
            instance_type="ml.g5.2xlarge",
            rule_set=self.rule_set,
        )
        self.alarm = RuleAlarm(self, "Alarm", training_jobs=self.job.training_jobs, actions=[Email("ml-team@example.com")])


class DebuggerContractStack(cdk.Stack):
    """The first release's quick start on SageMaker Debugger, for accounts that still have it: ProfilerConfig and
    ProfilerRuleConfigurations exactly as the SageMaker Python SDK sends them."""

    def __init__(self, scope: Construct, id: str, **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        self.rule_set = ProfilerRuleSet(self, "Rules", rules=[
            rules.ProfilerReport(CPUBottleneck_threshold=90),
            rules.LowGPUUtilization(threshold_p95=80),
            rules.StepOutlier(stddev=5),
        ])
        self.job = ProfiledTrainingJob(self, "Job",
            job_name_prefix="resnet",
            training_image=PYTORCH_IMAGE,
            instance_type="ml.g5.2xlarge",
            instance_count=1,
            rule_set=self.rule_set,
            rule_engine=RuleEngine.DEBUGGER,
        )


def us_east_1_contract_stack(app: cdk.App) -> cdk.Stack:
    return ContractStack(app, "TrainingUsEast1", env=cdk.Environment(region="us-east-1"))


def china_contract_stack(app: cdk.App) -> cdk.Stack:
    return ContractStack(app, "TrainingChina", env=cdk.Environment(region="cn-north-1"),
                         training_image=PYTORCH_IMAGE_CHINA)


class CustomRuleStack(cdk.Stack):
    """A custom profiler rule whose local source file becomes an S3 asset, next to a built-in rule."""

    def __init__(self, scope: Construct, id: str, **kwargs) -> None:
        super().__init__(scope, id, env=kwargs.pop("env", cdk.Environment(region="eu-west-1")), **kwargs)
        self.rule_set = ProfilerRuleSet(self, "Rules", rules=[
            rules.ProfilerRule.custom(
                name="GpuIdle",
                rule_to_invoke="GpuIdleRule",
                source=str(CUSTOM_RULE_SOURCE),
                instance_type="ml.m5.xlarge",
                volume_size_in_gb=30,
                parameters={"patience": 10},
            ),
            rules.GPUMemoryIncrease(increase=10),
        ])
        self.job = ProfiledTrainingJob(self, "Job",
            job_name_prefix="bert-custom",
            training_image=PYTORCH_IMAGE.replace("us-east-1", "eu-west-1"),
            instance_type="ml.g5.xlarge",
            rule_set=self.rule_set,
            rule_engine=RuleEngine.DEBUGGER,  # a custom rule runs in Debugger's rule container
            max_runtime=cdk.Duration.hours(6),
        )
