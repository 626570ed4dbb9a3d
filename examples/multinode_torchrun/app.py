"""A two-node torchrun job that runs right the first time: the code uploaded from ./src, torchrun on every host, spot
with checkpoints, a private VPC whose hosts reach each other, profiler rules with an alarm and a dashboard.

    cdk deploy --app "python examples/multinode_torchrun/app.py"
    aws stepfunctions start-execution --state-machine-arn <the StartRun output>
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk_sagemaker_debugger import (
    Checkpoints,
    Distribution,
    Email,
    ProfiledTrainingJob,
    ProfilerRuleSet,
    RuleAlarm,
    TrainingCode,
    TrainingDashboard,
    rules,
)

PYTORCH_DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
SOURCE = Path(__file__).parent / "src"


class MultiNodeTrainingStack(cdk.Stack):
    """2 x ml.g5.12xlarge (4 GPUs each) with torchrun, spot capacity and checkpoints, in a private VPC."""

    def __init__(self, scope: Construct, id: str, **kwargs) -> None:
        super().__init__(scope, id, **kwargs)
        vpc = ec2.Vpc(self, "Vpc", max_azs=2, nat_gateways=1)
        vpc.add_flow_log("FlowLog")
        # The sampler, the code and the checkpoints go to S3: keep that traffic off the NAT gateway.
        vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)
        bucket = s3.Bucket(self, "Checkpoints", enforce_ssl=True, versioned=True,
                           block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                           lifecycle_rules=[s3.LifecycleRule(noncurrent_version_expiration=cdk.Duration.days(7))])
        rule_set = ProfilerRuleSet(self, "Rules", rules=[rules.LowGPUUtilization(threshold_p95=70),
                                                        rules.StepOutlier(), rules.GPUMemoryIncrease()])
        self.job = ProfiledTrainingJob(self, "Llm",
            job_name_prefix="llm",
            training_image=PYTORCH_DLC, instance_type="ml.g5.12xlarge", instance_count=2,
            code=TrainingCode.from_asset(str(SOURCE), entry_point="train.py"),
            distribution=Distribution.torch_distributed(),
            checkpoints=Checkpoints.from_bucket(bucket, "ckpt/llm", local_path="/opt/ml/checkpoints"),
            use_spot_instances=True, max_runtime=cdk.Duration.hours(20), max_wait=cdk.Duration.hours(30),
            vpc=vpc, vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            rule_set=rule_set)
        self.alarm = RuleAlarm(self, "Alarm", training_jobs=self.job.training_jobs,
                               actions=[Email("ml-team@example.com")])
        self.dashboard = TrainingDashboard(self, "Dashboard", training_jobs=self.job.training_jobs,
                                           evaluator=self.job.evaluator, alarm=self.alarm)
        cdk.CfnOutput(self, "StartRun", value=self.job.state_machine.state_machine_arn,
                      description="aws stepfunctions start-execution --state-machine-arn <this value> starts a run")


def build(app: cdk.App) -> MultiNodeTrainingStack:
    return MultiNodeTrainingStack(app, "MultiNodeTraining", env=cdk.Environment(region="us-east-1"))


if __name__ == "__main__":
    application = cdk.App()
    build(application)
    application.synth()
