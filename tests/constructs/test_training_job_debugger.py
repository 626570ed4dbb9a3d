"""ProfiledTrainingJob with debugger rules, hook, TensorBoard and distribution: template assertions and guard rails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Annotations, Match, Template
from helpers import make_stack, role_policy_statements
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
# A job name an execution generates: <prefix>-<20 hex characters>.
RUN = "bert-3f9c2b1a7d4e4c0b9a51"


def action_json(job_name: str) -> str:
    """action_json as the SageMaker Python SDK writes it at fit(): quotes escaped with a backslash, StopTraining's name
    first and then the job's own name (the SDK fills in the current job name)."""
    return (
        f'[{{\\"name\\": \\"stoptraining\\", \\"training_job_prefix\\": \\"{job_name}\\"}}, '
        '{\\"endpoint\\": \\"ml-team@example.com\\", \\"name\\": \\"email\\"}, '
        '{\\"endpoint\\": \\"+15555550100\\", \\"name\\": \\"sms\\"}]'
    )


def run_parameters(parameters: dict[str, Any], job_name: str) -> dict[str, str]:
    """The RuleParameters Step Functions sends for the run ``job_name``: ``key.$`` values are evaluated the way the
    Amazon States Language defines them (a path to the name, or States.Format with \\' \\{ \\} \\\\ escapes)."""
    sent = {}
    for key, value in parameters.items():
        if not key.endswith(".$"):
            sent[key] = value
        elif value == "$.trainingRun.TrainingJobName":
            sent[key[:-2]] = job_name
        else:
            sent[key[:-2]] = _format(value, job_name)
    return sent


