"""ProfiledTrainingJob's default engine (RuleEngine.EVALUATOR): no Debugger member in the request, the sampler as an
input channel, and a RuleEvaluator for the job's rules. The Debugger engine is tested in test_training_job.py."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Annotations, Match, Template
from helpers import make_stack, role_policy_statements, task_parameters

from cdk_sagemaker_debugger import (
    DebugHookConfig,
    InputChannel,
    ProfiledTrainingJob,
    ProfilerConfig,
    ProfilerRuleSet,
    RuleEngine,
    RuleEvaluator,
    Sampler,
    TensorBoardOutputConfig,
    TrainingJobs,
    debugger_rules,
    rules,
)
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
DEBUGGER_MEMBERS = ("ProfilerConfig", "ProfilerRuleConfigurations", "DebugHookConfig", "DebugRuleConfigurations",
                    "TensorBoardOutputConfig")
BUNDLE_DIR = "/opt/ml/input/data/cdk-sagemaker-sampler"


def job(stack: cdk.Stack, rule_set: ProfilerRuleSet | None = None, **kwargs: Any) -> ProfiledTrainingJob:
    props: dict[str, Any] = {"job_name_prefix": "resnet", "training_image": IMAGE, "instance_type": "ml.g5.2xlarge"}
    props.update(kwargs)
    return ProfiledTrainingJob(stack, "Job", rule_set=rule_set, **props)


def contract(stack: cdk.Stack, **kwargs: Any) -> ProfiledTrainingJob:
    """The issue's contract: ProfilerReport and a stricter LowGPUUtilization, nothing else."""
    rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.ProfilerReport(), rules.LowGPUUtilization(threshold_p95=80)])
    return job(stack, rule_set, **kwargs)


def resolved(stack: cdk.Stack, value: Any) -> Any:
    return stack.resolve(value)


def sampler_channel(parameters: dict[str, Any]) -> dict[str, Any]:
    [channel] = [c for c in parameters.get("InputDataConfig", []) if c["ChannelName"] == "cdk-sagemaker-sampler"]
    return channel


def evaluator_environment(stack: cdk.Stack) -> dict[str, Any]:
    functions = Template.from_stack(stack).find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "evaluator.lambda_handler.handler"}})
    [function] = functions.values()
    return function["Properties"]["Environment"]["Variables"]


@pytest.fixture(scope="module")
def contract_stack() -> tuple[cdk.Stack, ProfiledTrainingJob]:
    stack = make_stack()
    return stack, contract(stack)


