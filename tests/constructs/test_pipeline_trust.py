"""The pipeline execution role stops and tags only its own pipeline's jobs (before: every ``pipelines-*`` job of the
account, other teams' pipelines included), and only SageMaker acting for this account may assume it. Decided offline by
a small local evaluator (tests/policy_decisions.py) on the resolved template."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template
from policy_decisions import ACCOUNT, REGION, decide, resolve

from cdk_sagemaker_debugger import ProfiledTrainingJob, TrainingPipeline

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
TAG = "aws:ResourceTag/sagemaker:pipeline-execution-arn"
OTHER_JOB = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/pipelines-abc123-train-xyz"


def _role_document(template: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    (role,) = [r["Properties"] for k, r in template["Resources"].items()
               if r["Type"] == "AWS::IAM::Role" and k.startswith("PipelineExecutionRole")]
    statements = [s for p in role["Policies"] for s in resolve(p["PolicyDocument"], template)["Statement"]]
    return statements, resolve(role["AssumeRolePolicyDocument"], template)["Statement"]


def _synth() -> dict[str, Any]:
    stack = cdk.Stack(cdk.App(), "Training", env=cdk.Environment(region=REGION))
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="resnet", training_image=IMAGE)
    TrainingPipeline(stack, "Pipeline", steps=[job.pipeline_step("Train")], pipeline_name="resnet-training")
    return Template.from_stack(stack).to_json()


def _may(statements: list[dict[str, Any]], action: str, context: dict[str, str]) -> str:
    return decide(statements, principal={}, action=action, resource=OTHER_JOB, context=context)


def test_the_pipeline_role_stops_and_tags_only_its_own_pipelines_jobs() -> None:
    statements, _trust = _role_document(_synth())
    for statement in statements:
        statement["Principal"] = "*"  # identity policy: the role is the principal
    own = {TAG: f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:pipeline/resnet-training/execution/e1"}
    other = {TAG: f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:pipeline/team-b-training/execution/e9"}
    assert _may(statements, "sagemaker:StopTrainingJob", own) == "Allow"
    assert _may(statements, "sagemaker:StopTrainingJob", other) == "ImplicitDeny"  # another team's pipeline run
    assert _may(statements, "sagemaker:StopTrainingJob", {}) == "ImplicitDeny"     # an untagged pipelines-* job
    assert _may(statements, "sagemaker:AddTags", own) == "Allow"
    assert _may(statements, "sagemaker:AddTags", {}) == "Allow"  # the job SageMaker is creating, not yet tagged
    assert _may(statements, "sagemaker:AddTags", other) == "ImplicitDeny"
    forged = {"aws:RequestTag/sagemaker:pipeline-execution-arn": other[TAG]}
    assert _may(statements, "sagemaker:AddTags", forged) == "ImplicitDeny"  # joining another pipeline's family


def test_only_sagemaker_acting_for_this_account_may_assume_the_pipeline_role() -> None:
    _statements, trust = _role_document(_synth())
    sagemaker = {"Service": "sagemaker.amazonaws.com"}
    own = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:pipeline/resnet-training/execution/e1"

    def assume(account: str, source: str | None) -> str:
        context = {"aws:SourceAccount": account, **({"aws:SourceArn": source} if source else {})}
        return decide(trust, principal=sagemaker, action="sts:AssumeRole", resource="*", context=context)

    assert assume(ACCOUNT, own) == "Allow"
    assert assume("222222222222", own.replace(ACCOUNT, "222222222222")) == "ImplicitDeny"  # another account's
    assert assume(ACCOUNT, own.replace("resnet-training", "team-b-training")) == "ImplicitDeny"  # another pipeline
    assert assume(ACCOUNT, own.replace("resnet-training", "resnet-training-2")) == "ImplicitDeny"  # a longer name
    assert assume(ACCOUNT, None) == "ImplicitDeny"