def _format(call: str, job_name: str) -> str:
    prefix, suffix = "States.Format('", "', $.trainingRun.TrainingJobName)"
    assert call.startswith(prefix) and call.endswith(suffix) and call.count("$.trainingRun.TrainingJobName") == 1, call
    template, out, index = call[len(prefix):-len(suffix)], [], 0
    while index < len(template):
        char = template[index]
        if char == "\\":
            out.append(template[index + 1])
            index += 2
        elif template.startswith("{}", index):
            out.append(job_name)
            index += 2
        else:
            assert char not in "'{}", f"unescaped {char!r} in {template!r}"
            out.append(char)
            index += 1
    return "".join(out)


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
    stack = make_stack("us-west-2")
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
        assert {**loss, "RuleParameters": run_parameters(loss["RuleParameters"], RUN)} == {
            "RuleConfigurationName": "LossNotDecreasing",
            "RuleEvaluatorImage": BUILTIN_US_WEST_2,
            "RuleParameters": {"rule_to_invoke": "LossNotDecreasing", "num_steps": "20", "mode": "TRAIN",
                               "action_json": action_json(RUN)},
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
        stack = make_stack("us-west-2")
        training = job(stack)
        params = request(stack)
        assert not {"DebugHookConfig", "DebugRuleConfigurations", "TensorBoardOutputConfig"} & set(params)
        assert training.debug_hook is None and training.rule_actions_policy is None

    def test_hook_without_rules(self):
        stack = make_stack("us-west-2")
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
            ("sns:CreateTopic", "sns:Publish"),
            ("sns:ListSubscriptions",),
            ("sns:Subscribe",),
            ("sagemaker:ListTrainingJobs",),
            ("sagemaker:StopTrainingJob",),
        }
        topic = by_action[("sns:CreateTopic", "sns:Publish")]
        assert topic == {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":sns:us-west-2:", {"Ref": "AWS::AccountId"},
                                           ":SMDebugRules"]]}
        # only the configured endpoints may be subscribed: the training code cannot add an address of its own
        subscribe = [s for s in statements if s["Action"] == "sns:Subscribe"]
        assert [s["Condition"] for s in subscribe] == [
            {"StringEquals": {"sns:Protocol": "email"}, "StringEqualsIgnoreCase": {"sns:Endpoint": ["ml-team@example.com"]}},
            {"StringEquals": {"sns:Protocol": "sms"}, "StringEqualsIgnoreCase": {"sns:Endpoint": ["+15555550100"]}},
        ]
        assert all(s["Resource"] == topic for s in subscribe)
        # the run's own jobs: the dash keeps a sibling prefix's jobs (bert2-..., bertlarge-...) out
        assert by_action[("sagemaker:StopTrainingJob",)] == {"Fn::Join": ["", [
            "arn:aws:sagemaker:us-west-2:", {"Ref": "AWS::AccountId"}, ":training-job/bert-*"]]}
        assert by_action[("sagemaker:ListTrainingJobs",)] == "*"
        Template.from_stack(stack).has_resource_properties("AWS::IAM::Policy", {
            "PolicyName": Match.string_like_regexp("JobRuleActionsPolicy"),
            "Roles": [{"Ref": Match.string_like_regexp("JobExecutionRole")}],
        })

    def test_stop_training_with_its_own_prefix_is_scoped_to_that_prefix(self):
        stack = make_stack("us-west-2")
        job(stack, debugger_rules=[debugger_rules.Overfit(actions=StopTraining("Shared-Runs"))])
        statements = policy_statements(stack, "JobRuleActionsPolicy")
        stop = next(s for s in statements if s["Action"] == "sagemaker:StopTrainingJob")
        assert stop["Resource"]["Fn::Join"][1][-1] == ":training-job/shared-runs*"
        assert not any("sns:Publish" in actions_of(s) for s in statements)

    def test_notifications_alone_get_no_stop_permissions(self):
        stack = make_stack("us-west-2")
        training = job(stack, debugger_rules=[debugger_rules.Overfit(actions=Email("a@example.com"))])
        statements = policy_statements(stack, "JobRuleActionsPolicy")
        assert [actions_of(s) for s in statements] == [["sns:CreateTopic", "sns:Publish"], ["sns:ListSubscriptions"],
                                                       ["sns:Subscribe"]]
        assert training.rule_actions_policy is not None

    def test_rule_images_are_pulled(self, full):
        stack, _ = full
        pull = next(s for s in policy_statements(stack, "JobExecutionRole") if "ecr:BatchGetImage" in s["Action"])
        resources = json.dumps(pull["Resource"])
        assert ":ecr:us-west-2:895741380848:repository/sagemaker-debugger-rules" in resources
        assert ":ecr:us-west-2:759209512951:repository/sagemaker-debugger-rule-evaluator" in resources
        assert ":ecr:us-west-2:763104351884:repository/pytorch-training" in resources

    def test_a_given_role_is_left_unchanged(self):
        stack = make_stack("us-west-2")
        role = iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::123456789012:role/Existing")
        training = job(stack, role=role, debugger_rules=[debugger_rules.Overfit(actions=StopTraining())])
        assert training.rule_actions_policy is None
        assert Template.from_stack(stack).find_resources("AWS::IAM::Policy", {
            "Properties": {"PolicyName": Match.string_like_regexp("RuleActions")}}) == {}

    def test_hook_and_tensorboard_outside_the_output_bucket_are_writable(self):
        stack = make_stack("us-west-2")
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
        stack = make_stack("us-west-2")
        training = job(stack, debugger_rules=[debugger_rules.TreeDepth()])
        training.add_debugger_rule(debugger_rules.Overfit())
        (warning,) = self.warnings(stack, "TreeDepth applies to XGBoost training, but the training image is pytorch")
        assert "[ack: cdk-sagemaker-debugger:debuggerConfiguration]" in warning.entry.data

    def test_unknown_hook_parameter_warns(self):
        stack = make_stack("us-west-2")
        job(stack, debug_hook=DebugHookConfig(hook_parameters={"save_intervall": 10}))
        assert len(self.warnings(stack, "'save_intervall'.*Did you mean 'save_interval'")) == 1

    def test_profiling_collectives_under_horovod_warns(self):
        stack = make_stack("us-west-2")
        job(stack, training_image=TENSORFLOW, distribution=Distribution.mpi(processes_per_host=8), instance_count=2,
            profiler=ProfilerConfig(framework_profile=FrameworkProfile()))
        (warning,) = self.warnings(stack, "does not collect the collective operations of MPI/Horovod")
        assert "[ack: cdk-sagemaker-debugger:debuggerCompatibility]" in warning.entry.data

    def test_system_monitoring_under_model_parallel_warns(self):
        stack = make_stack("us-west-2")
        training = job(stack, distribution=Distribution.smdistributed_model_parallel())
        assert len(self.warnings(stack, "does not support SageMaker distributed model parallel training; system")) == 1
        assert training.distribution == Distribution.smdistributed_model_parallel()


