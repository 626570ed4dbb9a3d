"""Reference stack: a profiled training job whose rule verdicts are e-mailed, texted and stop the job, exactly once."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from cdk_sagemaker_debugger import SMS, Email, ProfiledTrainingJob, ProfilerRuleSet, RuleAlarm, StopTraining, rules

PYTORCH_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"


class AlarmStack(cdk.Stack):
    """ProfilerReport plus a strict LowGPUUtilization on a GPU job; a finding mails, texts and stops the job, and a
    rule that errors (for example because no profiler data arrived) mails and texts too."""

    def __init__(self, scope: Construct, id: str, **kwargs) -> None:
        super().__init__(scope, id, env=kwargs.pop("env", cdk.Environment(region="us-east-1")), **kwargs)
        self.rule_set = ProfilerRuleSet(self, "Rules", rules=[
            rules.ProfilerReport(),
            rules.LowGPUUtilization(threshold_p95=60, window=300),
        ])
        self.job = ProfiledTrainingJob(self, "Job",
            job_name_prefix="resnet-exp",
            training_image=PYTORCH_IMAGE,
            instance_type="ml.g5.2xlarge",
            rule_set=self.rule_set,
        )
        # The reference stacks are alternatives: this one is never deployed next to TrainingUsEast1 ('resnet').
        cdk.Annotations.of(self.job).acknowledge_warning(
            "cdk-sagemaker-debugger:sharedJobNamePrefix",
            "Reference stacks are deployed one at a time; in one account and region, give each job its own prefix.",
        )
        self.alarm = RuleAlarm(self, "Alarm",
            training_jobs=self.job.training_jobs,
            actions=[Email("ml-team@example.com"), SMS("+15555550100"), StopTraining()],
            statuses=["IssuesFound", "Error"],
        )
