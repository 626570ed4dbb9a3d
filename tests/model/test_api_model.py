"""Strict request validation against botocore's SageMaker model: what botocore's own validator lets through."""

from __future__ import annotations

import pytest
from botocore.validate import ParamValidator

from cdk_sagemaker_debugger.model.api_model import request_problems, sagemaker_model, validate_request
from cdk_sagemaker_debugger.model.errors import RequestValidationError

VALID = {
    "TrainingJobName": "resnet-00000000000000000000",
    "AlgorithmSpecification": {"TrainingImage": "x", "TrainingInputMode": "File"},
    "RoleArn": "arn:aws:iam::123456789012:role/Training",
    "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
    "ResourceConfig": {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
    "ProfilerRuleConfigurations": [{"RuleConfigurationName": "r", "RuleEvaluatorImage": "img", "RuleParameters": {"a": "1"}}],
}


def test_valid_request_passes_both_validators():
    assert request_problems(VALID) == []
    shape = sagemaker_model().operation_model("CreateTrainingJob").input_shape
    assert not ParamValidator().validate(VALID, shape).has_errors()


@pytest.mark.parametrize(
    ("mutate", "path", "problem"),
    [
        (lambda r: r.update(TrainingJobName="my_job"), "TrainingJobName", "does not match the pattern"),
        (lambda r: r["OutputDataConfig"].update(S3OutputPath="gs://x"), "OutputDataConfig.S3OutputPath", "does not match"),
        (lambda r: r.update(ProfilerRuleConfigurations=VALID["ProfilerRuleConfigurations"] * 21),
         "ProfilerRuleConfigurations", "has 21 items, more than the maximum 20"),
        (lambda r: r["ProfilerRuleConfigurations"][0].update(RuleConfigurationName="n" * 300),
         "ProfilerRuleConfigurations[0].RuleConfigurationName", "has 300 characters, more than the maximum 256"),
        (lambda r: r["ProfilerRuleConfigurations"][0].update(InstanceType="ml.bogus"),
         "ProfilerRuleConfigurations[0].InstanceType", "is not one of the"),
        (lambda r: r["ResourceConfig"].update(InstanceType="ml.g5.2xlarg"), "ResourceConfig.InstanceType",
         "Did you mean 'ml.g5.2xlarge'?"),
        (lambda r: r["ProfilerRuleConfigurations"][0]["RuleParameters"].update(a="v" * 257),
         "ProfilerRuleConfigurations[0].RuleParameters.a", "has 257 characters"),
        (lambda r: r["ProfilerRuleConfigurations"][0]["RuleParameters"].update(n=10),
         "ProfilerRuleConfigurations[0].RuleParameters.n", "expected a string, got int 10"),
        (lambda r: r["ResourceConfig"].update(InstanceCount="1"), "ResourceConfig.InstanceCount", "expected an integer"),
        (lambda r: r.update(ProfilerConfig={"DisableProfiler": "false"}), "ProfilerConfig.DisableProfiler", "expected true or false"),
        (lambda r: r.update(ProfilerConfig={"Foo": 1}), "ProfilerConfig.Foo", "is not a member of ProfilerConfig"),
        (lambda r: r.pop("RoleArn"), "RoleArn", "is required"),
        (lambda r: r["ProfilerRuleConfigurations"][0].pop("RuleEvaluatorImage"),
         "ProfilerRuleConfigurations[0].RuleEvaluatorImage", "is required"),
    ],
)
def test_each_problem_is_reported_with_its_path(mutate, path, problem):
    import copy

    request = copy.deepcopy(VALID)
    mutate(request)
    problems = request_problems(request)
    assert any(p == path and problem in text for p, text in problems), problems


def test_unresolved_tokens_are_skipped():
    request = {**VALID, "RoleArn": "${Token[TOKEN.42]}"}
    assert request_problems(request) == []


def test_validate_request_lists_every_problem():
    with pytest.raises(RequestValidationError) as caught:
        validate_request({**VALID, "TrainingJobName": "bad_name", "RoleArn": "role"}, where="Stack/Job")
    message = str(caught.value)
    assert message.startswith("Stack/Job: the CreateTrainingJob request is not valid")
    assert "3 problem(s)" in message and "- RoleArn:" in message