class TestAddDebuggerRule:
    def test_added_rules_are_rendered_and_granted(self):
        stack = make_stack("us-west-2")
        training = job(stack)
        overfit = debugger_rules.Overfit(actions=StopTraining())
        assert training.add_debugger_rule(overfit) is overfit
        params = request(stack)
        assert [c["RuleConfigurationName"] for c in params["DebugRuleConfigurations"]] == ["Overfit"]
        assert "DebugHookConfig" in params
        stop = next(s for s in policy_statements(stack, "JobRuleActionsPolicy") if s["Action"] == "sagemaker:StopTrainingJob")
        assert stop["Resource"]["Fn::Join"][1][-1] == ":training-job/bert-*"
        pull = next(s for s in policy_statements(stack, "JobExecutionRole") if "ecr:BatchGetImage" in s["Action"])
        assert "repository/sagemaker-debugger-rules" in json.dumps(pull["Resource"])

    def test_a_rejected_rule_leaves_the_job_unchanged(self, rule_source):
        stack = make_stack("us-west-2")
        training = job(stack, instance_count=2, checkpoint_s3_uri="s3://ckpt/bert")
        custom = debugger_rules.Rule.custom(name="GradientNorm", rule_to_invoke="GradientNorm", source=rule_source,
                                            instance_type="ml.m5.xlarge", volume_size_in_gb=30)
        with pytest.raises(ConfigurationError, match=r"^Training/Job: checkpoint_s3_uri: SMDebug Does Not Currently Support"):
            training.add_debugger_rule(custom)
        assert training.debugger_rules == () and training.debugger_rule_source_assets == ()
        assert training.debug_hook is None
        assert "DebugRuleConfigurations" not in request(stack)

    def test_duplicate_name_added_later(self):
        stack = make_stack("us-west-2")
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
            job(make_stack("us-west-2"), instance_type="ml.trn1.32xlarge", profiler=ProfilerConfig())

    def test_trainium_with_the_profiler_off_keeps_debugger_rules(self):
        stack = make_stack("us-west-2")
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
            job(make_stack("us-west-2"), training_image=TENSORFLOW, distribution=distribution,
                debugger_rules=[debugger_rules.VanishingGradient()])

    def test_parameter_server_with_framework_profiling(self):
        with pytest.raises(ConfigurationError, match=r"^Training/Job: distribution: .* parameter server training, but framework profiling"):
            job(make_stack("us-west-2"), training_image=TENSORFLOW, distribution=Distribution.parameter_server(),
                profiler=ProfilerConfig(framework_profile=FrameworkProfile()))

    @pytest.mark.parametrize(
        ("kwargs", "shape"),
        [({"instance_count": 2}, "2 instances"), ({"distribution": Distribution.torch_distributed()}, "torch_distributed")],
    )
    def test_distributed_training_with_checkpointing_and_the_hook(self, kwargs, shape):
        with pytest.raises(ConfigurationError) as raised:
            job(make_stack("us-west-2"), checkpoint_s3_uri="s3://ckpt/bert", debugger_rules=[debugger_rules.Overfit()], **kwargs)
        message = str(raised.value)
        assert message.startswith(
            "Training/Job: checkpoint_s3_uri: SMDebug Does Not Currently Support Distributed Training Jobs With "
            f"Checkpointing Enabled ({shape} with checkpoint_s3_uri)."
        )
        assert "disable SageMaker checkpointing" in message

    def test_single_instance_checkpointing_keeps_the_hook(self):
        stack = make_stack("us-west-2")
        job(stack, checkpoint_s3_uri="s3://ckpt/bert", debug_hook=True)
        assert "DebugHookConfig" in request(stack) and "CheckpointConfig" in request(stack)

    def test_distribution_must_match_the_framework(self):
        with pytest.raises(ConfigurationError, match=(
            r"^Training/Job: distribution: torch_distributed runs PyTorch training, but the training image is "
            r"TensorFlow 2\.10\.0"
        )):
            job(make_stack("us-west-2"), training_image=TENSORFLOW, distribution=Distribution.torch_distributed())

    def test_distribution_as_the_sdk_dict(self):
        with pytest.raises(ConfigurationTypeError, match=(
            r"^Training/Job: distribution: expected a Distribution such as Distribution\.mpi\(\), got dict\. Convert the "
            r"SageMaker SDK's dict with Distribution\.from_sdk"
        )):
            job(make_stack("us-west-2"), distribution={"mpi": {"enabled": True}})

    def test_hook_off_with_rules(self):
        with pytest.raises(ConfigurationError, match=r"^Training/Job: debug_hook: debug_hook=False turns off the hook"):
            job(make_stack("us-west-2"), debug_hook=False, debugger_rules=[debugger_rules.Overfit()])

    def test_more_than_20_rules(self):
        too_many = [debugger_rules.Overfit(name=f"overfit-{i}") for i in range(21)]
        with pytest.raises(ConfigurationError, match=r"^Training/Job: debugger_rules: has 21 debugger rules; the API allows at most 20"):
            job(make_stack("us-west-2"), debugger_rules=too_many)

    def test_profiler_rule_in_debugger_rules(self):
        with pytest.raises(ConfigurationTypeError, match=(
            r"^Training/Job: debugger_rules: item 0 \(LowGPUUtilization\) is a profiler rule; add it to the job's "
            r"ProfilerRuleSet"
        )):
            job(make_stack("us-west-2"), debugger_rules=[rules.LowGPUUtilization()])

    def test_single_rule_instead_of_a_list(self):
        with pytest.raises(ConfigurationTypeError, match=r"^Training/Job: debugger_rules: .* Wrap a single rule as \[rule\]"):
            job(make_stack("us-west-2"), debugger_rules=debugger_rules.Overfit())

    def test_rule_and_hook_disagree_on_a_collection(self):
        hook = DebugHookConfig(collection_configs=[CollectionConfig("losses", {"save_interval": 50})])
        with pytest.raises(ConfigurationError, match=(
            r"^Training/Job: CollectionConfigurations: collection 'losses' is requested with different parameters by "
            r"rule 'LossNotDecreasing' .* and by debug_hook"
        )):
            job(make_stack("us-west-2"), debug_hook=hook, debugger_rules=[debugger_rules.LossNotDecreasing()])

    def test_actions_longer_than_the_api_allows(self):
        addresses = ActionList(*(Email(f"team-{i}@example.com") for i in range(6)))
        with pytest.raises(ConfigurationError, match=(
            r"^Training/Job > rule 'Overfit': actions: the actions serialize to \d+ characters, but the API allows at most 256"
        )):
            job(make_stack("us-west-2"), debugger_rules=[debugger_rules.Overfit(actions=addresses)])

    def test_tensorboard_of_the_wrong_type(self):
        with pytest.raises(ConfigurationTypeError, match=r"^Training/Job: tensorboard: expected a TensorBoardOutputConfig, got str"):
            job(make_stack("us-west-2"), tensorboard="s3://boards/bert")

    def test_profiler_rules_added_later_on_trainium_fail_synth(self):
        stack = make_stack("us-west-2")
        rule_set = ProfilerRuleSet(stack, "Rules")
        job(stack, instance_type="ml.trn1.32xlarge", profiler=ProfilerConfig(disable_profiler=True), rule_set=rule_set)
        rule_set.add_rule(rules.LowGPUUtilization())
        with pytest.raises(RuntimeError) as raised:
            Template.from_stack(stack)
        message = str(raised.value)
        assert "profiler rules ['LowGPUUtilization'] need the profiler" in message
        assert "Training/Job: instance_type: ml.trn1.32xlarge is an AWS Trainium instance" in message


