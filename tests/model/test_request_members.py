"""Every CreateTrainingJob member is reachable: a typed prop or request_overrides; the props render and check."""

from __future__ import annotations

import inspect

import pytest

from cdk_sagemaker_debugger.model import request_members as rm
from cdk_sagemaker_debugger.model.api_model import sagemaker_model
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError
from cdk_sagemaker_debugger.model.training_request import REQUEST_KEY_ORDER, assemble_request

WHERE = "Stack/Job"


def _botocore_member_paths() -> list[str]:
    """CreateTrainingJobRequest's members; the structures the construct renders in part, member by member."""
    shape = sagemaker_model().operation_model("CreateTrainingJob").input_shape
    paths = []
    for name, member in shape.members.items():
        if name in rm.EXPANDED_MEMBERS:
            paths += [f"{name}.{sub}" for sub in member.members]
        else:
            paths.append(name)
    return paths


def _construct_props() -> set[str]:
    from cdk_sagemaker_debugger.constructs.training_job import ProfiledTrainingJob

    return set(inspect.signature(ProfiledTrainingJob.__init__).parameters)


def test_every_member_of_the_pinned_model_is_a_prop_or_an_override():
    """A new botocore member fails here until MEMBER_PROPS names its prop, or None for request_overrides."""
    missing = [path for path in _botocore_member_paths() if path not in rm.MEMBER_PROPS]
    assert missing == [], f"CreateTrainingJob members neither a prop nor allowed through request_overrides: {missing}"


def test_the_table_names_only_members_and_real_props():
    paths = set(_botocore_member_paths())
    assert sorted(set(rm.MEMBER_PROPS) - paths) == []
    props = _construct_props()
    assert sorted({p for p in rm.MEMBER_PROPS.values() if p} - props) == []


def test_members_without_a_prop_go_through_request_overrides():
    for path, prop in rm.MEMBER_PROPS.items():
        top, _, sub = path.partition(".")
        overrides = {top: {sub: None}} if sub else {top: None}
        if prop is None:
            assert rm.check_overrides(overrides) == overrides
        else:
            with pytest.raises(ConfigurationError, match=rf"{path} \(use {prop}="):
                rm.check_overrides(overrides, where=WHERE)


def test_request_key_order_holds_every_top_level_member():
    shape = sagemaker_model().operation_model("CreateTrainingJob").input_shape
    assert set(REQUEST_KEY_ORDER) == set(shape.members)


