"""ProfiledTrainingJob and ProfilerRuleSet on SageMaker Debugger (RuleEngine.DEBUGGER): fine-grained template assertions
per behaviour, and bad-input messages. The default engine is tested in test_training_job_evaluator.py."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Annotations, Match, Template
from helpers import make_stack, role_policy_statements, task_parameters

from cdk_sagemaker_debugger import (
    InputChannel,
    ProfiledTrainingJob,
    ProfilerConfig,
    ProfilerRuleSet,
    RuleEngine,
    rules,
)
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError, UnsupportedRegionError
from cdk_sagemaker_debugger.model.profiler_config import FrameworkProfile

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"


def contract(stack: cdk.Stack, **job_kwargs: Any) -> ProfiledTrainingJob:
    rule_set = ProfilerRuleSet(stack, "Rules", rules=[
        rules.ProfilerReport(CPUBottleneck_threshold=90),
        rules.LowGPUUtilization(threshold_p95=80),
        rules.StepOutlier(stddev=5),
    ])
    kwargs = dict(job_name_prefix="resnet", training_image=IMAGE, instance_type="ml.g5.2xlarge", instance_count=1,
                  rule_set=rule_set, rule_engine=RuleEngine.DEBUGGER)
    kwargs.update(job_kwargs)
    return ProfiledTrainingJob(stack, "Job", **kwargs)


@pytest.fixture(scope="module")
def agnostic() -> cdk.Stack:
    stack = make_stack(None)
    contract(stack)
    return stack


@pytest.fixture(scope="module")
def us_east_1() -> cdk.Stack:
    stack = make_stack("us-east-1")
    contract(stack)
    return stack


class TestStateMachine:
    def test_task_uses_the_sync_integration_and_names_each_job(self, agnostic):
        template = Template.from_stack(agnostic).to_json()
        machine = next(r for r in template["Resources"].values() if r["Type"] == "AWS::StepFunctions::StateMachine")
        text = json.dumps(machine["Properties"]["DefinitionString"])
        assert ":states:::sagemaker:createTrainingJob.sync" in text
        params = task_parameters(agnostic)
        # the run is named once, by a Pass state, and the job (and its Debugger rules) read the name from there
        assert params["TrainingJobName.$"] == "$.trainingRun.TrainingJobName"
        uuid_group = "States.ArrayGetItem(States.StringSplit(States.UUID(), '-'), {})"
        states = json.loads("".join(p if isinstance(p, str) else "x" for p in machine["Properties"]["DefinitionString"]["Fn::Join"][1]))
        assert states["StartAt"] == "NameTrainingJob" and list(states["States"]) == ["NameTrainingJob", "CreateTrainingJob"]
        naming = states["States"]["NameTrainingJob"]
        assert (naming["Type"], naming["ResultPath"], naming["Next"]) == ("Pass", "$.trainingRun", "CreateTrainingJob")
        assert naming["Parameters"] == {"TrainingJobName.$": (
            f"States.Format('resnet-{{}}{{}}', {uuid_group.format(0)}, {uuid_group.format(4)})"
        )}

    def test_request_carries_profiler_config_and_rules(self, us_east_1):
        params = task_parameters(us_east_1)
        assert params["AlgorithmSpecification"] == {"TrainingImage": IMAGE, "TrainingInputMode": "File"}
        assert params["ResourceConfig"] == {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30}
        assert params["StoppingCondition"] == {"MaxRuntimeInSeconds": 86400}
        assert params["ProfilerConfig"]["DisableProfiler"] is False
        assert params["ProfilerConfig"]["S3OutputPath"] == params["OutputDataConfig"]["S3OutputPath"]
        image = "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"
        assert params["ProfilerRuleConfigurations"] == [
            {"RuleConfigurationName": "ProfilerReport", "RuleEvaluatorImage": image,
             "RuleParameters": {"CPUBottleneck_threshold": "90", "rule_to_invoke": "ProfilerReport"}},
            {"RuleConfigurationName": "LowGPUUtilization", "RuleEvaluatorImage": image,
             "RuleParameters": {"threshold_p95": "80", "threshold_p5": "10", "window": "500", "patience": "1000",
                                "scan_interval_us": "60000000", "rule_to_invoke": "LowGPUUtilization"}},
            {"RuleConfigurationName": "StepOutlier", "RuleEvaluatorImage": image,
             "RuleParameters": {"stddev": "5", "mode": "None", "n_outliers": "10", "scan_interval_us": "60000000",
                                "rule_to_invoke": "StepOutlier"}},
        ]

    def test_environment_agnostic_stack_looks_the_image_up_by_region(self, agnostic):
        template = Template.from_stack(agnostic)
        mapping = template.to_json()["Mappings"]["CdkSageMakerDebuggerRuleImageAccounts"]
        assert mapping["us-west-2"] == {"builtin": "895741380848", "custom": "759209512951"}
        assert mapping["ap-northeast-3"] == {"builtin": "479947661362"}
        assert len(mapping) == 24
        params = task_parameters(agnostic)
        image = params["ProfilerRuleConfigurations"][0]["RuleEvaluatorImage"]
        assert image == (
            "<FindInMap CdkSageMakerDebuggerRuleImageAccounts/<Ref AWS::Region>/builtin>.dkr.ecr.<Ref AWS::Region>."
            "<Ref AWS::URLSuffix>/sagemaker-debugger-rules:latest"
        )
        rule = template.to_json()["Rules"]["CdkSageMakerDebuggerRuleImageRegionsBuiltin"]
        assertion = rule["Assertions"][0]
        assert "us-west-2" in assertion["Assert"]["Fn::Contains"][0]
        assert "Supported:" in assertion["AssertDescription"]

    def test_china_uses_the_china_dns_suffix(self):
        stack = make_stack("cn-north-1")
        contract(stack)
        image = task_parameters(stack)["ProfilerRuleConfigurations"][0]["RuleEvaluatorImage"]
        assert image == "618459771430.dkr.ecr.cn-north-1.amazonaws.com.cn/sagemaker-debugger-rules:latest"

    def test_logging_and_tracing(self, agnostic):
        Template.from_stack(agnostic).has_resource_properties("AWS::StepFunctions::StateMachine", {
            "TracingConfiguration": {"Enabled": True},
            "LoggingConfiguration": Match.object_like({"Level": "ALL", "IncludeExecutionData": False}),
        })


class TestIam:
    def statements(self, stack: cdk.Stack, role_id_fragment: str) -> list[dict[str, Any]]:
        return role_policy_statements(stack, role_id_fragment)

    def test_state_machine_role_is_scoped_to_the_prefix(self, us_east_1):
        statements = self.statements(us_east_1, "StateMachineRole")
        sagemaker = next(s for s in statements if "sagemaker:CreateTrainingJob" in s["Action"])
        assert sorted(sagemaker["Action"]) == sorted([
            "sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob",
            "sagemaker:AddTags", "sagemaker:ListTags"])
        assert ':training-job/resnet-*"' in json.dumps(sagemaker["Resource"])
        pass_role = next(s for s in statements if s["Action"] == "iam:PassRole")
        assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
        (execution_role,) = [i for i, r in Template.from_stack(us_east_1).to_json()["Resources"].items()
                             if r["Type"] == "AWS::IAM::Role" and i.startswith("JobExecutionRole")]
        assert pass_role["Resource"] == {"Fn::GetAtt": [execution_role, "Arn"]}
        events = next(s for s in statements if "events:PutRule" in s["Action"])
        assert "rule/StepFunctionsGetEventsForSageMakerTrainingJobsRule" in json.dumps(events["Resource"])
        assert not any(s["Action"] == "iam:PassRole" and s.get("Resource") == "*" for s in statements)

    def test_execution_role_is_least_privilege(self, us_east_1):
        Template.from_stack(us_east_1).has_resource_properties("AWS::IAM::Role", {
            "AssumeRolePolicyDocument": Match.object_like({
                "Statement": [Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]}),
        })
        statements = self.statements(us_east_1, "ExecutionRole")
        actions = {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
        assert {"s3:PutObject", "s3:GetObject", "s3:ListBucket"} <= actions
        assert not any(action.endswith("*") for action in actions), "no wildcard actions"
        allowed = {a for s in statements if s["Effect"] == "Allow"
                   for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
        assert not any(action.startswith("s3:Delete") for action in allowed)
        assert "iam:PassRole" not in actions
        ecr = next(s for s in statements if "ecr:BatchGetImage" in s["Action"])
        resources = json.dumps(ecr["Resource"])
        assert "763104351884:repository/pytorch-training" in resources
        assert "503895931360:repository/sagemaker-debugger-rules" in resources
        metrics = next(s for s in statements if s["Action"] == "cloudwatch:PutMetricData")
        assert metrics["Condition"] == {"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*"]}}
        writes = next(s for s in statements if "s3:PutObject" in s["Action"])
        assert json.dumps(writes["Resource"]).endswith('/training/resnet-*"]]}')  # its own runs, no other job's

    def test_given_role_is_used_unchanged(self):
        stack = make_stack("us-east-1")
        role = iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::123456789012:role/Existing")
        job = contract(stack, role=role)
        assert job.role is role
        assert task_parameters(stack)["RoleArn"] == "arn:aws:iam::123456789012:role/Existing"
        Template.from_stack(stack).resource_count_is("AWS::IAM::Role", 1)  # only the state machine's

    def test_grant_start_execution(self, us_east_1):
        stack = make_stack("us-east-1")
        job = contract(stack)
        user = iam.User(stack, "User")
        grant = job.grant_start_execution(user)
        assert isinstance(grant, iam.Grant)
        Template.from_stack(stack).has_resource_properties("AWS::IAM::Policy", {
            "PolicyDocument": {"Statement": [Match.object_like({"Action": "states:StartExecution"})]},
            "Users": [Match.any_value()],
        })


class TestOutputBucket:
    def test_default_bucket_is_encrypted_ssl_only_and_private(self, agnostic):
        template = Template.from_stack(agnostic)
        template.has_resource_properties("AWS::S3::Bucket", {
            "BucketEncryption": {"ServerSideEncryptionConfiguration": [
                Match.object_like({"ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms"}})]},
            "PublicAccessBlockConfiguration": {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                               "IgnorePublicAcls": True, "RestrictPublicBuckets": True},
        })
        policy = json.dumps(template.find_resources("AWS::S3::BucketPolicy"))
        assert '"aws:SecureTransport": "false"' in policy

    def test_given_bucket_and_prefix(self):
        stack = make_stack("us-east-1")
        bucket = s3.Bucket(stack, "Mine")
        job = contract(stack, output_bucket=bucket, output_prefix="ml/runs/")
        assert job.output_bucket is bucket
        params = task_parameters(stack)
        assert params["OutputDataConfig"]["S3OutputPath"].endswith("/ml/runs")
        Template.from_stack(stack).resource_count_is("AWS::S3::Bucket", 1)


class TestRequestOptions:
    def test_full_request(self):
        stack = make_stack("us-east-1")
        data = s3.Bucket(stack, "Data")
        key = kms.Key(stack, "Key", enable_key_rotation=True)
        vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=1)
        contract(
            stack,
            inputs=[InputChannel.from_bucket("train", data, "datasets/train/", content_type="application/x-image"),
                    InputChannel.from_s3_uri("val", "s3://public-data/val/")],
            hyperparameters={"epochs": 10, "lr": 0.01, "optimizer": "adam"},
            environment={"NCCL_DEBUG": "INFO"},
            tags={"team": "vision"},
            use_spot_instances=True,
            max_runtime=cdk.Duration.hours(4),
            max_wait=cdk.Duration.hours(8),
            checkpoint_s3_uri="s3://ckpt-bucket/resnet",
            checkpoint_local_path="/opt/ml/checkpoints",
            vpc=vpc,
            instance_type="ml.p3.16xlarge",  # EBS volumes only: SageMaker refuses VolumeKmsKeyId on instance storage
            volume_kms_key=key,
            output_kms_key=key,
            enable_network_isolation=True,
            encrypt_inter_container_traffic=True,
            profiler=ProfilerConfig(profiling_interval_millis=100),
        )
        params = task_parameters(stack)
        assert params["HyperParameters"] == {"epochs": "10", "lr": "0.01", "optimizer": "adam"}
        assert params["Environment"] == {"NCCL_DEBUG": "INFO"}
        assert params["Tags"] == [{"Key": "team", "Value": "vision"}]
        assert params["EnableManagedSpotTraining"] is True
        assert params["StoppingCondition"] == {"MaxRuntimeInSeconds": 14400, "MaxWaitTimeInSeconds": 28800}
        assert params["CheckpointConfig"] == {"S3Uri": "s3://ckpt-bucket/resnet", "LocalPath": "/opt/ml/checkpoints"}
        assert params["EnableNetworkIsolation"] is True and params["EnableInterContainerTrafficEncryption"] is True
        assert params["ProfilerConfig"]["ProfilingIntervalInMilliseconds"] == 100
        assert [c["ChannelName"] for c in params["InputDataConfig"]] == ["train", "val"]
        assert params["InputDataConfig"][0]["ContentType"] == "application/x-image"
        assert params["InputDataConfig"][1]["DataSource"]["S3DataSource"]["S3Uri"] == "s3://public-data/val/"
        assert len(params["VpcConfig"]["Subnets"]) == 2 and len(params["VpcConfig"]["SecurityGroupIds"]) == 1
        assert "VolumeKmsKeyId" in params["ResourceConfig"] and "KmsKeyId" in params["OutputDataConfig"]
        policies = json.dumps(role_policy_statements(stack, "JobExecutionRole"))
        assert "arn:aws:s3:::public-data/val/*" in policies
        assert "ckpt-bucket/resnet/*" in policies and "ec2:CreateNetworkInterface" in policies

    def test_algorithm_name_instead_of_image(self):
        stack = make_stack("us-east-1")
        ProfiledTrainingJob(stack, "Job", rule_engine=RuleEngine.DEBUGGER, job_name_prefix="algo", algorithm_name="my-algorithm")
        params = task_parameters(stack)
        assert params["AlgorithmSpecification"] == {"AlgorithmName": "my-algorithm", "TrainingInputMode": "File"}
        assert "ProfilerRuleConfigurations" not in params
        assert params["ProfilerConfig"]["DisableProfiler"] is False

    def test_disabled_profiler_without_rules(self):
        stack = make_stack("us-east-1")
        ProfiledTrainingJob(stack, "Job", rule_engine=RuleEngine.DEBUGGER, job_name_prefix="plain", training_image=IMAGE,
                            profiler=ProfilerConfig(disable_profiler=True))
        assert task_parameters(stack)["ProfilerConfig"] == {"DisableProfiler": True}

    def test_rules_added_after_the_job_are_rendered(self):
        stack = make_stack("us-east-1")
        rule_set = ProfilerRuleSet(stack, "Rules")
        ProfiledTrainingJob(stack, "Job", rule_engine=RuleEngine.DEBUGGER, job_name_prefix="late", training_image=IMAGE, rule_set=rule_set)
        rule_set.add_rule(rules.BatchSize())
        assert [r["RuleConfigurationName"] for r in task_parameters(stack)["ProfilerRuleConfigurations"]] == ["BatchSize"]

    def test_run_on_deploy_starts_one_execution(self):
        stack = make_stack("us-east-1")
        job = contract(stack, run_on_deploy=True)
        template = Template.from_stack(stack)
        (resource,) = template.find_resources("Custom::StartTrainingRun").values()
        properties = resource["Properties"]
        for phase in ("Create", "Update"):
            call = json.dumps(properties[phase])
            assert '\\"action\\":\\"startExecution\\"' in call and "StateMachine" in call
        assert len(properties["RequestHash"]) == 16
        policy = json.dumps(template.find_resources("AWS::IAM::Policy"))
        assert '"Action": "states:StartExecution"' in policy
        assert job.deploy_trigger is not None

    def test_framework_profiling_on_pytorch_2_warns(self):
        stack = make_stack("us-east-1")
        contract(stack, profiler=ProfilerConfig(framework_profile=FrameworkProfile()))
        warnings = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("Framework profiling is deprecated"))
        assert len(warnings) == 1
        assert "ProfilingParameters" in task_parameters(stack)["ProfilerConfig"]

    def test_framework_profiling_on_pytorch_1_does_not_warn(self):
        stack = make_stack("us-east-1")
        contract(stack, training_image=IMAGE.replace("2.3.0-gpu-py311", "1.13.1-gpu-py39"),
                 profiler=ProfilerConfig(framework_profile=FrameworkProfile()))
        assert Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("Framework profiling")) == []


class TestMetrics:
    def test_metric_for_one_job_has_the_host_dimension(self):
        stack = make_stack("us-east-1")
        job = contract(stack)
        metric = job.metric_gpu_utilization(job_name="resnet-abc", host="algo-2")
        resolved = stack.resolve(metric.to_metric_config().metric_stat.dimensions)
        assert metric.namespace == "/aws/sagemaker/TrainingJobs"
        assert metric.metric_name == "GPUUtilization"
        assert resolved == [{"name": "Host", "value": "resnet-abc/algo-2"}]

    def test_metric_for_the_prefix_is_a_search_expression(self):
        stack = make_stack("us-east-1")
        job = contract(stack)
        search = job.metric_cpu_utilization()
        assert isinstance(search, cloudwatch.SearchExpression)
        expression = search.expression
        assert expression.startswith("SEARCH('{/aws/sagemaker/TrainingJobs,Host} MetricName=\"CPUUtilization\"")
        # unquoted: a partial match on the Host values "<prefix>-<suffix>/algo-<n>" (quoted would be an exact match)
        assert " Host=resnet'" in expression and 'Host="' not in expression
        for name in ("metric_gpu_memory_utilization", "metric_memory_utilization", "metric_disk_utilization"):
            assert getattr(job, name)(job_name="resnet-x").namespace == "/aws/sagemaker/TrainingJobs"


class TestBadInput:
    @pytest.mark.parametrize(
        ("kwargs", "error", "message"),
        [
            ({"job_name_prefix": "my_job"}, ConfigurationError, r"Training/Job: job_name_prefix: 'my_job' is not a valid"),
            ({"job_name_prefix": "x" * 50}, ConfigurationError, r"job_name_prefix: .* is 50 characters; at most 42 fit"),
            ({"training_image": None}, ConfigurationError, r"give exactly one of training_image= .* or algorithm_name="),
            ({"algorithm_name": "a"}, ConfigurationError, r"give exactly one of"),
            ({"training_input_mode": "Stream"}, ConfigurationError, r"training_input_mode: must be one of File, Pipe, FastFile"),
            ({"instance_type": "ml.g5.2xl"}, ConfigurationError, r"instance_type: 'ml.g5.2xl' is not a SageMaker training instance type"),
            ({"instance_count": 0}, ConfigurationError, r"instance_count: must be at least 1"),
            ({"profiler": {"DisableProfiler": True}}, ConfigurationTypeError, r"profiler: expected a ProfilerConfig, got dict"),
            ({"rule_set": [rules.BatchSize()]}, ConfigurationTypeError, r"rule_set: expected a ProfilerRuleSet, got list"),
            ({"max_wait": cdk.Duration.hours(1)}, ConfigurationError, r"max_wait only applies to managed spot training"),
            ({"checkpoint_local_path": "/opt/ml/checkpoints"}, ConfigurationError, r"checkpoint_local_path needs checkpoint_s3_uri"),
            ({"hyperparameters": {"flag": True}}, ConfigurationTypeError, r"hyperparameters.flag: value of 'flag' is the boolean True"),
            ({"profiler": ProfilerConfig(disable_profiler=True)}, ConfigurationError,
             r"profiler rules \['ProfilerReport', 'LowGPUUtilization', 'StepOutlier'\] need the profiler"),
        ],
    )
    def test_job_props(self, kwargs, error, message):
        stack = make_stack("us-east-1")
        with pytest.raises(error, match=message):
            contract(stack, **kwargs)

    def test_more_than_20_rules(self):
        stack = make_stack("us-east-1")
        rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.BatchSize(name=f"b{i}") for i in range(20)])
        with pytest.raises(ConfigurationError, match=r"Training/Rules: rules: cannot add rule 'b20': a training job takes at most 20"):
            rule_set.add_rule(rules.BatchSize(name="b20"))

    def test_duplicate_rule_names(self):
        stack = make_stack("us-east-1")
        with pytest.raises(ConfigurationError, match=r"RuleConfigurationName 'BatchSize' is already used .* Pass name='BatchSize2'"):
            ProfilerRuleSet(stack, "Rules", rules=[rules.BatchSize(), rules.BatchSize(patience=5)])

    def test_non_rule_in_rule_set(self):
        stack = make_stack("us-east-1")
        with pytest.raises(ConfigurationTypeError, match=r"expected a profiler rule from cdk_sagemaker_debugger.rules, got str"):
            ProfilerRuleSet(stack, "Rules", rules=["BatchSize"])  # type: ignore[list-item]

    def debugger_job(self, stack: cdk.Stack, rule_set: ProfilerRuleSet) -> ProfiledTrainingJob:
        return ProfiledTrainingJob(stack, "Job", rule_engine=RuleEngine.DEBUGGER, job_name_prefix="j",
                                   training_image=IMAGE, rule_set=rule_set)

    def test_region_without_image_fails_with_the_supported_list(self):
        stack = make_stack("il-central-1")
        rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.BatchSize()])  # the default engine needs no image
        with pytest.raises(UnsupportedRegionError, match=r"Training/Rules: region: no built-in rule image .* Supported regions: af-south-1"):
            self.debugger_job(stack, rule_set)

    def test_region_without_debugger_fails_with_the_explanation(self):
        stack = make_stack("eu-central-2")
        rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.LowGPUUtilization()])
        with pytest.raises(UnsupportedRegionError, match=r"SageMaker Debugger and the profiler are not available in region 'eu-central-2'"):
            self.debugger_job(stack, rule_set)

    def test_custom_rule_without_custom_image_in_region(self):
        stack = make_stack("ap-northeast-3")
        custom = rules.ProfilerRule.custom(name="C", rule_to_invoke="R", source="s3://b/r.py",
                                           instance_type="ml.m5.xlarge", volume_size_in_gb=30)
        rule_set = ProfilerRuleSet(stack, "Rules")
        self.debugger_job(stack, rule_set)
        with pytest.raises(UnsupportedRegionError, match=r"no custom rule image is published for region 'ap-northeast-3'"):
            rule_set.add_rule(custom)
        assert rule_set.rules == ()  # the rule that cannot run was not added

    def test_disabling_the_profiler_after_adding_rules_later_fails_synth(self):
        stack = make_stack("us-east-1")
        rule_set = ProfilerRuleSet(stack, "Rules")
        ProfiledTrainingJob(stack, "Job", rule_engine=RuleEngine.DEBUGGER, job_name_prefix="late", training_image=IMAGE, rule_set=rule_set,
                            profiler=ProfilerConfig(disable_profiler=True))
        rule_set.add_rule(rules.BatchSize())
        with pytest.raises(RuntimeError, match=r"profiler rules \['BatchSize'\] need the profiler"):
            Template.from_stack(stack)

    def test_request_is_validated_against_the_api_model_at_synth(self):
        stack = make_stack("us-east-1")
        contract(stack, environment={"BAD KEY": "x"})
        with pytest.raises(RuntimeError, match=r"\[Training\] Training/Job: the CreateTrainingJob request is not valid .*\n  - Environment key 'BAD KEY': 'BAD KEY' does not match the pattern"):
            Template.from_stack(stack)


def test_rules_added_after_the_job_get_their_permissions():
    stack = make_stack("us-east-1")
    rule_set = ProfilerRuleSet(stack, "Rules")
    ProfiledTrainingJob(stack, "Job", rule_engine=RuleEngine.DEBUGGER, job_name_prefix="late", training_image=IMAGE, rule_set=rule_set)
    rule_set.add_rule(rules.ProfilerRule.custom(name="Own", rule_to_invoke="R", source="s3://b/r.py",
                                                instance_type="ml.m5.xlarge", volume_size_in_gb=10))
    policies = json.dumps(Template.from_stack(stack).find_resources("AWS::IAM::Policy"))
    assert "864354269164:repository/sagemaker-debugger-rule-evaluator" in policies
    assert "503895931360:repository/sagemaker-debugger-rules" not in policies  # no built-in rule, no pull