class TestRunName:
    """Debugger's StopTraining stops only when exactly one running job matches its prefix: each run gets its own name."""

    @staticmethod
    def states(stack: cdk.Stack) -> dict[str, Any]:
        machine = next(r for r in Template.from_stack(stack).to_json()["Resources"].values()
                       if r["Type"] == "AWS::StepFunctions::StateMachine")
        parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
        return json.loads("".join(p if isinstance(p, str) else "x" for p in parts))["States"]

    def test_the_run_is_named_once_and_its_stop_actions_name_exactly_that_run(self):
        stack = make_stack("us-west-2")
        job(stack, debugger_rules=[debugger_rules.Overfit(actions=StopTraining()),
                                   debugger_rules.StalledTrainingRule(stop_training_on_fire=True)])
        naming = self.states(stack)["NameTrainingJob"]
        assert naming["Parameters"]["TrainingJobName.$"].startswith("States.Format('bert-{}{}', ")
        params = request(stack)
        assert params["TrainingJobName.$"] == "$.trainingRun.TrainingJobName"
        overfit, stalled = params["DebugRuleConfigurations"]
        assert run_parameters(overfit["RuleParameters"], RUN)["action_json"] == (
            f'{{\\"name\\": \\"stoptraining\\", \\"training_job_prefix\\": \\"{RUN}\\"}}')
        assert stalled["RuleParameters"]["training_job_name_prefix.$"] == "$.trainingRun.TrainingJobName"
        assert run_parameters(stalled["RuleParameters"], RUN)["training_job_name_prefix"] == RUN

    def test_reserved_characters_of_other_actions_survive_the_intrinsic(self):
        stack = make_stack("us-west-2")
        address = "o'neil+{ml}@example.com"
        job(stack, debugger_rules=[debugger_rules.Overfit(actions=ActionList(StopTraining(), Email(address)))])
        (overfit,) = request(stack)["DebugRuleConfigurations"]
        expected = ActionList(StopTraining(), Email(address)).with_job_prefix(RUN).serialize()
        assert run_parameters(overfit["RuleParameters"], RUN)["action_json"] == expected

    def test_a_stop_with_its_own_prefix_is_sent_as_given(self):
        stack = make_stack("us-west-2")
        job(stack, debugger_rules=[debugger_rules.Overfit(actions=StopTraining("Shared-Runs"))])
        (overfit,) = request(stack)["DebugRuleConfigurations"]
        assert overfit["RuleParameters"]["action_json"] == StopTraining("Shared-Runs").serialize()

    def test_rules_added_later_subscribe_only_their_new_endpoints(self):
        stack = make_stack("us-west-2")
        training = job(stack, debugger_rules=[debugger_rules.Overfit(actions=Email("ML-Team@Example.com"))])
        training.add_debugger_rule(debugger_rules.LossNotDecreasing(
            actions=ActionList(Email("ML-Team@Example.com"), Email("oncall@example.com"))))
        subscribe = [s for s in policy_statements(stack, "JobRuleActionsPolicy") if s["Action"] == "sns:Subscribe"]
        # the container lowercases the action text, endpoints included
        assert [s["Condition"]["StringEqualsIgnoreCase"]["sns:Endpoint"] for s in subscribe] == [
            ["ml-team@example.com"], ["oncall@example.com"]]
        topic_grants = [s for s in policy_statements(stack, "JobRuleActionsPolicy") if "sns:CreateTopic" in actions_of(s)]
        assert len(topic_grants) == 1


