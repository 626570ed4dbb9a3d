"""What the parts of a ProfiledTrainingJob share: pseudo parameters fetched once, the ECR image pattern, the warning
kind prefix."""

from __future__ import annotations

import re

import aws_cdk as cdk
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn

from ...model.parameters import is_token

__all__ = ["CONSTANTS", "ECR_IMAGE", "PSEUDO", "WARNING_PREFIX", "ecr_repository_arns"]

ECR_IMAGE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\."
    r"(?:amazonaws\.com(?:\.cn)?|amazonaws\.eu|c2s\.ic\.gov|sc2s\.sgov\.gov|cloud\.adc-e\.uk|csp\.hci\.ic\.gov)/(?P<repo>[^:@]+)"
)
WARNING_PREFIX = "cdk-sagemaker-debugger"
# Pseudo parameters and constants, fetched once per process (each CDK attribute access is a jsii call).
PSEUDO = {"partition": cdk.Aws.PARTITION, "region": cdk.Aws.REGION, "account": cdk.Aws.ACCOUNT_ID}
CONSTANTS = {
    "block_all": s3.BlockPublicAccess.BLOCK_ALL,
    "log_retention": logs.RetentionDays.ONE_YEAR,
    "log_level": sfn.LogLevel.ALL,
}


def ecr_repository_arns(partition: str, image: str) -> list[str]:
    """The ARN of the ECR repository ``image`` is pulled from (none for tokens and images outside ECR)."""
    match = ECR_IMAGE.match(image) if not is_token(image) else None
    if match is None:
        return []
    return [f"arn:{partition}:ecr:{match['region']}:{match['account']}:repository/{match['repo']}"]
