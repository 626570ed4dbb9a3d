"""ProfiledTrainingJob with debugger rules, hook, TensorBoard and distribution: template assertions and guard rails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Annotations, Match, Template
from helpers import role_policy_statements
from helpers import task_parameters as request  # the CreateTrainingJob Parameters of the state machine

from cdk_sagemaker_debugger import (
    SMS,
    ActionList,
    CollectionConfig,
    DebugHookConfig,
    Distribution,
    Email,
    ProfiledTrainingJob,
    ProfilerConfig,
    ProfilerRuleSet,
    RuleEngine,
    StopTraining,
    TensorBoardOutputConfig,
    debugger_rules,
    rules,
)
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError, UnsupportedRegionError
from cdk_sagemaker_debugger.model.profiler_config import FrameworkProfile

PYTORCH = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:1.13.1-gpu-py39"
TENSORFLOW = "763104351884.dkr.ecr.us-west-2.amazonaws.com/tensorflow-training:2.10.0-gpu-py39"
BUILTIN_US_WEST_2 = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"
CUSTOM_US_WEST_2 = "759209512951.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rule-evaluator:latest"
# action_json as the SageMaker Python SDK writes it: quotes escaped with a backslash, StopTraining's name first when
# its prefix comes from the job.
ACTION_JSON = (
    '[{\\"name\\": \\"stoptraining\\", \\"training_job_prefix\\": \\"bert\\"}, '
    '{\\"endpoint\\": \\"ml-team@example.com\\", \\"name\\": \\"email\\"}, '
    '{\\"endpoint\\": \\"+15555550100\\", \\"name\\": \\"sms\\"}]'
)


def make_stack(region: str | None = "us-west-2") -> cdk.Stack:
    return cdk.Stack(cdk.App(), "Training", env=cdk.Environment(region=region) if region else None)


def job(stack: cdk.Stack, **kwargs: Any) -> ProfiledTrainingJob:
    props: dict[str, Any] = {"job_name_prefix": "bert", "training_image": PYTORCH, "instance_type": "ml.g5.xlarge",
                             "rule_engine": RuleEngine.DEBUGGER}
    props.update(kwargs)
    return ProfiledTrainingJob(stack, "Job", **props)


def policy_statements(stack: cdk.Stack, fragment: str) -> list[dict[str, Any]]:
    """Statements of the policy whose logical id contains ``fragment``, or of every policy of the role it names."""
    policies = Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    named = [s for i, r in policies.items() if fragment in i for s in r["Properties"]["PolicyDocument"]["Statement"]]
    return named or role_policy_statements(stack, fragment)


def actions_of(statement: dict[str, Any]) -> list[str]:
    return [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]


@pytest.fixture(scope="module")
def rule_source(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rules") / "gradient_norm.py"
    path.write_text("class GradientNorm:\n    pass\n")
    return path


@pytest.fixture(scope="module")
def full(rule_source) -> tuple[cdk.Stack, ProfiledTrainingJob]:
    """us-west-2: built-in rules with actions, a custom rule from a local file, a configured hook and TensorBoard."""
    stack = make_stack()
    training = job(
        stack,
        debugger_rules=[
            debugger_rules.LossNotDecreasing(
                num_steps=20, mode="TRAIN",
                actions=ActionList(StopTraining(), Email("ml-team@example.com"), SMS("+15555550100")),
            ),
            debugger_rules.VanishingGradient(),
            debugger_rules.Rule.custom(
                name="GradientNorm", rule_to_invoke="GradientNorm", source=rule_source,
                instance_type="ml.m5.xlarge", volume_size_in_gb=30, parameters={"max_norm": 100},
                collections_to_save=[CollectionConfig("gradients", {"save_interval": 500})],
            ),
        ],
        debug_hook=DebugHookConfig(hook_parameters={"save_interval": 100}),
        tensorboard=TensorBoardOutputConfig(),
    )
    return stack, training


@pytest.fixture(scope="module")
def agnostic() -> cdk.Stack:
    stack = make_stack(region=None)
    job(stack, debugger_rules=[
        debugger_rules.Overfit(),
        debugger_rules.Rule.custom(name="Mine", rule_to_invoke="Mine", source="s3://rules-bucket/mine.py",
                                   instance_type="ml.m5.xlarge", volume_size_in_gb=20),
    ])
    return stack


class TestRequest:
    def test_hook_rules_and_tensorboard_are_rendered(self, full):
        stack, _ = full
        params = request(stack)
        output = params["OutputDataConfig"]["S3OutputPath"]
        assert output == "s3://<Ref JobOutputBucket44705424>/training"
        assert params["DebugHookConfig"] == {
            "S3OutputPath": output,
            "LocalPath": "/opt/ml/output/tensors/",
            "HookParameters": {"save_interval": "100"},
            "CollectionConfigurations": [
                {"CollectionName": "losses", "CollectionParameters": {"save_interval": "500"}},
                {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}},
            ],
        }
        loss, vanishing, custom = params["DebugRuleConfigurations"]
        assert loss == {
            "RuleConfigurationName": "LossNotDecreasing",
            "RuleEvaluatorImage": BUILTIN_US_WEST_2,
            "RuleParameters": {"rule_to_invoke": "LossNotDecreasing", "num_steps": "20", "mode": "TRAIN",
                               "action_json": ACTION_JSON},
        }
        assert vanishing == {"RuleConfigurationName": "VanishingGradient", "RuleEvaluatorImage": BUILTIN_US_WEST_2,
                             "RuleParameters": {"rule_to_invoke": "VanishingGradient"}}
        assert custom["RuleEvaluatorImage"] == CUSTOM_US_WEST_2
        assert (custom["InstanceType"], custom["VolumeSizeInGB"]) == ("ml.m5.xlarge", 30)
        assert list(custom["RuleParameters"]) == ["source_s3_uri", "rule_to_invoke", "max_norm"]
        assert custom["RuleParameters"]["max_norm"] == "100"
        assert params["TensorBoardOutputConfig"] == {
            "S3OutputPath": f"{output}/bert/tensorboard-output", "LocalPath": "/opt/ml/output/tensorboard"}
        # Debugger members sit between CheckpointConfig and ProfilerConfig, as the SDK orders them.
        keys = list(params)
        assert keys.index("DebugHookConfig") < keys.index("DebugRuleConfigurations") < keys.index(
            "TensorBoardOutputConfig") < keys.index("ProfilerConfig")

    def test_public_attributes(self, full):
        _, training = full
        assert [rule.name for rule in training.debugger_rules] == ["LossNotDecreasing", "VanishingGradient", "GradientNorm"]
        assert training.debug_hook == DebugHookConfig(hook_parameters={"save_interval": 100})
        assert training.tensorboard == TensorBoardOutputConfig()
        assert training.distribution is None
        assert len(training.debugger_rule_source_assets) == 1
        assert isinstance(training.rule_actions_policy, iam.Policy)

    def test_no_debugger_settings_render_no_debugger_members(self):
        stack = make_stack()
        training = job(stack)
        params = request(stack)
        assert not {"DebugHookConfig", "DebugRuleConfigurations", "TensorBoardOutputConfig"} & set(params)
        assert training.debug_hook is None and training.rule_actions_policy is None

    def test_hook_without_rules(self):
        stack = make_stack()
        job(stack, debug_hook=True)
        assert request(stack)["DebugHookConfig"]["CollectionConfigurations"] == []


class TestCustomRuleSource:
    def test_local_source_becomes_an_asset_that_only_the_execution_role_reads(self, full):
        stack, training = full
        (asset,) = training.debugger_rule_source_assets
        key = stack.resolve(asset.s3_object_key)
        assert key.endswith(".py")
        assert request(stack)["DebugRuleConfigurations"][2]["RuleParameters"]["source_s3_uri"] == "<Fn::Sub>"
        machine = Template.from_stack(stack).find_resources("AWS::StepFunctions::StateMachine")
        definition = json.dumps(next(iter(machine.values()))["Properties"]["DefinitionString"])
        assert json.dumps({"Fn::Sub": f"s3://cdk-hnb659fds-assets-${{AWS::AccountId}}-us-west-2/{key}"}) in definition
        reads = [s for s in policy_statements(stack, "JobExecutionRole") if s["Action"] == "s3:GetObject"]
        assert [json.dumps(s["Resource"]) for s in reads if key in json.dumps(s["Resource"])] == [
            json.dumps(stack.resolve(asset.bucket.arn_for_objects(asset.s3_object_key)))
        ]

    def test_s3_source_is_sent_as_given_without_an_asset(self, agnostic):
        params = request(agnostic)
        assert params["DebugRuleConfigurations"][1]["RuleParameters"]["source_s3_uri"] == "s3://rules-bucket/mine.py"
        assert "aws:asset:path" not in json.dumps(Template.from_stack(agnostic).to_json())


class TestActionsIam:
    def test_rule_actions_get_the_topic_and_stop_scoped_to_the_prefix(self, full):
        stack, _ = full
        statements = policy_statements(stack, "JobRuleActionsPolicy")
        by_action = {tuple(actions_of(s)): s["Resource"] for s in statements}
        assert set(by_action) == {
            ("sns:CreateTopic", "sns:Subscribe", "sns:Publish"),
            ("sagemaker:ListTrainingJobs",),
            ("sagemaker:StopTrainingJob",),
        }
        topic = by_action[("sns:CreateTopic", "sns:Subscribe", "sns:Publish")]
        assert topic == {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":sns:us-west-2:", {"Ref": "AWS::AccountId"},
                                           ":SMDebugRules"]]}
        assert by_action[("sagemaker:StopTrainingJob",)] == {"Fn::Join": ["", [
            "arn:", {"Ref": "AWS::Partition"}, ":sagemaker:us-west-2:", {"Ref": "AWS::AccountId"}, ":training-job/bert*"]]}
        assert by_action[("sagemaker:ListTrainingJobs",)] == "*"
        Template.from_stack(stack).has_resource_properties("AWS::IAM::Policy", {
            "PolicyName": Match.string_like_regexp("JobRuleActionsPolicy"),
            "Roles": [{"Ref": Match.string_like_regexp("JobExecutionRole")}],
        })

    def test_stop_training_with_its_own_prefix_is_scoped_to_that_prefix(self):
        stack = make_stack()
        job(stack, debugger_rules=[debugger_rules.Overfit(actions=StopTraining("Shared-Runs"))])
        statements = policy_statements(stack, "JobRuleActionsPolicy")
        stop = next(s for s in statements if s["Action"] == "sagemaker:StopTrainingJob")
        assert stop["Resource"]["Fn::Join"][1][-1] == ":training-job/shared-runs*"
        assert not any("sns:Publish" in actions_of(s) for s in statements)

    def test_notifications_alone_get_no_stop_permissions(self):
        stack = make_stack()
        training = job(stack, debugger_rules=[debugger_rules.Overfit(actions=Email("a@example.com"))])
        statements = policy_statements(stack, "JobRuleActionsPolicy")
        assert [actions_of(s) for s in statements] == [["sns:CreateTopic", "sns:Subscribe", "sns:Publish"]]
        assert training.rule_actions_policy is not None

    def test_rule_images_are_pulled(self, full):
        stack, _ = full
        pull = next(s for s in policy_statements(stack, "JobExecutionRole") if "ecr:BatchGetImage" in s["Action"])
        resources = json.dumps(pull["Resource"])
        assert ":ecr:us-west-2:895741380848:repository/sagemaker-debugger-rules" in resources
        assert ":ecr:us-west-2:759209512951:repository/sagemaker-debugger-rule-evaluator" in resources
        assert ":ecr:us-west-2:763104351884:repository/pytorch-training" in resources

    def test_a_given_role_is_left_unchanged(self):
        stack = make_stack()
        role = iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::123456789012:role/Existing")
        training = job(stack, role=role, debugger_rules=[debugger_rules.Overfit(actions=StopTraining())])
        assert training.rule_actions_policy is None
        assert Template.from_stack(stack).find_resources("AWS::IAM::Policy", {
            "Properties": {"PolicyName": Match.string_like_regexp("RuleActions")}}) == {}

    def test_hook_and_tensorboard_outside_the_output_bucket_are_writable(self):
        stack = make_stack()
        job(stack, debug_hook=DebugHookConfig(s3_output_path="s3://tensors/bert"),
            tensorboard=TensorBoardOutputConfig(s3_output_path="s3://boards/bert/tb"))
        writes = [s for s in policy_statements(stack, "JobExecutionRole") if "s3:PutObject" in s["Action"]]
        resources = json.dumps([s["Resource"] for s in writes])
        assert ":s3:::tensors/bert/*" in resources and ":s3:::boards/bert/tb/*" in resources


class TestEnvironmentAgnostic:
    def test_rule_images_come_from_the_region_mapping(self, agnostic):
        params = request(agnostic)
        images = [c["RuleEvaluatorImage"] for c in params["DebugRuleConfigurations"]]
        suffix = ".dkr.ecr.<Ref AWS::Region>.<Ref AWS::URLSuffix>"
        assert images == [
            f"<FindInMap CdkSageMakerDebuggerRuleImageAccounts/<Ref AWS::Region>/builtin>{suffix}/sagemaker-debugger-rules:latest",
            f"<FindInMap CdkSageMakerDebuggerRuleImageAccounts/<Ref AWS::Region>/custom>{suffix}/sagemaker-debugger-rule-evaluator:latest",
        ]

    def test_deployment_in_a_region_without_the_images_fails_early(self, agnostic):
        template_rules = Template.from_stack(agnostic).to_json()["Rules"]
        assert {"CdkSageMakerDebuggerRuleImageRegionsBuiltin", "CdkSageMakerDebuggerRuleImageRegionsCustom"} <= set(template_rules)
        custom_regions = template_rules["CdkSageMakerDebuggerRuleImageRegionsCustom"]["Assertions"][0]["Assert"]["Fn::Contains"][0]
        assert "ap-northeast-3" not in custom_regions and "us-west-2" in custom_regions

    def test_the_execution_role_pulls_from_the_mapped_accounts(self, agnostic):
        pull = next(s for s in policy_statements(agnostic, "JobExecutionRole") if "ecr:BatchGetImage" in s["Action"])
        resources = json.dumps(pull["Resource"])
        assert '"builtin"' in resources and '"custom"' in resources and "Fn::FindInMap" in resources


class TestWarnings:
    def warnings(self, stack: cdk.Stack, pattern: str) -> list[Any]:
        return Annotations.from_stack(stack).find_warning("/Training/Job", Match.string_like_regexp(pattern))

    def test_rule_outside_the_frameworks_scope_warns_once(self):
        stack = make_stack()
        training = job(stack, debugger_rules=[debugger_rules.TreeDepth()])
        training.add_debugger_rule(debugger_rules.Overfit())
        (warning,) = self.warnings(stack, "TreeDepth applies to XGBoost training, but the training image is pytorch")
        assert "[ack: cdk-sagemaker-debugger:debuggerConfiguration]" in warning.entry.data

    def test_unknown_hook_parameter_warns(self):
        stack = make_stack()
        job(stack, debug_hook=DebugHookConfig(hook_parameters={"save_intervall": 10}))
        assert len(self.warnings(stack, "'save_intervall'.*Did you mean 'save_interval'")) == 1

    def test_profiling_collectives_under_horovod_warns(self):
        stack = make_stack()
        job(stack, training_image=TENSORFLOW, distribution=Distribution.mpi(processes_per_host=8), instance_count=2,
            profiler=ProfilerConfig(framework_profile=FrameworkProfile()))
        (warning,) = self.warnings(stack, "does not collect the collective operations of MPI/Horovod")
        assert "[ack: cdk-sagemaker-debugger:debuggerCompatibility]" in warning.entry.data

    def test_system_monitoring_under_model_parallel_warns(self):
        stack = make_stack()
        training = job(stack, distribution=Distribution.smdistributed_model_parallel())
        assert len(self.warnings(stack, "does not support SageMaker distributed model parallel training; system")) == 1
        assert training.distribution == Distribution.smdistributed_model_parallel()


class TestAddDebuggerRule:
    def test_added_rules_are_rendered_and_granted(self):
        stack = make_stack()
        training = job(stack)
        assert training.add_debugger_rule(debugger_rules.Overfit(actions=StopTraining())) is training
        params = request(stack)
        assert [c["RuleConfigurationName"] for c in params["DebugRuleConfigurations"]] == ["Overfit"]
        assert "DebugHookConfig" in params
        stop = next(s for s in policy_statements(stack, "JobRuleActionsPolicy") if s["Action"] == "sagemaker:StopTrainingJob")
        assert stop["Resource"]["Fn::Join"][1][-1] == ":training-job/bert*"
        pull = next(s for s in policy_statements(stack, "JobExecutionRole") if "ecr:BatchGetImage" in s["Action"])
        assert "repository/sagemaker-debugger-rules" in json.dumps(pull["Resource"])

    def test_a_rejected_rule_leaves_the_job_unchanged(self, rule_source):
        stack = make_stack()
        training = job(stack, instance_count=2, checkpoint_s3_uri="s3://ckpt/bert")
        custom = debugger_rules.Rule.custom(name="GradientNorm", rule_to_invoke="GradientNorm", source=rule_source,
                                            instance_type="ml.m5.xlarge", volume_size_in_gb=30)
        with pytest.raises(ConfigurationError, match=r"^Training/Job: checkpoint_config: SMDebug Does Not Currently Support"):
            training.add_debugger_rule(custom)
        assert training.debugger_rules == () and training.debugger_rule_source_assets == ()
        assert training.debug_hook is None
        assert "DebugRuleConfigurations" not in request(stack)

    def test_duplicate_name_added_later(self):
        stack = make_stack()
        training = job(stack, debugger_rules=[debugger_rules.Overfit()])
        with pytest.raises(ConfigurationError, match=r"^Training/Job: debugger_rules: two debugger rules are named 'Overfit'"):
            training.add_debugger_rule(debugger_rules.Overfit(patience=3))
        assert len(training.debugger_rules) == 1


class TestGuardRails:
    """Each guard rail fails at the construct, naming its path, the field and the fix."""

    def test_region_without_debugger(self):
        with pytest.raises(UnsupportedRegionError) as raised:
            job(make_stack("me-central-1"), profiler=ProfilerConfig())
        message = str(raised.value)
        assert message.startswith("Training/Job: region: SageMaker Debugger and the profiler are not available in region 'me-central-1'")
        assert "This job uses system monitoring (on unless profiler=ProfilerConfig(disable_profiler=True))" in message

    def test_region_without_debugger_is_fine_with_everything_off(self):
        training = job(make_stack("me-central-1"), profiler=ProfilerConfig(disable_profiler=True))
        assert training.debugger_rules == ()

    @pytest.mark.parametrize(("region", "instance_type", "reason"), [
        ("me-central-1", "ml.g5.2xlarge", "SageMaker has no Debugger or profiler in me-central-1"),
        ("us-east-1", "ml.trn1.32xlarge", "the profiler does not support Trainium instances"),
    ])
    def test_default_profiler_is_switched_off_where_it_cannot_run(self, region, instance_type, reason):
        stack = make_stack(region)
        training = job(stack, instance_type=instance_type)
        assert training.profiler.disable_profiler is True
        infos = Annotations.from_stack(stack).find_info("*", Match.string_like_regexp(reason))
        assert len(infos) == 1

    def test_region_without_the_custom_rule_image(self):
        custom = debugger_rules.Rule.custom(name="Mine", rule_to_invoke="Mine", source="s3://b/mine.py",
                                            instance_type="ml.m5.xlarge", volume_size_in_gb=20)
        with pytest.raises(UnsupportedRegionError, match=r"^Training/Job: region: no custom rule image is published for region 'ap-northeast-3'"):
            job(make_stack("ap-northeast-3"), debugger_rules=[custom])

    def test_trainium_needs_the_profiler_off(self):
        with pytest.raises(ConfigurationError, match=(
            r"^Training/Job: instance_type: ml\.trn1\.32xlarge is an AWS Trainium instance, where the SageMaker profiler is "
            r"not supported\. Turn it off: profiler=ProfilerConfig\(disable_profiler=True\)"
        )):
            job(make_stack(), instance_type="ml.trn1.32xlarge", profiler=ProfilerConfig())

    def test_trainium_with_the_profiler_off_keeps_debugger_rules(self):
        stack = make_stack()
        job(stack, instance_type="ml.trn1.32xlarge", profiler=ProfilerConfig(disable_profiler=True),
            debugger_rules=[debugger_rules.LossNotDecreasing()])
        assert request(stack)["ProfilerConfig"] == {"DisableProfiler": True}

    @pytest.mark.parametrize(
        ("distribution", "label"),
        [(Distribution.smdistributed_model_parallel(), "SageMaker distributed model parallel"),
         (Distribution.parameter_server(), "parameter server")],
    )
    def test_model_parallel_and_parameter_server_with_debugger_rules(self, distribution, label):
        with pytest.raises(ConfigurationError, match=(
            rf"^Training/Job: distribution: SageMaker Debugger does not support {label} training, but the debugger "
            r"hook/rules are configured\. Remove debug_hook, debugger_rules"
        )):
            job(make_stack(), training_image=TENSORFLOW, distribution=distribution,
                debugger_rules=[debugger_rules.VanishingGradient()])

    def test_parameter_server_with_framework_profiling(self):
        with pytest.raises(ConfigurationError, match=r"^Training/Job: distribution: .* parameter server training, but framework profiling"):
            job(make_stack(), training_image=TENSORFLOW, distribution=Distribution.parameter_server(),
                profiler=ProfilerConfig(framework_profile=FrameworkProfile()))

    @pytest.mark.parametrize(
        ("kwargs", "shape"),
        [({"instance_count": 2}, "2 instances"), ({"distribution": Distribution.torch_distributed()}, "torch_distributed")],
    )
    def test_distributed_training_with_checkpointing_and_the_hook(self, kwargs, shape):
        with pytest.raises(ConfigurationError) as raised:
            job(make_stack(), checkpoint_s3_uri="s3://ckpt/bert", debugger_rules=[debugger_rules.Overfit()], **kwargs)
        message = str(raised.value)
        assert message.startswith(
            "Training/Job: checkpoint_config: SMDebug Does Not Currently Support Distributed Training Jobs With "
            f"Checkpointing Enabled ({shape} with checkpoint_config)."
        )
        assert "disable SageMaker checkpointing" in message

    def test_single_instance_checkpointing_keeps_the_hook(self):
        stack = make_stack()
        job(stack, checkpoint_s3_uri="s3://ckpt/bert", debug_hook=True)
        assert "DebugHookConfig" in request(stack) and "CheckpointConfig" in request(stack)

    def test_distribution_must_match_the_framework(self):
        with pytest.raises(ConfigurationError, match=(
            r"^Training/Job: distribution: torch_distributed runs PyTorch training, but the training image is "
            r"TensorFlow 2\.10\.0"
        )):
            job(make_stack(), training_image=TENSORFLOW, distribution=Distribution.torch_distributed())

    def test_distribution_as_the_sdk_dict(self):
        with pytest.raises(ConfigurationTypeError, match=(
            r"^Training/Job: distribution: expected a Distribution such as Distribution\.mpi\(\), got dict\. Convert the "
            r"SageMaker SDK's dict with Distribution\.from_sdk"
        )):
            job(make_stack(), distribution={"mpi": {"enabled": True}})

    def test_hook_off_with_rules(self):
        with pytest.raises(ConfigurationError, match=r"^Training/Job: debug_hook: debug_hook=False turns off the hook"):
            job(make_stack(), debug_hook=False, debugger_rules=[debugger_rules.Overfit()])

    def test_more_than_20_rules(self):
        too_many = [debugger_rules.Overfit(name=f"overfit-{i}") for i in range(21)]
        with pytest.raises(ConfigurationError, match=r"^Training/Job: debugger_rules: has 21 debugger rules; the API allows at most 20"):
            job(make_stack(), debugger_rules=too_many)

    def test_profiler_rule_in_debugger_rules(self):
        with pytest.raises(ConfigurationTypeError, match=(
            r"^Training/Job: debugger_rules: item 0 \(LowGPUUtilization\) is a profiler rule; add it to the job's "
            r"ProfilerRuleSet"
        )):
            job(make_stack(), debugger_rules=[rules.LowGPUUtilization()])

    def test_single_rule_instead_of_a_list(self):
        with pytest.raises(ConfigurationTypeError, match=r"^Training/Job: debugger_rules: .* Wrap a single rule as \[rule\]"):
            job(make_stack(), debugger_rules=debugger_rules.Overfit())

    def test_rule_and_hook_disagree_on_a_collection(self):
        hook = DebugHookConfig(collection_configs=[CollectionConfig("losses", {"save_interval": 50})])
        with pytest.raises(ConfigurationError, match=(
            r"^Training/Job: CollectionConfigurations: collection 'losses' is requested with different parameters by "
            r"rule 'LossNotDecreasing' .* and by debug_hook"
        )):
            job(make_stack(), debug_hook=hook, debugger_rules=[debugger_rules.LossNotDecreasing()])

    def test_actions_longer_than_the_api_allows(self):
        addresses = ActionList(*(Email(f"team-{i}@example.com") for i in range(6)))
        with pytest.raises(ConfigurationError, match=(
            r"^Training/Job > rule 'Overfit': actions: the actions serialize to \d+ characters, but the API allows at most 256"
        )):
            job(make_stack(), debugger_rules=[debugger_rules.Overfit(actions=addresses)])

    def test_tensorboard_of_the_wrong_type(self):
        with pytest.raises(ConfigurationTypeError, match=r"^Training/Job: tensorboard: expected a TensorBoardOutputConfig, got str"):
            job(make_stack(), tensorboard="s3://boards/bert")

    def test_profiler_rules_added_later_on_trainium_fail_synth(self):
        stack = make_stack()
        rule_set = ProfilerRuleSet(stack, "Rules")
        job(stack, instance_type="ml.trn1.32xlarge", profiler=ProfilerConfig(disable_profiler=True), rule_set=rule_set)
        rule_set.add_rule(rules.LowGPUUtilization())
        with pytest.raises(RuntimeError) as raised:
            Template.from_stack(stack)
        message = str(raised.value)
        assert "profiler rules ['LowGPUUtilization'] need the profiler" in message
        assert "Training/Job: instance_type: ml.trn1.32xlarge is an AWS Trainium instance" in message