class TestDeployTimeNumbers:
    def test_a_number_token_in_a_rule_parameter_or_hook_parameter_is_sent_as_a_string(self):
        """SageMaker takes RuleParameters and HookParameters as strings; a JSON number would be refused."""
        stack = make_stack("us-west-2")
        steps = cdk.CfnParameter(stack, "Steps", type="Number", default=20).value_as_number
        job(stack, debugger_rules=[debugger_rules.LossNotDecreasing(num_steps=steps)],
            debug_hook=DebugHookConfig(hook_parameters={"save_interval": steps}),
            rule_set=ProfilerRuleSet(stack, "Rules", rules=[rules.LowGPUUtilization(threshold_p95=steps)]))
        params = request(stack)  # the definition parses only if the values are quoted
        assert params["DebugRuleConfigurations"][0]["RuleParameters"]["num_steps"] == "<Ref Steps>"
        assert params["ProfilerRuleConfigurations"][0]["RuleParameters"]["threshold_p95"] == "<Ref Steps>"
        assert params["DebugHookConfig"]["HookParameters"] == {"save_interval": "<Ref Steps>"}


def test_a_rule_without_parameters_is_sent_without_them():
    stack = make_stack("us-west-2")
    job(stack, debugger_rules=[debugger_rules.Rule.custom(
        name="Mine", image_uri="123456789012.dkr.ecr.us-west-2.amazonaws.com/rules:1", instance_type="ml.m5.xlarge",
        volume_size_in_gb=20)])
    (mine,) = request(stack)["DebugRuleConfigurations"]
    assert "RuleParameters" not in mine
