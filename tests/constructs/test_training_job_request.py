"""The whole CreateTrainingJob request on ProfiledTrainingJob (typed props, request_overrides), its SageMaker Pipelines
step and TrainingPipeline: fine-grained template assertions and bad-input messages."""

from __future__ import annotations

import json
import re
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Annotations, Match, Template
from helpers import make_stack, role_policy_statements, task_parameters
from template_values import TemplateResolver

from cdk_sagemaker_debugger import (
    ExperimentConfig,
    InstanceGroup,
    ProfiledTrainingJob,
    ProfilerRuleSet,
    RuleEngine,
    TrainingImageConfig,
    TrainingPipeline,
    rules,
)
from cdk_sagemaker_debugger.model.api_model import request_problems
from cdk_sagemaker_debugger.model.errors import ConfigurationError
from cdk_sagemaker_debugger.model.pipeline_definition import PLACEHOLDER_JOB_NAME

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
REGION = "us-east-1"


def job(stack: cdk.Stack, **kwargs: Any) -> ProfiledTrainingJob:
    return ProfiledTrainingJob(stack, "Job", **{"job_name_prefix": "resnet", "training_image": IMAGE, **kwargs})


@pytest.fixture(scope="module")
def full() -> cdk.Stack:
    stack = make_stack()
    job(stack,
        metric_definitions={"train:loss": r"loss=([0-9.]+)"}, enable_sagemaker_metrics_time_series=True,
        retry_attempts=2, keep_alive=cdk.Duration.minutes(10), infra_check=True,
        container_entrypoint=["python", "train.py"], container_arguments=["--epochs", "3"],
        experiment_config=ExperimentConfig(experiment_name="resnet"),
        request_overrides={"StoppingCondition": {"MaxPendingTimeInSeconds": 7200},
                           "OutputDataConfig": {"CompressionType": "NONE"}})
    return stack


class TestRequest:
    def test_props_reach_the_state_machine_request(self, full):
        params = task_parameters(full)
        assert params["AlgorithmSpecification"] == {
            "TrainingImage": IMAGE, "TrainingInputMode": "File", "ContainerEntrypoint": ["python", "train.py"],
            "ContainerArguments": ["--epochs", "3"],
            "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}],
            "EnableSageMakerMetricsTimeSeries": True}
        assert params["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 600
        assert params["RetryStrategy"] == {"MaximumRetryAttempts": 2}
        assert params["InfraCheckConfig"] == {"EnableInfraCheck": True}
        assert params["ExperimentConfig"] == {"ExperimentName": "resnet"}
        assert params["StoppingCondition"] == {"MaxRuntimeInSeconds": 86400, "MaxPendingTimeInSeconds": 7200}
        assert params["OutputDataConfig"]["CompressionType"] == "NONE"

    def test_without_the_new_props_the_request_keeps_its_members(self):
        stack = make_stack()
        rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.LowGPUUtilization()])
        request = job(stack, rule_set=rule_set, rule_engine=RuleEngine.DEBUGGER).render_request()
        assert list(request) == ["TrainingJobName", "AlgorithmSpecification", "RoleArn", "OutputDataConfig",
                                 "ResourceConfig", "StoppingCondition", "ProfilerConfig",
                                 "ProfilerRuleConfigurations"]
        assert list(request["ResourceConfig"]) == ["InstanceType", "InstanceCount", "VolumeSizeInGB"]

    def test_instance_groups_replace_instance_type_and_count(self):
        stack = make_stack()
        groups = [InstanceGroup("data", "ml.c5.18xlarge", 2), InstanceGroup("gpu", "ml.p4d.24xlarge")]
        resource = job(stack, instance_groups=groups).render_request()["ResourceConfig"]
        assert resource == {"VolumeSizeInGB": 30, "InstanceGroups": [
            {"InstanceGroupName": "data", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 2},
            {"InstanceGroupName": "gpu", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1}]}

    def test_private_registry_image(self):
        stack = make_stack()
        config = TrainingImageConfig("Vpc", "arn:aws:lambda:us-east-1:123456789012:function:registry-creds")
        spec = job(stack, training_image="registry.example.com/team/train:1", training_image_config=config
                   ).render_request()["AlgorithmSpecification"]
        assert spec["TrainingImageConfig"] == {"TrainingRepositoryAccessMode": "Vpc", "TrainingRepositoryAuthConfig": {
            "TrainingRepositoryCredentialsProviderArn": "arn:aws:lambda:us-east-1:123456789012:function:registry-creds"}}

    def test_tokens_in_overrides_are_left_to_deploy_time(self):
        stack = make_stack()
        plan = cdk.CfnParameter(stack, "TrainingPlan").value_as_string
        params = task_parameters_with(stack, request_overrides={"ResourceConfig": {"TrainingPlanArn": plan}})
        assert params["ResourceConfig"]["TrainingPlanArn"] == "<Ref TrainingPlan>"