def test_props_render_where_the_api_expects_them():
    members = rm.request_members(
        metric_definitions={"train:loss": r"loss=([0-9.]+)"}, enable_sagemaker_metrics_time_series=True,
        retry_attempts=2, keep_alive_seconds=600.0, infra_check=True, remote_debug=False,
        container_entrypoint=["python", "train.py"], container_arguments=["--epochs", "3"],
        training_image_config=rm.TrainingImageConfig("Vpc", "arn:aws:lambda:us-east-1:123456789012:function:creds"),
        experiment_config=rm.ExperimentConfig(experiment_name="resnet", run_name="r1"),
        mlflow=rm.MlflowConfig("arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/ml"),
        session_tag_chaining=True,
    )
    request = assemble_request(members.apply({
        "TrainingJobName": "resnet-1", "RoleArn": "arn:aws:iam::123456789012:role/r",
        "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": "s3://b/p"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
    }))
    assert list(request["AlgorithmSpecification"]) == [
        "TrainingImage", "TrainingInputMode", "TrainingImageConfig", "ContainerEntrypoint", "ContainerArguments",
        "MetricDefinitions", "EnableSageMakerMetricsTimeSeries"]
    assert request["AlgorithmSpecification"]["MetricDefinitions"] == [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}]
    assert request["AlgorithmSpecification"]["TrainingImageConfig"] == {
        "TrainingRepositoryAccessMode": "Vpc",
        "TrainingRepositoryAuthConfig": {
            "TrainingRepositoryCredentialsProviderArn": "arn:aws:lambda:us-east-1:123456789012:function:creds"}}
    assert request["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 600
    assert request["RetryStrategy"] == {"MaximumRetryAttempts": 2}
    assert request["InfraCheckConfig"] == {"EnableInfraCheck": True}
    assert request["RemoteDebugConfig"] == {"EnableRemoteDebug": False}
    assert request["SessionChainingConfig"] == {"EnableSessionTagChaining": True}
    assert request["ExperimentConfig"] == {"ExperimentName": "resnet", "RunName": "r1"}
    assert list(request) == ["TrainingJobName", "AlgorithmSpecification", "RoleArn", "InfraCheckConfig",
                             "OutputDataConfig", "ResourceConfig", "ExperimentConfig", "RemoteDebugConfig",
                             "SessionChainingConfig", "RetryStrategy", "MlflowConfig"]


def test_instance_groups_replace_type_and_count():
    groups = [rm.InstanceGroup("data", "ml.c5.18xlarge", 2), rm.InstanceGroup("gpu", "ml.p4d.24xlarge")]
    members = rm.request_members(instance_groups=groups)
    resource = members.apply({"AlgorithmSpecification": {}, "ResourceConfig": {
        "InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30}})["ResourceConfig"]
    assert resource == {"VolumeSizeInGB": 30, "InstanceGroups": [
        {"InstanceGroupName": "data", "InstanceType": "ml.c5.18xlarge", "InstanceCount": 2},
        {"InstanceGroupName": "gpu", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1}]}


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"instance_groups": [rm.InstanceGroup("a", "ml.m5.large")], "instance_type": "ml.g5.xlarge"},
         ConfigurationError, r"Stack/Job: instance_groups: .*instance_type \('ml.g5.xlarge'\).*remove them"),
        ({"instance_groups": [rm.InstanceGroup("a", "ml.m5.large")], "instance_count": 2},
         ConfigurationError, r"instance_groups: .*instance_count \(2\)"),
        ({"instance_groups": [rm.InstanceGroup("a", "ml.m5.large")], "keep_alive_seconds": 60.0},
         ConfigurationError, r"keep_alive: warm pools .* heterogeneous clusters"),
        ({"instance_groups": [rm.InstanceGroup("a", "ml.m5.large"), rm.InstanceGroup("a", "ml.c5.xlarge")]},
         ConfigurationError, r"names must be unique; repeated: a"),
        ({"instance_groups": [rm.InstanceGroup("a", "ml.bogus")]},
         ConfigurationError, r"instance_groups: not valid for the SageMaker API: ResourceConfig.InstanceGroups\[0\]"
                             r".InstanceType: 'ml.bogus' is not one of"),
        ({"instance_groups": []}, ConfigurationTypeError, r"non-empty list of InstanceGroup"),
        ({"retry_attempts": 31}, ConfigurationError, r"retry_attempts: .*MaximumRetryAttempts: 31 is above the maximum 30"),
        ({"retry_attempts": "2"}, ConfigurationError, r"retry_attempts: .*expected an integer, got str '2'"),
        ({"keep_alive_seconds": 1.5}, ConfigurationError, r"keep_alive: must be whole seconds, got 1.5 s"),
        ({"keep_alive_seconds": 99999.0}, ConfigurationError, r"keep_alive: .*99999 is above the maximum"),
        ({"metric_definitions": {"loss": "loss=.*"}}, ConfigurationError,
         r"metric_definitions\['loss'\]: the regex 'loss=\.\*' has no capturing group"),
        ({"metric_definitions": {"loss": "loss=([0-9"}}, ConfigurationError, r"regex 'loss=\(\[0-9' does not compile"),
        ({"metric_definitions": {f"m{i}": "v=(.*)" for i in range(41)}}, ConfigurationError,
         r"metric_definitions: .*MetricDefinitions: has 41 items, more than the maximum 40"),
        ({"metric_definitions": {"": "v=(.*)"}}, ConfigurationError, r"metric_definitions: .*Name: has 0 characters"),
        ({"metric_definitions": [("loss", "x")]}, ConfigurationTypeError, r"expected a mapping of metric name -> regex"),
        ({"container_entrypoint": "python train.py"}, ConfigurationTypeError,
         r"container_entrypoint: expected a list of strings, e.g. \['python', 'train.py'\]"),
        ({"training_image_config": {"TrainingRepositoryAccessMode": "Vpc"}}, ConfigurationTypeError,
         r"training_image_config: expected a TrainingImageConfig, got dict. Build it with TrainingImageConfig"),
        ({"training_image_config": rm.TrainingImageConfig("Private")}, ConfigurationError,
         r"training_image_config: .*TrainingRepositoryAccessMode: 'Private' is not one of"),
        ({"experiment_config": rm.ExperimentConfig(experiment_name="my_exp")}, ConfigurationError,
         r"experiment_config: .*ExperimentName: 'my_exp' does not match"),
        ({"mlflow": rm.MlflowConfig("not-an-arn")}, ConfigurationError, r"mlflow: .*MlflowResourceArn"),
    ],
)
def test_bad_props_name_where_field_value_and_fix(kwargs, error, message):
    with pytest.raises(error, match=message):
        rm.request_members(where=WHERE, **kwargs)


