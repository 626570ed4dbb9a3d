"""TrainingJobs in the templates: IAM scoping, EventBridge patterns and the environment of each kind of family."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template

from cdk_sagemaker_debugger import Email, ProfiledTrainingJob, RuleAlarm, RuleEvaluator, StopTraining, TrainingJobs

US_EAST_1 = cdk.Environment(region="us-east-1")
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-sagemaker"


def _role(stack: cdk.Stack) -> iam.IRole:
    return iam.Role.from_role_arn(stack, "JobRole", "arn:aws:iam::123456789012:role/team-jobs")


def _statements(template: Template) -> list[dict[str, Any]]:
    return [s for p in template.find_resources("AWS::IAM::Policy").values()
            for s in p["Properties"]["PolicyDocument"]["Statement"]]


def _with(template: Template, action: str) -> list[dict[str, Any]]:
    return [s for s in _statements(template) if action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])]


def test_a_tag_family_scopes_iam_by_resource_tag_and_events_by_the_detail_tags() -> None:
    stack = cdk.Stack(cdk.App(), "Tagged", env=US_EAST_1)
    jobs = TrainingJobs.from_tag("team", "vision", output_bucket=s3.Bucket(stack, "Out"), execution_role=_role(stack))
    RuleAlarm(stack, "Alarm", training_jobs=jobs, actions=[Email("a@example.com"), StopTraining()])
    RuleEvaluator(stack, "Evaluator", training_jobs=jobs)
    template = Template.from_stack(stack)
    condition = {"StringEquals": {"aws:ResourceTag/team": "vision"}}
    for action in ("sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob"):
        for statement in _with(template, action):
            assert statement["Condition"] == condition, action
            assert json.dumps(statement["Resource"]).endswith(':training-job/*"]]}')
    assert len(_with(template, "sagemaker:StopTrainingJob")) == 1
    assert len(_with(template, "sagemaker:ListTags")) == 2  # alarm and evaluator read tags to tell
    template.has_resource_properties("AWS::Events::Rule", {"EventPattern": {
        "source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"],
        "account": [{"Ref": "AWS::AccountId"}], "detail": {"Tags": {"team": ["vision"]}}}})
    template.has_resource_properties("AWS::Events::Rule", {"EventPattern": {
        "source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"],
        "detail": {"Tags": {"team": ["vision"]}, "TrainingJobStatus": ["Completed", "Failed", "Stopped"]}}})
    template.has_resource_properties("AWS::Lambda::Function", {"Environment": {"Variables": Match.object_like({
        "JOB_FAMILY": '{"execution_role_arns": ["arn:aws:iam::123456789012:role/team-jobs"], "tag_key": "team", "tag_value": "vision"}',
        "STOP": "true", "STOP_PREFIX": ""})}})


def test_a_pipeline_family_scopes_by_the_execution_tag_and_the_pipelines_name_prefix() -> None:
    stack = cdk.Stack(cdk.App(), "Pipeline", env=US_EAST_1)
    jobs = TrainingJobs.from_pipeline("Churn-Pipeline", output_bucket=s3.Bucket(stack, "Out"),
                                      execution_role=_role(stack))
    RuleEvaluator(stack, "Evaluator", training_jobs=jobs)
    template = Template.from_stack(stack)
    (describe,) = _with(template, "sagemaker:DescribeTrainingJob")
    assert json.dumps(describe["Resource"]).endswith(':training-job/pipelines-*"]]}')
    executions = describe["Condition"]["StringLike"]["aws:ResourceTag/sagemaker:pipeline-execution-arn"]
    assert [json.dumps(e).split(":pipeline/")[1] for e in executions] == [
        'Churn-Pipeline/execution/*"]]}', 'churn-pipeline/execution/*"]]}']
    template.has_resource_properties("AWS::Events::Rule", {"EventPattern": Match.object_like({
        "detail": {"TrainingJobName": [{"prefix": "pipelines-"}],
                   "TrainingJobStatus": ["Completed", "Failed", "Stopped"]}})})
    template.has_resource_properties("AWS::Lambda::Function", {"Environment": {"Variables": Match.object_like({
        "JOB_FAMILY": '{"execution_role_arns": ["arn:aws:iam::123456789012:role/team-jobs"], "job_name_prefix": "pipelines-", '
                      '"pipeline_name": "Churn-Pipeline"}'})}})


def test_arn_patterns_are_lower_case_and_grants_return_grants() -> None:
    stack = cdk.Stack(cdk.App(), "Grants", env=US_EAST_1)
    jobs = TrainingJobs.from_job_name_prefix("ResNet-", output_bucket=s3.Bucket(stack, "Out"))
    assert stack.resolve(jobs.arn_pattern)["Fn::Join"][1][-1] == ":training-job/resnet-*"
    role = iam.Role(stack, "Ops", assumed_by=iam.AccountRootPrincipal())
    grant = jobs.grant_stop(role)
    assert isinstance(grant, iam.Grant) and grant.success
    actions = sorted(a for s in _statements(Template.from_stack(stack)) for a in (
        [s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
    assert actions == ["sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob"]


def test_a_training_job_is_grantable_and_connectable_in_a_vpc() -> None:
    from aws_cdk import aws_ec2 as ec2

    stack = cdk.Stack(cdk.App(), "Job", env=US_EAST_1)
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=0, subnet_configuration=[
        ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)])
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="resnet", training_image=IMAGE, vpc=vpc,
                              vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED))
    data = s3.Bucket(stack, "Data")
    assert data.grant_read(job).success
    database = ec2.SecurityGroup(stack, "Database", vpc=vpc)
    database.connections.allow_from(job, ec2.Port.tcp(5432))
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::EC2::SecurityGroupIngress", Match.object_like({"FromPort": 5432}))
    assert job.training_jobs.execution_role is job.role
