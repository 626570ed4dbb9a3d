"""render_debugger_request: the Debugger members of CreateTrainingJob, warnings and action permissions."""

from __future__ import annotations

import subprocess
import sys

import botocore.session
import pytest
from botocore.validate import ParamValidator

from cdk_sagemaker_debugger.model import debugger_rules
from cdk_sagemaker_debugger.model.actions import SMS, ActionList, Email, StopTraining
from cdk_sagemaker_debugger.model.debug_hook import CollectionConfig, DebugHookConfig, TensorBoardOutputConfig
from cdk_sagemaker_debugger.model.debugger_request import render_debugger_request
from cdk_sagemaker_debugger.model.debugger_rules import RulePermissions
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError
from cdk_sagemaker_debugger.model.frameworks import FrameworkInfo
from cdk_sagemaker_debugger.model.profiler_rules import RULE_CLASSES as PROFILER_RULE_CLASSES

OUTPUT = "s3://my-bucket/output"
US_WEST_2_BUILTIN = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"


def render(**kwargs):
    kwargs.setdefault("default_s3_output_path", OUTPUT)
    kwargs.setdefault("region", "us-west-2")
    return render_debugger_request(**kwargs)


def assert_valid_for_the_api(fragment: dict) -> None:
    shape = botocore.session.get_session().get_service_model("sagemaker").operation_model("CreateTrainingJob").input_shape
    request = {
        "TrainingJobName": "my-job",
        "RoleArn": "arn:aws:iam::111122223333:role/training",
        "OutputDataConfig": {"S3OutputPath": OUTPUT},
        **fragment,
    }
    report = ParamValidator().validate(request, shape)
    assert not report.has_errors(), report.generate_report()


