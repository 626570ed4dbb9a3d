"""Built-in and custom debugger rules against the SDK's recorded outputs, with the documented fixes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import botocore.session
import pytest
from botocore.validate import ParamValidator

from cdk_sagemaker_debugger import debugger_rules as public_debugger_rules
from cdk_sagemaker_debugger.model import debugger_rules
from cdk_sagemaker_debugger.model.actions import SMS, ActionList, Email, StopTraining
from cdk_sagemaker_debugger.model.debug_hook import CollectionConfig
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError, UnsupportedRegionError

SDK = json.loads((Path(__file__).parents[1] / "data" / "sdk_debugger_rules.json").read_text())
REGION = SDK["region"]

# The rule list of seed 001 (R sagemaker.debugger reference), in its order.
SEED_RULE_FUNCTIONS = (
    "vanishing_gradient similar_across_runs weight_update_ratio all_zero exploding_tensor unchanged_tensor "
    "loss_not_decreasing check_input_images dead_relu confusion tree_depth class_imbalance overfit tensor_variance "
    "overtraining poor_weight_initialization saturated_activation nlp_sequence_ratio stalled_training_rule "
    "feature_importance_overweight create_xgboost_report"
).split()


def with_string_parameters(config: dict) -> dict:
    """The documented fix applied to an SDK capture: every RuleParameters value as str()."""
    fixed = copy.deepcopy(config)
    fixed["RuleParameters"] = {key: str(value) for key, value in fixed["RuleParameters"].items()}
    return fixed


def builtin(function_name: str, **kwargs) -> debugger_rules.BuiltinRule:
    extra = {"other_trials": SDK["builtin_rules"][function_name].get("other_trials")}
    return debugger_rules.from_name(function_name, **{k: v for k, v in extra.items() if v}, **kwargs)


def api_problems(**members) -> str | None:
    shape = botocore.session.get_session().get_service_model("sagemaker").operation_model("CreateTrainingJob").input_shape
    request = {
        "TrainingJobName": "my-job",
        "RoleArn": "arn:aws:iam::111122223333:role/training",
        "OutputDataConfig": {"S3OutputPath": "s3://my-bucket/output"},
        **members,
    }
    report = ParamValidator().validate(request, shape)
    return report.generate_report() if report.has_errors() else None


class TestCatalog:
    def test_the_21_rules_of_the_seed(self):
        assert [spec.function_name for spec in debugger_rules.DEBUGGER_RULE_SPECS.values()] == SEED_RULE_FUNCTIONS
        assert sorted(SDK["builtin_rules"]) == sorted(SEED_RULE_FUNCTIONS)

    def test_public_module_exposes_every_rule_class(self):
        for spec in debugger_rules.DEBUGGER_RULE_SPECS.values():
            assert getattr(public_debugger_rules, spec.name) is debugger_rules.RULE_CLASSES[spec.name]
        assert public_debugger_rules.Rule is debugger_rules.Rule

    def test_scopes_follow_the_documentation_table(self):
        scope_of = {spec.function_name: spec.scope for spec in debugger_rules.DEBUGGER_RULE_SPECS.values()}
        assert {name for name, scope in scope_of.items() if scope is debugger_rules.XGBOOST} == {
            "confusion",
            "feature_importance_overweight",
            "tree_depth",
        }
        assert {name for name, scope in scope_of.items() if scope is debugger_rules.DEEP_LEARNING} == {
            "dead_relu",
            "exploding_tensor",
            "poor_weight_initialization",
            "saturated_activation",
            "vanishing_gradient",
            "weight_update_ratio",
        }
        assert {name for name, scope in scope_of.items() if scope is debugger_rules.DEEP_LEARNING_APPLICATIONS} == {
            "check_input_images",
            "nlp_sequence_ratio",
        }
        assert scope_of["create_xgboost_report"] is debugger_rules.XGBOOST_REPORT

    def test_documentation_table_lists_every_rule_and_parameter(self):
        text = (Path(__file__).parents[2] / "docs" / "debugger-rules.md").read_text()
        rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `")}
        for spec in debugger_rules.DEBUGGER_RULE_SPECS.values():
            row = rows[f"`{spec.name}`"]
            assert f"| `{spec.function_name}` |" in row
            for parameter in spec.parameters:
                assert f"`{parameter.name}`" in row, (spec.name, parameter.name)
            for collection in spec.collections:
                assert f"`{collection.name}`" in row, (spec.name, collection.name)

    def test_docstrings_list_parameters_and_sdk_names(self):
        doc = debugger_rules.RULE_CLASSES["LossNotDecreasing"].__doc__
        assert "rule_configs.loss_not_decreasing()" in doc
        assert "mode (str, default 'GLOBAL')" in doc
        assert "diff_percent (float, default 0.1)" in doc


class TestRecordedSdkOutputs:
    @pytest.mark.parametrize("function_name", SEED_RULE_FUNCTIONS)
    def test_rule_configuration_matches_the_sdk(self, function_name):
        recorded = SDK["builtin_rules"][function_name]["rule_configuration"]
        rendered = builtin(function_name).to_rule_configuration(region=REGION)
        assert rendered == with_string_parameters(recorded)
        assert list(rendered) == list(recorded)
        assert list(rendered["RuleParameters"]) == list(recorded["RuleParameters"])

    @pytest.mark.parametrize("function_name", SEED_RULE_FUNCTIONS)
    def test_collections_match_rulesconfig_in_order(self, function_name):
        recorded = SDK["builtin_rules"][function_name]["collections"]
        assert [c.to_request() for c in builtin(function_name).collections] == recorded

    def test_loss_not_decreasing_with_actions_and_the_int_fix(self):
        recorded = SDK["examples"]["loss_not_decreasing_with_actions"]["rule_configuration"]
        rule = debugger_rules.LossNotDecreasing(
            tensor_regex=".*loss",
            num_steps=10,
            use_losses_collection=True,
            actions=ActionList(StopTraining(), Email("abc@example.com"), SMS("+15555550100")),
        )
        rendered = rule.to_rule_configuration(region=REGION, job_name_prefix="my-job")
        assert rendered == with_string_parameters(recorded)
        assert rendered["RuleParameters"]["num_steps"] == "10"
        assert rendered["RuleParameters"]["action_json"] == recorded["RuleParameters"]["action_json"]
        assert list(rendered["RuleParameters"]) == list(recorded["RuleParameters"])

    def test_the_sdk_capture_fails_botocore_and_ours_passes(self):
        recorded = SDK["examples"]["loss_not_decreasing_with_actions"]["rule_configuration"]
        problems = api_problems(DebugRuleConfigurations=[recorded])
        assert problems is not None and "RuleParameters.num_steps" in problems
        ours = debugger_rules.LossNotDecreasing(num_steps=10, use_losses_collection=True)
        assert api_problems(DebugRuleConfigurations=[ours.to_rule_configuration(region=REGION)]) is None

    def test_all_rules_with_every_parameter_pass_botocore(self):
        configs = []
        for spec in debugger_rules.DEBUGGER_RULE_SPECS.values():
            given = {p.name: p.default for p in spec.parameters if p.default is not None}
            rule = builtin(spec.function_name, **given)
            configs.append(rule.to_rule_configuration(region=REGION))
            assert all(isinstance(value, str) for value in configs[-1]["RuleParameters"].values())
        assert api_problems(DebugRuleConfigurations=configs[:20]) is None
        assert api_problems(DebugRuleConfigurations=configs[20:]) is None

    def test_custom_rule_matches_the_sdk(self):
        example = SDK["examples"]["custom_rule"]
        rule = debugger_rules.Rule.custom(
            name="MyCustomRule",
            instance_type="ml.t3.medium",
            volume_size_in_gb=30,
            source="s3://my-bucket/rules/my_rule.py",
            rule_to_invoke="CustomGradientRule",
            local_path="/opt/ml/processing/output/rule",
            s3_output_path="s3://my-bucket/rule-output",
            other_trials=["s3://b/t1"],
            parameters={"threshold": 20.0},
            collections_to_save=[CollectionConfig("gradients")],
            actions=ActionList(StopTraining("other-prefix")),
        )
        rendered = rule.to_rule_configuration(region=REGION, job_name_prefix="my-job")
        assert rendered == example["rule_configuration"]
        assert list(rendered) == list(example["rule_configuration"])
        assert list(rendered["RuleParameters"]) == list(example["rule_configuration"]["RuleParameters"])
        assert [c.to_request() for c in rule.collections] == example["collections"]


class TestRendering:
    def test_issue_contract(self):
        rule = public_debugger_rules.LossNotDecreasing(
            num_steps=20, mode="TRAIN", actions=ActionList(StopTraining(), Email("ml-team@example.com"))
        )
        config = rule.to_rule_configuration(region="us-west-2", job_name_prefix="training")
        assert config["RuleParameters"] == {
            "rule_to_invoke": "LossNotDecreasing",
            "num_steps": "20",
            "mode": "TRAIN",
            "action_json": r'[{\"name\": \"stoptraining\", \"training_job_prefix\": \"training\"}, '
            r'{\"endpoint\": \"ml-team@example.com\", \"name\": \"email\"}]',
        }
        assert rule.collections == (CollectionConfig("losses", {"save_interval": "500"}),)

    def test_image_uri_overrides_the_region_lookup(self):
        token = "${Token[TOKEN.42]}"
        config = debugger_rules.VanishingGradient().to_rule_configuration(image_uri=token)
        assert config["RuleEvaluatorImage"] == token

    def test_region_or_image_is_required(self):
        with pytest.raises(ConfigurationError, match=r"rule 'VanishingGradient': region: needs region="):
            debugger_rules.VanishingGradient().to_rule_configuration()

    def test_unsupported_region_is_an_error(self):
        with pytest.raises(UnsupportedRegionError, match="ap-southeast-3"):
            debugger_rules.VanishingGradient().to_rule_configuration(region="ap-southeast-3")

    def test_china_uses_the_china_suffix(self):
        config = debugger_rules.VanishingGradient().to_rule_configuration(region="cn-north-1")
        assert config["RuleEvaluatorImage"] == "618459771430.dkr.ecr.cn-north-1.amazonaws.com.cn/sagemaker-debugger-rules:latest"

    def test_name_sets_rule_configuration_name(self):
        config = debugger_rules.Overfit(name="overfit-validation").to_rule_configuration(region=REGION)
        assert config["RuleConfigurationName"] == "overfit-validation"
        assert config["RuleParameters"]["rule_to_invoke"] == "Overfit"

    def test_values_are_strings_in_python_notation(self):
        rule = debugger_rules.UnchangedTensor(num_steps=4, rtol=1e-05, equal_nan=True, tensor_regex=".*")
        params = rule.to_rule_configuration(region=REGION)["RuleParameters"]
        assert params == {"rule_to_invoke": "UnchangedTensor", "num_steps": "4", "rtol": "1e-05", "equal_nan": "True", "tensor_regex": ".*"}

    def test_none_means_not_sent(self):
        params = debugger_rules.TensorVariance(max_threshold=None).to_rule_configuration(region=REGION)["RuleParameters"]
        assert params == {"rule_to_invoke": "TensorVariance"}

    def test_local_and_s3_output_paths(self):
        rule = debugger_rules.Overtraining(local_path="/opt/ml/processing/output/rule", s3_output_path="s3://b/rules")
        config = rule.to_rule_configuration(region=REGION)
        assert list(config) == ["RuleConfigurationName", "RuleEvaluatorImage", "LocalPath", "S3OutputPath", "RuleParameters"]

    def test_collections_to_save_replaces_the_builtin_collections(self):
        mine = [CollectionConfig("losses", {"save_interval": "50"})]
        assert debugger_rules.LossNotDecreasing(collections_to_save=mine).collections == tuple(mine)

    def test_unresolved_tokens_skip_validation_and_pass_through(self):
        token = -1.8881545897087626e289
        params = debugger_rules.LossNotDecreasing(num_steps=token).to_rule_configuration(region=REGION)["RuleParameters"]
        # a number token is sent in its string form: RuleParameters are strings, and CDK resolves the text of a number
        # token inside a string (a JSON number here would be refused by SageMaker)
        assert params["num_steps"] == str(token)

    def test_nlp_token_lists_are_comma_joined(self):
        rule = debugger_rules.NLPSequenceRatio(token_values=[0, 1], token_thresholds_percent=[50, 20.5])
        params = rule.to_rule_configuration(region=REGION)["RuleParameters"]
        assert params["token_values"] == "0,1"
        assert params["token_thresholds_percent"] == "50,20.5"


class TestParameterValidation:
    @pytest.mark.parametrize(
        ("rule", "kwargs", "error", "message"),
        [
            ("LossNotDecreasing", {"num_step": 5}, ConfigurationTypeError, r"num_step: unknown parameter 'num_step'\. Did you mean 'num_steps'\?"),
            ("LossNotDecreasing", {"mode": "train"}, ConfigurationError, r"mode: must be one of 'GLOBAL', 'TRAIN', 'EVAL', got 'train'\. Did you mean 'TRAIN'\?"),
            ("LossNotDecreasing", {"num_steps": 0}, ConfigurationError, r"num_steps: must be a positive integer \(> 0\), got 0"),
            ("LossNotDecreasing", {"num_steps": "10"}, ConfigurationTypeError, r"num_steps: expected a positive integer, got str '10'"),
            ("LossNotDecreasing", {"diff_percent": 100}, ConfigurationError, r"diff_percent: is a percentage strictly between 0 and 100, got 100"),
            ("LossNotDecreasing", {"use_losses_collection": "True"}, ConfigurationTypeError, r"use_losses_collection: expected True or False, got str 'True'"),
            ("AllZero", {"threshold": 101}, ConfigurationError, r"threshold: is a percentage and must be between 0 and 100"),
            ("AllZero", {"tensor_regex": "(*"}, ConfigurationError, r"tensor_regex: '\(\*' is not a valid regular expression"),
            ("Confusion", {"category_no": 1}, ConfigurationError, r"category_no: must be an integer >= 2, got 1"),
            ("Confusion", {"min_diag": 90}, ConfigurationError, r"min_diag: is a proportion between 0 and 1 .* Did you mean 0\.9"),
            ("Overfit", {"start_step": -1}, ConfigurationError, r"start_step: must be an integer >= 0, got -1"),
            ("UnchangedTensor", {"atol": -1e-3}, ConfigurationError, r"atol: must be 0 or greater"),
            ("SaturatedActivation", {"threshold_tanh_min": float("nan")}, ConfigurationError, r"threshold_tanh_min: must be a finite number"),
            ("VanishingGradient", {"threshold": 0}, ConfigurationError, r"threshold: must be greater than 0, got 0"),
            ("Confusion", {"labels": ""}, ConfigurationTypeError, r"labels: expected a non-empty string"),
            ("NLPSequenceRatio", {"token_thresholds_percent": "50,150"}, ConfigurationError, r"token_thresholds_percent: every item is a percentage between 0 and 100, got '150'"),
            ("NLPSequenceRatio", {"token_values": "0,,1"}, ConfigurationError, r"token_values: must list one or more values"),
            ("NLPSequenceRatio", {"token_values": "0,1"}, ConfigurationError, r"token_thresholds_percent: token_values \('0,1'\) and token_thresholds_percent \('50'\) need one threshold per token value"),
            ("TensorVariance", {"min_threshold": 5, "max_threshold": 1}, ConfigurationError, r"min_threshold: min_threshold \(5\) must be lower than max_threshold \(1\)"),
            ("SaturatedActivation", {"threshold_sigmoid_min": 20, "threshold_sigmoid_max": 10}, ConfigurationError, r"threshold_sigmoid_min: threshold_sigmoid_min \(20\) must be lower than threshold_sigmoid_max \(10\)"),
            ("SaturatedActivation", {"threshold_sigmoid_min": 20}, ConfigurationError, r"threshold_sigmoid_min: threshold_sigmoid_min \(20\) must be lower than threshold_sigmoid_max \(16\.99999, the default\)"),
            ("SaturatedActivation", {"threshold_sigmoid_min": 10}, None, None),
            ("StalledTrainingRule", {"training_job_name_prefix": "job"}, ConfigurationError, r"training_job_name_prefix: training_job_name_prefix only matters with stop_training_on_fire=True"),
            ("TreeDepth", {"rule_to_invoke": "Other"}, ConfigurationError, r"rule_to_invoke: a built-in rule always invokes itself; .*Rule\.custom"),
        ],
    )
    def test_bad_values_name_the_rule_field_value_and_fix(self, rule, kwargs, error, message):
        cls = debugger_rules.RULE_CLASSES[rule]
        if error is None:
            cls(**kwargs)
            return
        with pytest.raises(error, match=rf"^rule '{rule}': " + message):
            cls(**kwargs)

    def test_validation_errors_are_value_errors_not_asserts(self):
        with pytest.raises(ValueError):
            debugger_rules.AllZero(threshold=-1)

    def test_similar_across_runs_needs_other_trials(self):
        with pytest.raises(ConfigurationError, match=r"rule 'SimilarAcrossRuns': other_trials: needs other_trials="):
            debugger_rules.SimilarAcrossRuns()

    def test_other_trials_must_be_s3_uris(self):
        with pytest.raises(ConfigurationError, match=r"other_trials: every item must be an S3 URI .* got '/local/path'"):
            debugger_rules.SimilarAcrossRuns(other_trials=["/local/path"])
        with pytest.raises(ConfigurationTypeError, match=r"other_trials: expected a list"):
            debugger_rules.SimilarAcrossRuns(other_trials="s3://b/x")

    def test_other_trials_on_a_rule_that_ignores_them(self):
        with pytest.raises(ConfigurationError, match=r"rule 'Overfit': other_trials: Overfit does not compare runs"):
            debugger_rules.Overfit(other_trials=["s3://b/x"])

    def test_collections_to_save_must_be_collection_configs(self):
        with pytest.raises(ConfigurationTypeError, match=r"collections_to_save: expected CollectionConfig items, got str 'losses'"):
            debugger_rules.Overfit(collections_to_save=["losses"])

    def test_rule_name_length(self):
        with pytest.raises(ConfigurationError, match=r"RuleConfigurationName must be 1 to 256 characters"):
            debugger_rules.Overfit(name="x" * 257)

    def test_from_name_accepts_class_and_sdk_names_and_suggests(self):
        assert type(debugger_rules.from_name("DeadRelu")) is debugger_rules.RULE_CLASSES["DeadRelu"]
        assert type(debugger_rules.from_name("dead_relu")) is debugger_rules.RULE_CLASSES["DeadRelu"]
        with pytest.raises(ConfigurationError, match=r"unknown debugger rule 'DeadRelus'\. Did you mean 'DeadRelu'\?"):
            debugger_rules.from_name("DeadRelus")


class TestActions:
    def test_single_email_works_where_the_sdk_crashes(self):
        config = debugger_rules.Overfit(actions=Email("abc@example.com")).to_rule_configuration(region=REGION)
        assert config["RuleParameters"]["action_json"] == r'{\"endpoint\": \"abc@example.com\", \"name\": \"email\"}'

    def test_python_list_is_rejected_with_a_hint(self):
        with pytest.raises(ConfigurationTypeError, match=r"rule 'Overfit': actions: .*Wrap the items as ActionList"):
            debugger_rules.Overfit(actions=[Email("abc@example.com")])

    def test_stop_training_without_a_job_prefix(self):
        rule = debugger_rules.Overfit(actions=StopTraining())
        with pytest.raises(ConfigurationError, match=r"rule 'Overfit': actions: StopTraining\(\) without a prefix .*job_name_prefix="):
            rule.to_rule_configuration(region=REGION)

    def test_action_json_over_256_characters(self):
        prefix = "p" * 63
        actions = ActionList(StopTraining(prefix), StopTraining(), Email("abc@example.com"), SMS("+15555550100"), StopTraining(prefix))
        rule = debugger_rules.Overfit(actions=actions)
        with pytest.raises(ConfigurationError, match=r"rule 'Overfit': actions: the actions serialize to \d+ characters, but the API allows at most 256"):
            rule.to_rule_configuration(region=REGION, job_name_prefix=prefix)

    def test_the_sdk_example_fits(self):
        actions = ActionList(StopTraining(), Email("abc@example.com"), SMS("+15555550100"))
        config = debugger_rules.Overfit(actions=actions).to_rule_configuration(region=REGION, job_name_prefix="my-job")
        assert len(config["RuleParameters"]["action_json"]) == 178

    def test_rendering_does_not_change_the_rule(self):
        rule = debugger_rules.Overfit(actions=ActionList(StopTraining()))
        rule.to_rule_configuration(region=REGION, job_name_prefix="job-a")
        second = rule.to_rule_configuration(region=REGION, job_name_prefix="job-b")
        assert "job-b" in second["RuleParameters"]["action_json"]
        assert "job-a" not in second["RuleParameters"]["action_json"]

    def test_permissions(self):
        rule = debugger_rules.Overfit(actions=ActionList(StopTraining(), SMS("+15555550100"), StopTraining("Other-Job")))
        permissions = rule.permissions(job_name_prefix="My-Job")
        assert permissions.notification_topic
        assert permissions.stop_training_job_prefixes == ("My-Job", "Other-Job")
        assert permissions.training_job_name_patterns() == ("my-job*", "other-job*")
        assert not debugger_rules.Overfit().permissions().stops_training

    def test_stalled_training_rule_stops_the_job(self):
        rule = debugger_rules.StalledTrainingRule(threshold=600, stop_training_on_fire=True)
        params = rule.to_rule_configuration(region=REGION, job_name_prefix="my-job")["RuleParameters"]
        assert params == {
            "rule_to_invoke": "StalledTrainingRule",
            "threshold": "600",
            "stop_training_on_fire": "True",
            "training_job_name_prefix": "my-job",
        }
        assert rule.permissions(job_name_prefix="my-job").stop_training_job_prefixes == ("my-job",)
        with pytest.raises(ConfigurationError, match=r"stop_training_on_fire=True needs the name prefix"):
            rule.to_rule_configuration(region=REGION)


class TestCustomRules:
    def custom(self, **overrides):
        kwargs = {
            "name": "MyRule",
            "instance_type": "ml.m5.xlarge",
            "volume_size_in_gb": 30,
            "source": "s3://bucket/rules/my_rule.py",
            "rule_to_invoke": "MyRule",
        }
        kwargs.update(overrides)
        return debugger_rules.Rule.custom(**kwargs)

    def test_defaults_to_the_custom_evaluator_image_of_the_region(self):
        config = self.custom().to_rule_configuration(region="eu-west-1")
        assert config["RuleEvaluatorImage"] == "606966180310.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-debugger-rule-evaluator:latest"

    def test_own_image_wins(self):
        rule = self.custom(image_uri="111122223333.dkr.ecr.us-east-1.amazonaws.com/my-rules:1", source=None, rule_to_invoke=None)
        config = rule.to_rule_configuration(image_uri="ignored")
        assert config["RuleEvaluatorImage"] == "111122223333.dkr.ecr.us-east-1.amazonaws.com/my-rules:1"
        assert "RuleParameters" not in config

    def test_no_custom_evaluator_in_ap_northeast_3(self):
        with pytest.raises(UnsupportedRegionError, match=r"rule 'MyRule': region: no custom rule image is published for region 'ap-northeast-3'"):
            self.custom().to_rule_configuration(region="ap-northeast-3")

    @pytest.mark.parametrize(("missing", "present"), [("rule_to_invoke", "source"), ("source", "rule_to_invoke")])
    def test_source_and_rule_to_invoke_go_together(self, missing, present):
        with pytest.raises(ConfigurationError, match=rf"rule 'MyRule': {missing}: source and rule_to_invoke go together.* {missing} is missing"):
            self.custom(**{missing: None})

    def test_needs_source_or_image(self):
        with pytest.raises(ConfigurationError, match=r"needs source= and rule_to_invoke=.*or image_uri="):
            self.custom(source=None, rule_to_invoke=None)

    def test_local_source_is_kept_for_the_construct_to_upload(self, tmp_path):
        source = tmp_path / "my_rule.py"
        source.write_text("class MyRule: ...\n")
        rule = self.custom(source=source)
        assert rule.source == str(source)
        assert rule.has_local_source
        with pytest.raises(ConfigurationError, match=r"is a local file; upload it and pass source_s3_uri="):
            rule.to_rule_configuration(region=REGION)
        config = rule.to_rule_configuration(region=REGION, source_s3_uri="s3://assets/abc.py")
        assert config["RuleParameters"]["source_s3_uri"] == "s3://assets/abc.py"

    def test_missing_local_source(self, tmp_path):
        with pytest.raises(ConfigurationError, match=r"source: file .*nope\.py' does not exist"):
            self.custom(source=str(tmp_path / "nope.py"))

    def test_source_must_be_python(self):
        with pytest.raises(ConfigurationError, match=r"source: must be a Python file \(\.py\) or an s3:// URI, got 'rule.txt'"):
            self.custom(source="rule.txt")

    def test_instance_type_is_checked_against_the_api_enum(self):
        with pytest.raises(ConfigurationError, match=r"instance_type: 'ml.m5.xlarg' is not a SageMaker processing instance type\. Did you mean 'ml.m5.xlarge'\?"):
            self.custom(instance_type="ml.m5.xlarg")

    @pytest.mark.parametrize(("size", "error"), [(0, ConfigurationError), ("30", ConfigurationTypeError), (16385, ConfigurationError)])
    def test_volume_size(self, size, error):
        with pytest.raises(error, match=r"volume_size_in_gb: "):
            self.custom(volume_size_in_gb=size)

    @pytest.mark.parametrize(
        ("key", "argument"),
        [("rule_to_invoke", "rule_to_invoke"), ("source_s3_uri", "source"), ("action_json", "actions"), ("other_trial_0", "other_trials")],
    )
    def test_reserved_rule_parameters(self, key, argument):
        with pytest.raises(ConfigurationError, match=rf"parameters.{key}: '{key}' is set by the library; pass it as the {argument}= argument"):
            self.custom(parameters={key: "x"})

    def test_rule_parameter_values_must_be_scalars(self):
        with pytest.raises(ConfigurationTypeError, match=r"parameters.layers: expected a string, number or boolean"):
            self.custom(parameters={"layers": [1, 2]})

    def test_custom_rules_have_no_scope_warning(self):
        assert self.custom().framework_warning("xgboost") is None


class TestFrameworkScope:
    @pytest.mark.parametrize(
        ("rule", "framework", "warns"),
        [
            ("TreeDepth", "pytorch", True),
            ("TreeDepth", "xgboost", False),
            ("FeatureImportanceOverweight", "tensorflow", True),
            ("VanishingGradient", "xgboost", True),
            ("CheckInputImages", "xgboost", True),
            ("LossNotDecreasing", "xgboost", False),
            ("LossNotDecreasing", "mxnet", False),
            ("CreateXgboostReport", "pytorch", True),
            ("VanishingGradient", None, False),
        ],
    )
    def test_warning_when_the_image_says_another_framework(self, rule, framework, warns):
        warning = debugger_rules.RULE_CLASSES[rule]().framework_warning(framework)
        if warns:
            assert warning is not None
            assert warning.startswith(f"rule '{rule}': {rule} applies to ")
            assert f"the training image is {framework}" in warning
        else:
            assert warning is None
