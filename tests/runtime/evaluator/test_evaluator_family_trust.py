"""Joining a tag or pipeline family by tagging: the evaluator's handler (moto S3 and EventBridge, a botocore Stubber for
SageMaker) judges a job only when it runs as one of the family's roles and, for a pipeline family, when the execution
in its tag is of the pipeline in the job's own partition, region and account."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
import test_evaluator_lambda as lambda_tests
from botocore.stub import Stubber
from test_evaluator_lambda import BUCKET, REGION, clients_for, describe, received

from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
from cdk_sagemaker_debugger.runtime.evaluator.contract_shared import PIPELINE_EXECUTION_TAG, JobFamily

ACCOUNT = "123456789012"
TEAM_ROLE = f"arn:aws:iam::{ACCOUNT}:role/vision-training"
aws = lambda_tests.aws  # moto S3, SQS and EventBridge (the fixture of the handler's own tests)
STEP_ROLES = (f"arn:aws:iam::{ACCOUNT}:role/churn-prepare", f"arn:aws:iam::{ACCOUNT}:role/churn-train")


def _job(name: str, role: str) -> dict[str, Any]:
    arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{name.lower()}"
    return {**describe(), "TrainingJobName": name, "TrainingJobArn": arn, "RoleArn": role}


def _run(aws: dict[str, Any], family: JobFamily, job: dict[str, Any], tags: dict[str, str]) -> dict[str, Any]:
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    stub = Stubber(sagemaker)
    stub.add_response("describe_training_job", job, {"TrainingJobName": job["TrainingJobName"]})
    stub.add_response("list_tags", {"Tags": [{"Key": k, "Value": v} for k, v in tags.items()]},
                      {"ResourceArn": job["TrainingJobArn"], "MaxResults": 100})
    stub.activate()
    settings = lh.Settings(family=family, read_workers=1)
    outcome = lh.handler({"detail": {"TrainingJobName": job["TrainingJobName"]}}, None,
                         clients=clients_for(aws, sagemaker), settings=settings)
    stub.assert_no_pending_responses()
    return outcome["jobs"][0]


def _nothing_written(aws: dict[str, Any]) -> bool:
    return aws["s3"].list_objects_v2(Bucket=BUCKET, Prefix="output/").get("KeyCount", 0) == 0 and received(aws) == []


def test_a_job_tagged_into_a_tag_family_but_running_as_another_role_is_not_judged(aws) -> None:
    family = JobFamily(tag_key="team", tag_value="vision", execution_role_arns=(TEAM_ROLE,))
    intruder = _job("idle-gpu-job", f"arn:aws:iam::{ACCOUNT}:role/someone-else")
    result = _run(aws, family, intruder, {"team": "vision"})
    assert result["result"] == "not in the family" and "execution role" in result["reason"]
    assert _nothing_written(aws)  # no state, no report, no verdict on the bus


@pytest.mark.parametrize("execution", [
    "arn:aws:sagemaker:us-east-1:999999999999:pipeline/churn/execution/e1",  # the same name in another account
    "arn:aws:sagemaker:eu-west-1:123456789012:pipeline/churn/execution/e1",  # in another region
    "arn:aws-cn:sagemaker:us-east-1:123456789012:pipeline/churn/execution/e1",  # in another partition
], ids=["account", "region", "partition"])
def test_a_job_tagged_with_another_accounts_pipeline_of_the_same_name_is_not_judged(aws, execution: str) -> None:
    family = JobFamily(job_name_prefix="pipelines-", pipeline_name="churn", execution_role_arns=STEP_ROLES)
    job = _job("pipelines-kytlemm1lvpq-Train-cIpzShs3Qp", STEP_ROLES[1])
    result = _run(aws, family, job, {PIPELINE_EXECUTION_TAG: execution})
    assert result["result"] == "not in the family" and "of its own account" in result["reason"]
    assert _nothing_written(aws)


def test_each_steps_role_and_only_those_belong_to_a_pipeline_family() -> None:
    family = JobFamily.from_json(json.dumps({"job_name_prefix": "pipelines-", "pipeline_name": "Churn",
                                             "execution_role_arns": list(STEP_ROLES)}))
    job = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/pipelines-abc-train-xyz"
    tags = {PIPELINE_EXECUTION_TAG: f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:pipeline/churn/execution/e1"}
    for role in STEP_ROLES:
        assert family.refusal("pipelines-abc-Train-xyz", tags, role_arn=role, job_arn=job) is None
    assert family.refusal("pipelines-abc-Train-xyz", tags, role_arn=TEAM_ROLE, job_arn=job) is not None
    assert family.refusal("pipelines-abc-Train-xyz", tags, role_arn=STEP_ROLES[0]) is not None  # ARN unknown
    with pytest.raises(ValueError, match="not a list of role ARNs"):
        JobFamily.from_json('{"job_name_prefix": "x-", "execution_role_arns": "arn:aws:iam::1:role/r"}')