def test_overrides_deep_merge_into_the_rendered_structures():
    members = rm.request_members(request_overrides={
        "ResourceConfig": {"TrainingPlanArn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p-1234567890"},
        "StoppingCondition": {"MaxPendingTimeInSeconds": 7200},
        "OutputDataConfig": {"CompressionType": "NONE"},
    })
    request = members.apply({"AlgorithmSpecification": {"TrainingInputMode": "File"},
                             "OutputDataConfig": {"S3OutputPath": "s3://b/p"},
                             "ResourceConfig": {"InstanceType": "ml.m5.xlarge"},
                             "StoppingCondition": {"MaxRuntimeInSeconds": 60}})
    assert request["ResourceConfig"] == {
        "InstanceType": "ml.m5.xlarge",
        "TrainingPlanArn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p-1234567890"}
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 60, "MaxPendingTimeInSeconds": 7200}
    assert request["OutputDataConfig"] == {"S3OutputPath": "s3://b/p", "CompressionType": "NONE"}


def test_overrides_are_copied():
    overrides = {"ModelPackageConfig": {"ModelPackageGroupArn": "arn"}}
    checked = rm.check_overrides(overrides)
    overrides["ModelPackageConfig"]["ModelPackageGroupArn"] = "changed"
    assert checked == {"ModelPackageConfig": {"ModelPackageGroupArn": "arn"}}


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"TrainingJobName": "x"}, ConfigurationError,
         r"Stack/Job: request_overrides: .*TrainingJobName \(use job_name_prefix=; each run is named"),
        ({"InputDataConfig": []}, ConfigurationError, r"InputDataConfig \(use inputs=; .*sampler's channel"),
        ({"Environment": {"A": "1"}}, ConfigurationError, r"Environment \(use environment=; the sampler's variables"),
        ({"ProfilerConfig": {}, "DebugHookConfig": {}}, ConfigurationError,
         r"ProfilerConfig \(use profiler=.*DebugHookConfig \(use debug_hook="),
        ({"RetryStrategy": {"MaximumRetryAttempts": 3}}, ConfigurationError, r"RetryStrategy \(use retry_attempts=\)"),
        ({"AlgorithmSpecification": {"MetricDefinitions": []}}, ConfigurationError,
         r"AlgorithmSpecification.MetricDefinitions \(use metric_definitions=\)"),
        ({"ResourceConfig": {"TrainingPlan": "x"}}, ConfigurationError,
         r"not members of CreateTrainingJob: 'ResourceConfig.TrainingPlan' Did you mean 'TrainingPlanArn'\?"),
        ({"RetryStrategie": {}}, ConfigurationError, r"'RetryStrategie' Did you mean 'RetryStrategy'\?"),
        ({"ResourceConfig": "big"}, ConfigurationTypeError, r"request_overrides.ResourceConfig: .*give a mapping"),
        (["ResourceConfig"], ConfigurationTypeError, r"expected a mapping of CreateTrainingJob members, got list"),
    ],
)
def test_overrides_refuse_owned_and_unknown_members(overrides, error, message):
    with pytest.raises(error, match=message):
        rm.check_overrides(overrides, where=WHERE)


def test_overrides_go_through_the_botocore_check():
    with pytest.raises(ConfigurationError, match=r"request_overrides: .*StoppingCondition.MaxPendingTimeInSeconds: 60 "
                                                 r"is below the minimum"):
        rm.request_members(where=WHERE, request_overrides={"StoppingCondition": {"MaxPendingTimeInSeconds": 60}})


def test_tokens_are_not_checked():
    token = "${Token[TOKEN.12]}"
    members = rm.request_members(mlflow=rm.MlflowConfig(token), metric_definitions={"loss": token},
                                 request_overrides={"ResourceConfig": {"TrainingPlanArn": token}})
    assert members.top["MlflowConfig"] == {"MlflowResourceArn": token}