def task_parameters_with(stack: cdk.Stack, **kwargs: Any) -> dict[str, Any]:
    job(stack, **kwargs)
    return task_parameters(stack)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"retry_attempts": 0}, r"Training/Job: retry_attempts: .*MaximumRetryAttempts: 0 is below the minimum 1"),
        ({"keep_alive": cdk.Duration.millis(1500)}, r"Training/Job: keep_alive: must be whole seconds, got 1.5 s"),
        ({"instance_groups": [InstanceGroup("a", "ml.m5.large")], "instance_type": "ml.g5.2xlarge"},
         r"Training/Job: instance_groups: .*instance_type \('ml.g5.2xlarge'\).*cannot be used with it"),
        ({"metric_definitions": {"loss": "loss"}}, r"Training/Job: metric_definitions\['loss'\]: .*no capturing group"),
        ({"request_overrides": {"RoleArn": "arn:aws:iam::123456789012:role/x"}},
         r"Training/Job: request_overrides: .*RoleArn \(use role="),
        ({"request_overrides": {"InputDataConfig": []}}, r"InputDataConfig \(use inputs=; the construct adds the "
                                                        r"sampler's channel itself\)"),
    ],
)
def test_bad_props_name_the_construct_path(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        job(make_stack(), **kwargs)


# -- SageMaker Pipelines -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pipeline_stack() -> cdk.Stack:
    stack = make_stack()
    rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.LowGPUUtilization()])
    training = job(stack, rule_set=rule_set, metric_definitions={"train:loss": r"loss=([0-9.]+)"}, retry_attempts=2,
                   keep_alive=cdk.Duration.minutes(10))
    TrainingPipeline(stack, "Pipeline", steps=[training.pipeline_step("Train", display_name="Train resnet")],
                     pipeline_name="resnet-training", description="Trains resnet.")
    return stack


def _resources(stack: cdk.Stack, kind: str) -> dict[str, Any]:
    return Template.from_stack(stack).find_resources(kind)