class TestFragment:
    def test_nothing_configured_renders_nothing(self):
        result = render()
        assert result.fragment == {}
        assert result.warnings == []
        assert result.permissions == RulePermissions()

    def test_hook_true_is_the_sdk_default_hook(self):
        fragment = render(debug_hook=True).fragment
        assert fragment == {
            "DebugHookConfig": {"S3OutputPath": OUTPUT, "LocalPath": "/opt/ml/output/tensors/", "CollectionConfigurations": []}
        }

    def test_rules_get_a_default_hook_with_their_collections(self):
        fragment = render(rules=[debugger_rules.LossNotDecreasing(), debugger_rules.VanishingGradient()]).fragment
        assert list(fragment) == ["DebugHookConfig", "DebugRuleConfigurations"]
        assert fragment["DebugHookConfig"]["CollectionConfigurations"] == [
            {"CollectionName": "losses", "CollectionParameters": {"save_interval": "500"}},
            {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}},
        ]
        assert [c["RuleConfigurationName"] for c in fragment["DebugRuleConfigurations"]] == ["LossNotDecreasing", "VanishingGradient"]
        assert_valid_for_the_api(fragment)

    def test_full_request_is_valid_for_the_api(self, tmp_path):
        source = tmp_path / "rule.py"
        source.write_text("class Mine: ...\n")
        rules = [
            debugger_rules.LossNotDecreasing(num_steps=20, actions=ActionList(StopTraining(), Email("ml@example.com"))),
            debugger_rules.CreateXgboostReport(),
            debugger_rules.Rule.custom(
                name="Mine", instance_type="ml.m5.xlarge", volume_size_in_gb=20, source=source, rule_to_invoke="Mine",
                parameters={"threshold": 3}, collections_to_save=[CollectionConfig("weights")],
            ),
        ]
        result = render(
            rules=rules,
            debug_hook=DebugHookConfig(hook_parameters={"save_interval": 100}, collection_configs=[CollectionConfig("losses", {"save_interval": 500})]),
            tensorboard=TensorBoardOutputConfig(),
            job_name_prefix="my-job",
            source_uri_for=lambda rule: "s3://assets/rule.py" if rule.is_custom else None,
        )
        assert list(result.fragment) == ["DebugHookConfig", "DebugRuleConfigurations", "TensorBoardOutputConfig"]
        assert [c["CollectionName"] for c in result.fragment["DebugHookConfig"]["CollectionConfigurations"]] == [
            "losses", "metrics", "feature_importance", "hyperparameters", "predictions", "labels", "weights",
        ]
        custom = result.fragment["DebugRuleConfigurations"][2]
        assert custom["RuleEvaluatorImage"] == "759209512951.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rule-evaluator:latest"
        assert custom["RuleParameters"]["source_s3_uri"] == "s3://assets/rule.py"
        assert result.fragment["TensorBoardOutputConfig"]["S3OutputPath"] == "s3://my-bucket/output/my-job/tensorboard-output"
        assert result.permissions == RulePermissions(
            notification_topic=True, stop_training_job_prefixes=("my-job",),
            notification_endpoints=(("email", "ml@example.com"),))
        assert_valid_for_the_api(result.fragment)

    def test_stop_actions_get_the_runs_own_name_as_the_sdk_fills_it_in(self):
        """The SDK sets StopTraining's prefix to the job's own name at fit(); the rule container stops only when exactly
        one running job matches, so a prefix shared by two runs (or by bert-debugger-...) would never stop."""
        rules = [debugger_rules.Overfit(actions=StopTraining()),
                 debugger_rules.StalledTrainingRule(stop_training_on_fire=True)]
        result = render(rules=rules, job_name_prefix="bert", job_name="bert-0123456789abcdef0123",
                        tensorboard=TensorBoardOutputConfig())
        overfit, stalled = result.fragment["DebugRuleConfigurations"]
        assert overfit["RuleParameters"]["action_json"] == (
            '{\\"name\\": \\"stoptraining\\", \\"training_job_prefix\\": \\"bert-0123456789abcdef0123\\"}')
        assert stalled["RuleParameters"]["training_job_name_prefix"] == "bert-0123456789abcdef0123"
        assert result.permissions.stop_training_job_prefixes == ("bert-0123456789abcdef0123",)
        assert result.fragment["TensorBoardOutputConfig"]["S3OutputPath"] == "s3://my-bucket/output/bert/tensorboard-output"

    def test_image_strings_for_environment_agnostic_stacks(self):
        builtin, custom = "${Token[Builtin.1]}", "${Token[Custom.2]}"
        rules = [
            debugger_rules.Overfit(),
            debugger_rules.Rule.custom(name="Mine", instance_type="ml.m5.xlarge", volume_size_in_gb=20, source="s3://b/r.py", rule_to_invoke="Mine"),
        ]
        fragment = render(rules=rules, region=None, builtin_image=builtin, custom_image=custom).fragment
        assert [c["RuleEvaluatorImage"] for c in fragment["DebugRuleConfigurations"]] == [builtin, custom]

    def test_image_callback(self):
        seen = []

        def image_for(rule):
            seen.append(rule.name)
            return f"image-for-{rule.name}"

        fragment = render(rules=[debugger_rules.Overfit(), debugger_rules.DeadRelu()], image_for=image_for).fragment
        assert seen == ["Overfit", "DeadRelu"]
        assert [c["RuleEvaluatorImage"] for c in fragment["DebugRuleConfigurations"]] == ["image-for-Overfit", "image-for-DeadRelu"]

    def test_region_lookup(self):
        fragment = render(rules=[debugger_rules.Overfit()]).fragment
        assert fragment["DebugRuleConfigurations"][0]["RuleEvaluatorImage"] == US_WEST_2_BUILTIN