class TestDefaultEngine:
    def test_request_has_no_debugger_member(self, contract_stack):
        stack, training = contract_stack
        parameters = task_parameters(stack)
        assert [m for m in DEBUGGER_MEMBERS if m in parameters] == []
        assert training.rule_engine is RuleEngine.EVALUATOR
        assert "sagemaker-debugger-rules" not in json.dumps(Template.from_stack(stack).to_json())

    def test_sampler_bundle_is_a_file_mode_channel_on_pythonpath(self, contract_stack):
        stack, training = contract_stack
        parameters = task_parameters(stack)
        channel = sampler_channel(parameters)
        assert channel["InputMode"] == "File"
        source = channel["DataSource"]["S3DataSource"]
        assert source["S3DataType"] == "S3Prefix" and source["S3DataDistributionType"] == "FullyReplicated"
        asset_hash = training.sampler_bundle.asset_hash
        [request_channel] = [c for c in resolved(stack, training.render_request())["InputDataConfig"]]
        assert request_channel["DataSource"]["S3DataSource"]["S3Uri"]["Fn::Sub"].endswith(f"/{asset_hash}.zip")
        environment = parameters["Environment"]
        assert environment["PYTHONPATH"] == f"{BUNDLE_DIR}/{asset_hash}.zip"
        assert environment["CDK_SAGEMAKER_SAMPLER_INTERVAL_MS"] == "500"
        assert environment["CDK_SAGEMAKER_SAMPLER_FRAMEWORK_EVENTS"] == "1"
        assert environment["CDK_SAGEMAKER_SAMPLER_S3_URI"].startswith("s3://<Ref JobOutputBucket")
        assert environment["CDK_SAGEMAKER_SAMPLER_S3_URI"].endswith(">/training")

    def test_execution_role_reads_the_bundle_and_writes_only_profiler_output(self, contract_stack):
        stack, training = contract_stack
        statements = role_policy_statements(stack, "JobExecutionRole")
        bundle_key = resolved(stack, training.sampler_bundle.s3_object_key)
        reads = [s for s in statements if s["Action"] == "s3:GetObject" and bundle_key in json.dumps(s["Resource"])]
        assert len(reads) == 1
        [uploads] = [s for s in statements if s["Action"] == "s3:PutObject"]
        assert json.dumps(uploads["Resource"]).endswith('/training/resnet-*/profiler-output/*"]]}')
        assert not any("ecr:BatchGetImage" in s["Action"] and "sagemaker-debugger-rules" in json.dumps(s)
                       for s in statements)

    def test_job_creates_an_evaluator_for_its_rules_reading_the_sampler_location(self, contract_stack):
        stack, training = contract_stack
        assert isinstance(training.evaluator, RuleEvaluator)
        assert training.evaluator.node.path == "Training/Job/Evaluator"
        variables = evaluator_environment(stack)
        assert json.dumps(variables["JOB_FAMILY"]).endswith('"], \\"job_name_prefix\\": \\"resnet-\\"}"]]}')
        assert variables["SOURCE"] == "AUTO"
        assert [r["configuration_name"] for r in json.loads(variables["RULES"])] == ["ProfilerReport",
                                                                                    "LowGPUUtilization"]
        assert json.loads(variables["RULES"])[1]["parameters"]["threshold_p95"] == 80
        uri = json.dumps(variables["PROFILER_S3_URI"])
        assert "JobOutputBucket" in uri and uri.endswith('/training"]]}')

    def test_no_rules_no_evaluator_but_still_sampled(self):
        stack = make_stack()
        training = job(stack)
        assert training.evaluator is None
        assert sampler_channel(task_parameters(stack))
        Template.from_stack(stack).resource_count_is("AWS::Lambda::Function", 0)

    def test_rules_added_later_are_evaluated(self):
        stack = make_stack()
        rule_set = ProfilerRuleSet(stack, "Rules")
        job(stack, rule_set)
        rule_set.add_rule(rules.StepOutlier(stddev=5))
        assert [r["rule_to_invoke"] for r in json.loads(evaluator_environment(stack)["RULES"])] == ["StepOutlier"]

    def test_synth_notes_that_the_jobs_pythonpath_replaces_the_images(self):
        stack = make_stack()
        contract(stack)
        Annotations.from_stack(stack).has_info("/Training/Job", Match.string_like_regexp(
            r"Sampler: .*replaces the image's own.*environment=\{'PYTHONPATH'"))
        given = make_stack()
        contract(given, environment={"PYTHONPATH": "/opt/ml/code"})
        assert not Annotations.from_stack(given).find_info("/Training/Job", Match.string_like_regexp("Sampler: "))

    @pytest.mark.parametrize(("entrypoint", "flags"), [
        (["python3", "-I", "train.py"], "-I"), (["/usr/bin/python3.10", "-u", "-ES", "train.py"], "-E -S"),
    ])
    def test_synth_warns_when_the_entrypoint_ignores_pythonpath(self, entrypoint: list[str], flags: str):
        stack = make_stack()
        contract(stack, container_entrypoint=entrypoint)
        Annotations.from_stack(stack).has_warning("/Training/Job", Match.string_like_regexp(
            f"runs Python with {flags}, which ignores PYTHONPATH.*sampler.start()"))

    def test_no_warning_for_an_ordinary_entrypoint(self):
        stack = make_stack()
        contract(stack, container_entrypoint=["python3", "-u", "train.py", "-E"])
        assert not Annotations.from_stack(stack).find_warning("/Training/Job", Match.string_like_regexp("ignores"))

    def test_a_region_without_debugger_is_fine(self):
        stack = make_stack("eu-central-2")
        training = contract(stack)
        assert training.evaluator is not None and sampler_channel(task_parameters(stack))
        assert Template.from_stack(stack).to_json().get("Mappings") is None

    def test_the_bundle_comes_first_so_a_users_own_sitecustomize_still_runs_and_user_channels_stay(self):
        stack = make_stack()
        training = contract(stack, environment={"PYTHONPATH": "/opt/ml/code/lib", "SEED": 7},
                            inputs=[InputChannel.from_s3_uri("train", "s3://data/train/", input_mode="FastFile")],
                            training_input_mode="Pipe")
        parameters = task_parameters(stack)
        assert parameters["Environment"]["PYTHONPATH"] == (  # the bundle's sitecustomize chains the user's
            f"{BUNDLE_DIR}/{training.sampler_bundle.asset_hash}.zip:/opt/ml/code/lib")
        assert parameters["Environment"]["SEED"] == "7"
        assert [c["ChannelName"] for c in parameters["InputDataConfig"]] == ["train", "cdk-sagemaker-sampler"]
        assert parameters["AlgorithmSpecification"]["TrainingInputMode"] == "Pipe"
        assert sampler_channel(parameters)["InputMode"] == "File"

    def test_spot_training_keeps_the_sampler(self):
        stack = make_stack()
        contract(stack, use_spot_instances=True, max_runtime=cdk.Duration.hours(1), max_wait=cdk.Duration.hours(2))
        assert sampler_channel(task_parameters(stack))

    def test_interval_and_framework_events(self):
        stack = make_stack()
        contract(stack, sampler=Sampler(interval_millis=100, framework_events=False))
        environment = task_parameters(stack)["Environment"]
        assert environment["CDK_SAGEMAKER_SAMPLER_INTERVAL_MS"] == "100"
        assert environment["CDK_SAGEMAKER_SAMPLER_FRAMEWORK_EVENTS"] == "0"

    def test_one_bundle_per_stack(self):
        stack = make_stack()
        first = job(stack)
        second = ProfiledTrainingJob(stack, "Other", job_name_prefix="bert", training_image=IMAGE)
        assert first.sampler_bundle is second.sampler_bundle
        assert len([a for a in stack.node.find_all() if a.node.id == "CdkSageMakerSamplerBundle"]) == 1


