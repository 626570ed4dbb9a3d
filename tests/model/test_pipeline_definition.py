"""SageMaker Pipelines Training steps and definitions built from a CreateTrainingJob request."""

from __future__ import annotations

import pytest

from cdk_sagemaker_debugger.model import pipeline_definition as pd
from cdk_sagemaker_debugger.model.api_model import request_problems
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError, RequestValidationError
from cdk_sagemaker_debugger.model.job_family import check_pipeline_name

REQUEST = {
    "TrainingJobName": "resnet-00000000000000000000",
    "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
    "RoleArn": "arn:aws:iam::123456789012:role/training",
    "OutputDataConfig": {"S3OutputPath": "s3://bucket/training"},
    "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
    "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
}


def test_training_step_drops_the_job_name_and_keeps_the_rest():
    step = pd.training_step("Train", REQUEST, depends_on=["Prepare"], display_name="Train resnet",
                            description="d", cache_expire_after="P30D")
    assert step["Name"] == "Train" and step["Type"] == "Training"
    assert "TrainingJobName" not in step["Arguments"]
    assert step["Arguments"] == {k: v for k, v in REQUEST.items() if k != "TrainingJobName"}
    assert step["DependsOn"] == ["Prepare"]
    assert step["CacheConfig"] == {"Enabled": True, "ExpireAfter": "P30D"}
    assert request_problems({"TrainingJobName": pd.PLACEHOLDER_JOB_NAME, **step["Arguments"]}) == []


def test_experiment_config_is_trimmed_like_the_sdk():
    with_display = {**REQUEST, "ExperimentConfig": {"ExperimentName": "e", "TrialComponentDisplayName": "t"}}
    assert pd.training_step("T", with_display)["Arguments"]["ExperimentConfig"] == {"TrialComponentDisplayName": "t"}
    without = {**REQUEST, "ExperimentConfig": {"ExperimentName": "e"}}
    assert "ExperimentConfig" not in pd.training_step("T", without)["Arguments"]


def test_arguments_must_pass_the_create_training_job_check():
    bad = {**REQUEST, "ResourceConfig": {**REQUEST["ResourceConfig"], "InstanceType": "ml.bogus"}}
    with pytest.raises(RequestValidationError, match=r"(?s)Stack/Job: the Arguments of Training step 'Train' .*"
                                                    r"ResourceConfig.InstanceType: 'ml.bogus' is not one of"):
        pd.training_step("Train", bad, where="Stack/Job")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"name": "Train step"}, ConfigurationError, r"name: 'Train step' must be 0-64 characters matching"),
        ({"name": "x" * 65}, ConfigurationError, r"must be 0-64 characters"),
        ({"name": ""}, ConfigurationError, r"a step needs a name"),
        ({"name": 3}, ConfigurationTypeError, r"name: expected a string, got int 3"),
        ({"name": "T", "depends_on": "Prepare"}, ConfigurationTypeError, r"write depends_on=\['Prepare'\]"),
    ],
)
def test_bad_step_settings(kwargs, error, message):
    name = kwargs.pop("name")
    with pytest.raises(error, match=message):
        pd.training_step(name, REQUEST, where="Stack/Job", **kwargs)


def test_definition_has_the_schema_version_and_steps():
    step = pd.training_step("Train", REQUEST)
    definition = pd.pipeline_definition([step])
    assert definition == {"Version": "2020-12-01", "Metadata": {}, "Parameters": [], "Steps": [step]}


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([], r"expected a non-empty list of steps"),
        ([{"Name": "A"}], r"step 0 is not a pipeline step"),
        ([{"Name": "A", "Type": "Training"}, {"Name": "A", "Type": "Training"}], r"two steps are named 'A'"),
        ([{"Name": "A", "Type": "Training", "DependsOn": ["B"]}], r"step 'A' depends on 'B', which is not a step"),
    ],
)
def test_bad_definitions(steps, message):
    with pytest.raises(ConfigurationError, match=message):
        pd.pipeline_definition(steps, where="Stack/Pipeline")


def test_pipeline_names():
    """One check for a pipeline's own name (a token passes) and a pipeline family's (model/job_family.py)."""
    assert check_pipeline_name("resnet-training", allow_token=True) == "resnet-training"
    assert check_pipeline_name("${Token[TOKEN.1]}", allow_token=True) == "${Token[TOKEN.1]}"
    with pytest.raises(ConfigurationError, match=r"Stack/Pipeline: pipeline_name: must be 1-256 letters, digits and "
                                                 r"hyphens .* got 'resnet_training'"):
        check_pipeline_name("resnet_training", where="Stack/Pipeline", allow_token=True)
    with pytest.raises(ConfigurationTypeError, match="literal string"):
        check_pipeline_name("${Token[TOKEN.1]}")


def test_the_pipeline_name_check_is_botocores_pattern():
    from cdk_sagemaker_debugger.model import job_family
    from cdk_sagemaker_debugger.model.api_model import sagemaker_model

    meta = sagemaker_model().shape_for("PipelineName").metadata
    assert job_family._PIPELINE_NAME.pattern == meta["pattern"] and (meta["min"], meta["max"]) == (1, 256)


def test_one_pipeline_job_name_prefix():
    """Pipelines names each job pipelines-<execution>-<step>-...: one constant says so (model/contract.py)."""
    from cdk_sagemaker_debugger.model import contract

    assert contract.PIPELINE_JOB_NAME_PREFIX == "pipelines-"
    assert not hasattr(pd, "PIPELINE_JOB_NAME_PREFIX") and not hasattr(pd, "check_pipeline_name")
    assert pd.PLACEHOLDER_JOB_NAME.startswith(contract.PIPELINE_JOB_NAME_PREFIX)
