"""Reference stack: a job family at a glance, with every alarm of the library notifying an operations topic."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from cdk_sagemaker_debugger import Email, ProfiledTrainingJob, ProfilerRuleSet, RuleAlarm, TrainingDashboard, rules

PYTORCH_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"


class DashboardStack(cdk.Stack):
    """A two-node GPU job with ProfilerReport and a strict LowGPUUtilization, its evaluator (``job.evaluator``), a
    RuleAlarm e-mailing the team, and a TrainingDashboard whose alarms, and the RuleAlarm's own two, notify an
    encrypted operations topic."""

    def __init__(self, scope: Construct, id: str, **kwargs) -> None:
        super().__init__(scope, id, env=kwargs.pop("env", cdk.Environment(region="us-east-1")), **kwargs)
        self.rule_set = ProfilerRuleSet(self, "Rules", rules=[
            rules.ProfilerReport(),
            rules.LowGPUUtilization(name="LowGPU-strict", threshold_p95=80, window=300),
        ])
        self.job = ProfiledTrainingJob(self, "Job",
            job_name_prefix="vision-train",
            training_image=PYTORCH_IMAGE,
            instance_type="ml.g5.12xlarge",
            instance_count=2,
            rule_set=self.rule_set,
        )
        self.ops_key = kms.Key(self, "OpsTopicKey", enable_key_rotation=True,
                               description="Encrypts the operations notifications of the training pipeline")
        self.ops_topic = sns.Topic(self, "OpsTopic", master_key=self.ops_key, enforce_ssl=True,
                                   display_name="Training pipeline operations")
        self.ops_topic.add_subscription(subscriptions.EmailSubscription("ml-platform@example.com"))
        self.alarm = RuleAlarm(self, "Alarm",
            training_jobs=self.job.training_jobs,
            actions=[Email("ml-team@example.com")],
            ops_topic=self.ops_topic,
        )
        self.dashboard = TrainingDashboard(self, "Dashboard",
            training_jobs=self.job.training_jobs,
            alarm=self.alarm,
            ops_topic=self.ops_topic,
            dashboard_name="vision-train",
        )