class TestWithoutSampler:
    def test_sampler_none_sends_neither_channel_nor_variables_and_evaluates_from_cloudwatch(self):
        stack = make_stack()
        training = contract(stack, sampler=None)
        parameters = task_parameters(stack)
        assert "InputDataConfig" not in parameters and "Environment" not in parameters
        assert training.sampler is None and training.sampler_bundle is None
        assert training.evaluator is not None  # AUTO finds no profiler files and reads CloudWatch

    @pytest.mark.parametrize("kwargs", [{"enable_network_isolation": True}, {"algorithm_name": "my-algorithm",
                                                                             "training_image": None}])
    def test_the_default_sampler_steps_aside_where_it_cannot_run(self, kwargs):
        stack = make_stack()
        training = contract(stack, **kwargs)
        assert training.sampler is None
        assert "InputDataConfig" not in task_parameters(stack)
        Annotations.from_stack(stack).has_info("/Training/Job", Match.string_like_regexp("No sampler: "))

    def test_an_explicit_sampler_where_it_cannot_run_fails(self):
        with pytest.raises(ConfigurationError, match=r"Training/Job: sampler: the sampler cannot run here: with "
                                                     r"enable_network_isolation=True the container cannot upload"):
            contract(make_stack(), enable_network_isolation=True, sampler=Sampler())


class TestDebuggerEngine:
    def test_debugger_engine_sends_todays_request_and_no_sampler(self):
        stack = make_stack()
        training = contract(stack, rule_engine=RuleEngine.DEBUGGER)
        parameters = task_parameters(stack)
        assert parameters["ProfilerConfig"]["S3OutputPath"].startswith("s3://")
        assert [r["RuleConfigurationName"] for r in parameters["ProfilerRuleConfigurations"]] == [
            "ProfilerReport", "LowGPUUtilization"]
        assert "InputDataConfig" not in parameters and "Environment" not in parameters
        assert training.evaluator is None and training.sampler is None

    def test_a_sampler_with_debugger_fails(self):
        with pytest.raises(ConfigurationError, match="Training/Job: sampler: RuleEngine.DEBUGGER profiles with "
                                                     "Debugger's own profiler"):
            contract(make_stack(), rule_engine=RuleEngine.DEBUGGER, sampler=Sampler(interval_millis=100))