class TestErrors:
    def test_more_than_20_rules(self):
        rules = [debugger_rules.Overfit(name=f"overfit-{i}") for i in range(21)]
        with pytest.raises(ConfigurationError, match=r"^Job: debugger_rules: has 21 debugger rules; the API allows at most 20"):
            render(rules=rules, where="Job")

    def test_20_rules_are_fine(self):
        rules = [debugger_rules.Overfit(name=f"overfit-{i}") for i in range(20)]
        assert len(render(rules=rules).fragment["DebugRuleConfigurations"]) == 20

    def test_duplicate_names(self):
        with pytest.raises(ConfigurationError, match=r"two debugger rules are named 'Overfit'; .*Give one of them name="):
            render(rules=[debugger_rules.Overfit(), debugger_rules.Overfit(patience=3)])

    def test_profiler_rule_in_the_debugger_list(self):
        profiler_rule = PROFILER_RULE_CLASSES["LowGPUUtilization"]()
        with pytest.raises(ConfigurationTypeError, match=r"item 0 \(LowGPUUtilization\) is a profiler rule; add it to the job's ProfilerRuleSet \(rule_set=\)"):
            render(rules=[profiler_rule])

    def test_not_a_rule(self):
        with pytest.raises(ConfigurationTypeError, match=r"item 1 is str 'Overfit'"):
            render(rules=[debugger_rules.Overfit(), "Overfit"])
        with pytest.raises(ConfigurationTypeError, match=r"Wrap a single rule as \[rule\]"):
            render(rules=debugger_rules.Overfit())

    def test_hook_off_with_rules(self):
        with pytest.raises(ConfigurationError, match=r"debug_hook: debug_hook=False turns off the hook"):
            render(rules=[debugger_rules.Overfit()], debug_hook=False)
        assert render(debug_hook=False).fragment == {}

    def test_bad_hook_and_tensorboard_types(self):
        with pytest.raises(ConfigurationTypeError, match=r"debug_hook: expected a DebugHookConfig, True, False or None, got dict"):
            render(debug_hook={"S3OutputPath": OUTPUT})
        with pytest.raises(ConfigurationTypeError, match=r"tensorboard: expected a TensorBoardOutputConfig, got str"):
            render(tensorboard="s3://b/tb")

    def test_rule_and_hook_disagree_on_a_collection(self):
        hook = DebugHookConfig(collection_configs=[CollectionConfig("losses", {"save_interval": "50"})])
        with pytest.raises(ConfigurationError) as raised:
            render(rules=[debugger_rules.LossNotDecreasing()], debug_hook=hook, where="Stack/Job")
        message = str(raised.value)
        assert "rule 'LossNotDecreasing' ({'save_interval': '500'})" in message
        assert "debug_hook ({'save_interval': '50'})" in message

    def test_two_rules_disagree_on_a_collection(self):
        rules = [
            debugger_rules.VanishingGradient(),
            debugger_rules.Rule.custom(
                name="GradientWatch", instance_type="ml.m5.xlarge", volume_size_in_gb=20, source="s3://b/r.py", rule_to_invoke="W",
                collections_to_save=[CollectionConfig("gradients", {"save_interval": "10"})],
            ),
        ]
        with pytest.raises(ConfigurationError, match=r"requested with different parameters by rule 'VanishingGradient' .* and by rule 'GradientWatch'"):
            render(rules=rules)

    def test_rule_errors_carry_the_construct_path(self):
        rule = debugger_rules.Overfit(actions=StopTraining())
        with pytest.raises(ConfigurationError, match=r"^Stack/Job > rule 'Overfit': actions: StopTraining\(\) without a prefix"):
            render(rules=[rule], where="Stack/Job")


class TestWarningsAndPermissions:
    def test_framework_scope_warnings(self):
        rules = [debugger_rules.TreeDepth(), debugger_rules.LossNotDecreasing(), debugger_rules.VanishingGradient()]
        warnings = render(rules=rules, framework=FrameworkInfo("xgboost", (1, 7))).warnings
        assert warnings == [
            "rule 'VanishingGradient': VanishingGradient applies to deep learning (TensorFlow, MXNet, PyTorch) training, "
            "but the training image is xgboost; the rule will probably find no tensors to check."
        ]

    def test_hook_warnings_are_returned(self):
        hook = DebugHookConfig(hook_parameters={"save_intervals": 10})
        warnings = render(debug_hook=hook).warnings
        assert len(warnings) == 1 and "'save_intervals'" in warnings[0]

    def test_permissions_are_merged_across_rules(self):
        rules = [
            debugger_rules.Overfit(actions=SMS("+15555550100")),
            debugger_rules.LossNotDecreasing(actions=ActionList(StopTraining(), StopTraining("Shared-Prefix"))),
            debugger_rules.StalledTrainingRule(stop_training_on_fire=True),
        ]
        permissions = render(rules=rules, job_name_prefix="Job-A").permissions
        assert permissions.notification_topic
        assert permissions.stop_training_job_prefixes == ("Job-A", "Shared-Prefix")
        assert permissions.training_job_name_patterns() == ("job-a*", "shared-prefix*")
        assert RulePermissions.TOPIC_NAME == "SMDebugRules"


def test_the_model_layer_imports_neither_aws_cdk_nor_boto3():
    modules = ["actions", "debug_hook", "debugger_rules", "debugger_request", "distribution"]
    code = (
        "import sys\n"
        + "".join(f"import cdk_sagemaker_debugger.model.{name}\n" for name in modules)
        + "import cdk_sagemaker_debugger.debugger_rules\n"
        + "print(sorted(m for m in ('aws_cdk', 'jsii', 'boto3') if m in sys.modules))"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"