def _definition(stack: cdk.Stack) -> dict[str, Any]:
    template = Template.from_stack(stack).to_json()
    (pipeline,) = (r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Pipeline")
    body = TemplateResolver("Training", template, REGION).resolve(
        pipeline["Properties"]["PipelineDefinition"]["PipelineDefinitionBody"])
    return json.loads(body)


class TestPipelineStep:
    def test_step_runs_the_same_request_without_the_job_name(self):
        stack = make_stack()
        training = job(stack, retry_attempts=2)
        step = training.pipeline_step("Train", depends_on=None)
        request = training.render_request()
        assert step["Name"] == "Train" and step["Type"] == "Training"
        assert step["Arguments"] == {k: v for k, v in request.items() if k != "TrainingJobName"}

    def test_step_keeps_the_sampler_and_lets_the_role_upload_for_pipeline_runs(self, pipeline_stack):
        steps = _definition(pipeline_stack)["Steps"]
        arguments = steps[0]["Arguments"]
        assert [c["ChannelName"] for c in arguments["InputDataConfig"]] == ["cdk-sagemaker-sampler"]
        assert arguments["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"].startswith(
            "s3://cdk-hnb659fds-assets-123456789012-us-east-1/")
        assert "CDK_SAGEMAKER_SAMPLER_S3_URI" in arguments["Environment"]
        uploads = [s for s in role_policy_statements(pipeline_stack, "JobExecutionRole")
                   if s["Action"] == "s3:PutObject" and "pipelines-*" in json.dumps(s["Resource"])]
        assert len(uploads) == 1
        assert json.dumps(uploads[0]["Resource"]).endswith('/training/pipelines-*/profiler-output/*"]]}')

    def test_experiment_names_are_left_to_pipelines_with_a_warning(self):
        stack = make_stack()
        step = job(stack, experiment_config=ExperimentConfig(experiment_name="e", trial_component_display_name="t")
                   ).pipeline_step("Train")
        assert step["Arguments"]["ExperimentConfig"] == {"TrialComponentDisplayName": "t"}
        Annotations.from_stack(stack).has_warning("/Training/Job", Match.string_like_regexp(
            "Pipeline step 'Train' leaves out ExperimentConfig ExperimentName"))

    def test_bad_step_names_name_the_construct(self):
        with pytest.raises(ConfigurationError, match=r"Training/Job: name: 'Train step' must be 0-64 characters"):
            job(make_stack()).pipeline_step("Train step")


class TestTrainingPipeline:
    def test_pipeline_resource(self, pipeline_stack):
        Template.from_stack(pipeline_stack).has_resource_properties("AWS::SageMaker::Pipeline", {
            "PipelineName": "resnet-training",
            "PipelineDescription": "Trains resnet.",
            "RoleArn": {"Fn::GetAtt": [Match.string_like_regexp("^PipelineExecutionRole"), "Arn"]},
            "PipelineDefinition": {"PipelineDefinitionBody": Match.any_value()},
        })

    def test_definition_body_parses_and_its_arguments_pass_the_botocore_check(self, pipeline_stack):
        definition = _definition(pipeline_stack)
        assert definition["Version"] == "2020-12-01"
        (step,) = definition["Steps"]
        assert (step["Name"], step["Type"], step["DisplayName"]) == ("Train", "Training", "Train resnet")
        assert "TrainingJobName" not in step["Arguments"]
        assert step["Arguments"]["RoleArn"].startswith("arn:aws:iam::123456789012:role/")
        assert step["Arguments"]["RetryStrategy"] == {"MaximumRetryAttempts": 2}
        assert request_problems({"TrainingJobName": PLACEHOLDER_JOB_NAME, **step["Arguments"]}) == []

    def test_execution_role_has_least_privilege(self, pipeline_stack):
        (role_id,) = [i for i in _resources(pipeline_stack, "AWS::IAM::Role") if i.startswith("PipelineExecutionRole")]
        role = _resources(pipeline_stack, "AWS::IAM::Role")[role_id]["Properties"]
        (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
        assert {k: v for k, v in trust.items() if k != "Condition"} == {
            "Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}}
        assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
        assert all(":pipeline/" in json.dumps(arn) for arn in trust["Condition"]["ArnLike"]["aws:SourceArn"])
        statements = role_policy_statements(pipeline_stack, "PipelineExecutionRole")
        jobs = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":sagemaker:us-east-1:", {"Ref": "AWS::AccountId"},
                                  ":training-job/pipelines-*"]]}
        (job_role,) = [i for i in _resources(pipeline_stack, "AWS::IAM::Role") if i.startswith("JobExecutionRole")]
        own = [{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":sagemaker:us-east-1:", {"Ref": "AWS::AccountId"},
                                  ":pipeline/resnet-training/execution/*"]]}]
        tag = "sagemaker:pipeline-execution-arn"
        assert statements == [
            {"Action": ["sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob"], "Effect": "Allow",
             "Resource": jobs},
            {"Action": "sagemaker:StopTrainingJob", "Effect": "Allow", "Resource": jobs,
             "Condition": {"StringLike": {f"aws:ResourceTag/{tag}": own}}},
            {"Action": "sagemaker:AddTags", "Effect": "Allow", "Resource": jobs,
             "Condition": {"StringLikeIfExists": {f"aws:ResourceTag/{tag}": own, f"aws:RequestTag/{tag}": own}}},
            {"Action": "iam:PassRole", "Effect": "Allow", "Resource": {"Fn::GetAtt": [job_role, "Arn"]},
             "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}},
        ]

    def test_a_given_role_is_used_unchanged(self):
        stack = make_stack()
        role = iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::123456789012:role/pipelines")
        pipeline = TrainingPipeline(stack, "Pipeline", steps=[job(stack).pipeline_step("Train")], role=role)
        assert pipeline.role is role
        assert not [i for i in _resources(stack, "AWS::IAM::Role") if i.startswith("Pipeline")]
        Template.from_stack(stack).has_resource_properties("AWS::SageMaker::Pipeline", {
            "RoleArn": "arn:aws:iam::123456789012:role/pipelines"})

    def test_generated_name_is_a_valid_pipeline_name(self):
        stack = make_stack()
        pipeline = TrainingPipeline(stack, "My_Pipeline", steps=[job(stack).pipeline_step("Train")])
        assert re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}", pipeline.pipeline_name), pipeline.pipeline_name

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"pipeline_name": "resnet_training"}, r"Training/Pipeline: pipeline_name: must be 1-256 letters, digits and hyphens"),
            ({"steps": []}, r"Training/Pipeline: steps: expected a non-empty list of steps"),
        ],
    )
    def test_bad_input(self, kwargs, message):
        stack = make_stack()
        settings = {"steps": [job(stack).pipeline_step("Train")], **kwargs}
        with pytest.raises(ConfigurationError, match=message):
            TrainingPipeline(stack, "Pipeline", **settings)