class TestBadInput:
    @pytest.mark.parametrize(
        ("kwargs", "field"),
        [
            ({"debug_hook": DebugHookConfig()}, "debug_hook"),
            ({"tensorboard": TensorBoardOutputConfig(s3_output_path="s3://b/tb")}, "tensorboard"),
        ],
    )
    def test_debugger_features_name_the_debugger_engine(self, kwargs, field):
        with pytest.raises(ConfigurationError, match=rf"Training/Job: {field}: needs SageMaker Debugger's hook .* "
                                                     r"Pass rule_engine=RuleEngine.DEBUGGER"):
            contract(make_stack(), **kwargs)

    def test_a_loss_rule_names_the_metric_rule_that_replaces_it(self):
        # the tensor rules the evaluator runs are tested in test_training_job_tensor_rules.py
        with pytest.raises(ConfigurationError, match=r"Training/Job: debugger_rules: LossNotDecreasing is not evaluated "
                                                     r"by RuleEngine.EVALUATOR.*rules.LossNotDecreasing\(metric="):
            contract(make_stack(), debugger_rules=[debugger_rules.LossNotDecreasing()])

    def test_a_debugger_rule_added_later_names_the_alternative(self):
        training = contract(make_stack())
        with pytest.raises(ConfigurationError, match=r"use rules.Overfit\(train_metric="):
            training.add_debugger_rule(debugger_rules.Overfit())
        assert training.debugger_rules == ()

    def test_custom_profiler_rule_names_the_debugger_engine(self):
        stack = make_stack()
        custom = rules.ProfilerRule.custom(name="Mine", rule_to_invoke="MyRule", source="s3://b/r.py",
                                           instance_type="ml.m5.xlarge", volume_size_in_gb=30)
        with pytest.raises(ConfigurationError, match=r"Training/Job: rule_set: custom profiler rule 'Mine' runs in "
                                                     r"Debugger's rule container.*RuleEngine.DEBUGGER"):
            job(stack, ProfilerRuleSet(stack, "Rules", rules=[custom]))

    def test_profiler_config_with_the_evaluator_points_to_the_sampler(self):
        with pytest.raises(ConfigurationError, match=r"Training/Job: profiler: configures SageMaker Debugger's "
                                                     r"profiler.*sampler=Sampler\(interval_millis=...\)"):
            contract(make_stack(), profiler=ProfilerConfig(profiling_interval_millis=100))

    def test_sampler_variables_in_environment_are_refused(self):
        with pytest.raises(ConfigurationError, match=r"environment: CDK_SAGEMAKER_SAMPLER_INTERVAL_MS belong to the "
                                                     r"sampler"):
            contract(make_stack(), environment={"CDK_SAGEMAKER_SAMPLER_INTERVAL_MS": "100"})

    @pytest.mark.parametrize(("value", "error"), [(300, ConfigurationError), (0.5, ConfigurationTypeError),
                                                  (True, ConfigurationTypeError)])
    def test_sampler_interval(self, value, error):
        with pytest.raises(error, match=r"Sampler: interval_millis: .*100, 200, 500, 1000, 5000, 60000"):
            Sampler(interval_millis=value)

    @pytest.mark.parametrize(("kwargs", "error", "message"), [
        ({"rule_engine": "EVALUATOR"}, ConfigurationTypeError, "rule_engine: expected RuleEngine.EVALUATOR or"),
        ({"sampler": {"interval_millis": 100}}, ConfigurationTypeError, "sampler: expected a Sampler"),
        ({"evaluator": "shared"}, ConfigurationTypeError, "evaluator: expected a RuleEvaluator"),
    ])
    def test_wrong_types(self, kwargs, error, message):
        with pytest.raises(error, match=message):
            contract(make_stack(), **kwargs)


class TestSharedEvaluator:
    def shared(self, stack: cdk.Stack, bucket: s3.IBucket, prefix: str = "vision-") -> RuleEvaluator:
        rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.LowGPUUtilization()])
        return RuleEvaluator(stack, "Shared", rules=rule_set, training_jobs=TrainingJobs.from_job_name_prefix(
            prefix, output_bucket=bucket, output_prefix="training"))

    def test_jobs_of_a_stack_share_one_evaluator(self):
        stack = make_stack()
        bucket = s3.Bucket(stack, "Out", enforce_ssl=True)
        evaluator = self.shared(stack, bucket)
        jobs = [ProfiledTrainingJob(stack, name, job_name_prefix=f"vision-{name.lower()}", training_image=IMAGE,
                                    output_bucket=bucket, evaluator=evaluator) for name in ("ResNet", "ViT")]
        assert all(j.evaluator is evaluator for j in jobs)
        Template.from_stack(stack).resource_count_is("AWS::Lambda::Function", 1)

    def test_an_evaluator_that_cannot_see_the_job_is_refused(self):
        stack = make_stack()
        bucket = s3.Bucket(stack, "Out", enforce_ssl=True)
        evaluator = self.shared(stack, bucket, prefix="nlp-")
        with pytest.raises(ConfigurationError, match=r"Training/Job: evaluator: the evaluator Training/Shared cannot "
                                                     r"evaluate this job: its job_name_prefix 'nlp-' does not match "
                                                     r"the job's runs vision-\*"):
            ProfiledTrainingJob(stack, "Job", job_name_prefix="vision", training_image=IMAGE, output_bucket=bucket,
                                evaluator=evaluator)

    def test_an_evaluator_with_debugger_is_refused(self):
        stack = make_stack()
        evaluator = self.shared(stack, s3.Bucket(stack, "Out", enforce_ssl=True))
        with pytest.raises(ConfigurationError, match="evaluator: with RuleEngine.DEBUGGER, Debugger evaluates"):
            ProfiledTrainingJob(stack, "Job", job_name_prefix="vision", training_image=IMAGE, evaluator=evaluator,
                                rule_engine=RuleEngine.DEBUGGER)


def test_a_passed_role_gets_no_grants_but_the_bundle_can_be_granted():
    stack = make_stack()
    role = iam.Role(stack, "Mine", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    training = contract(stack, role=role)
    training.sampler_bundle.grant_read(role)
    assert sampler_channel(task_parameters(stack))
