"""Profiler rule catalog: SDK parity of the rendered configurations and validation with clear messages."""

from __future__ import annotations

import pytest

from cdk_sagemaker_debugger import ActionList, Email, StopTraining, rules
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError
from cdk_sagemaker_debugger.model.profiler_catalog import PROFILER_RULE_SPECS

BUILTIN_NAMES = [
    "BatchSize", "CPUBottleneck", "Dataloader", "GPUMemoryIncrease", "IOBottleneck", "LoadBalancing",
    "LowGPUUtilization", "MaxInitializationTime", "OverallFrameworkMetrics", "OverallSystemUsage", "StepOutlier",
]


def test_catalog_has_every_builtin_rule_and_profiler_report():
    assert sorted(PROFILER_RULE_SPECS) == sorted(BUILTIN_NAMES)
    for name in [*BUILTIN_NAMES, "ProfilerReport"]:
        assert isinstance(getattr(rules, name)(), rules.ProfilerRule)


def test_rendering_matches_recorded_sdk_output(sdk_profiler_data):
    for case in sdk_profiler_data["cases"]:
        rule = getattr(rules, case["rule"])(**case["kwargs"])
        rendered = rule.to_rule_configuration(region=case["region"])
        assert rendered == case["expected"], case["id"]
        assert list(rendered) == list(case["expected"]), f"key order differs for {case['id']}"
        assert list(rendered["RuleParameters"]) == list(case["expected"]["RuleParameters"]), case["id"]


def test_custom_rule_matches_recorded_sdk_output(sdk_profiler_data):
    case = sdk_profiler_data["custom_rule"]
    rule = rules.ProfilerRule.custom(source=case["source_s3_uri"], **case["kwargs"])
    rendered = rule.to_rule_configuration(region="us-west-2")
    assert rendered == case["expected"]
    assert list(rendered) == list(case["expected"])
    assert list(rendered["RuleParameters"]) == list(case["expected"]["RuleParameters"])


@pytest.mark.parametrize(
    ("rule", "kwargs", "parameters"),
    [
        ("BatchSize", {"patience": 100, "window": 250}, {"patience": "100", "window": "250", "cpu_threshold_p95": "70"}),
        ("CPUBottleneck", {"threshold": 90, "cpu_threshold": 95.5}, {"threshold": "90", "cpu_threshold": "95.5"}),
        ("Dataloader", {"min_threshold": 10, "max_threshold": 300}, {"min_threshold": "10", "max_threshold": "300"}),
        ("GPUMemoryIncrease", {"increase": 10, "window": 500}, {"increase": "10", "window": "500"}),
        ("IOBottleneck", {"io_threshold": 80}, {"io_threshold": "80", "gpu_threshold": "10"}),
        ("LoadBalancing", {"threshold": 0.2}, {"threshold": "0.2", "patience": "1000"}),
        ("LowGPUUtilization", {"threshold_p95": 80, "threshold_p5": 0}, {"threshold_p95": "80", "threshold_p5": "0"}),
        ("MaxInitializationTime", {"threshold": 30}, {"threshold": "30"}),
        ("OverallFrameworkMetrics", {"scan_interval_us": 1000}, {"scan_interval_us": "1000"}),
        ("OverallSystemUsage", {"scan_interval_us": 30000000}, {"scan_interval_us": "30000000"}),
        ("StepOutlier", {"stddev": 5, "mode": "TRAIN"}, {"stddev": "5", "mode": "TRAIN", "n_outliers": "10"}),
    ],
)
def test_overrides_are_rendered_as_strings(rule, kwargs, parameters):
    config = getattr(rules, rule)(**kwargs).to_rule_configuration(region="eu-west-1")
    for key, value in parameters.items():
        assert config["RuleParameters"][key] == value
    assert config["RuleParameters"]["rule_to_invoke"] == rule
    assert list(config["RuleParameters"])[-1] == "rule_to_invoke"
    assert "InstanceType" not in config and "VolumeSizeInGB" not in config
    assert config["RuleEvaluatorImage"] == "929884845733.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-debugger-rules:latest"


def test_name_sets_rule_configuration_name():
    config = rules.LowGPUUtilization(name="gpu-low", threshold_p95=80).to_rule_configuration(region="us-west-2")
    assert config["RuleConfigurationName"] == "gpu-low"


def test_image_uri_overrides_region_lookup():
    config = rules.BatchSize().to_rule_configuration(image_uri="${Token[TOKEN.1]}")
    assert config["RuleEvaluatorImage"] == "${Token[TOKEN.1]}"


def test_rendering_needs_region_or_image():
    with pytest.raises(ConfigurationError, match="needs region="):
        rules.BatchSize().to_rule_configuration()


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: rules.BatchSize(cpu_threshold_p95=101), ConfigurationError,
         r"rule 'BatchSize': cpu_threshold_p95: is a percentage and must be between 0 and 100 inclusive, got 101"),
        (lambda: rules.BatchSize(cpu_threshold_p95=-1), ConfigurationError, r"between 0 and 100 inclusive, got -1"),
        (lambda: rules.BatchSize(patience=0), ConfigurationError, r"patience: must be a positive integer \(> 0\), got 0"),
        (lambda: rules.BatchSize(patience=0.5), ConfigurationTypeError, r"patience: expected a positive integer, got float 0.5"),
        (lambda: rules.BatchSize(patience="10"), ConfigurationTypeError, r"patience: expected a positive integer, got str '10'"),
        (lambda: rules.CPUBottleneck(threshold="90"), ConfigurationTypeError,
         r"threshold: expected a number, got str '90'. Pass it unquoted, e.g. threshold=50"),
        (lambda: rules.CPUBottleneck(threshold=True), ConfigurationTypeError, r"expected a number, got bool True"),
        (lambda: rules.CPUBottleneck(threshold=float("nan")), ConfigurationError, r"must be a finite number"),
        (lambda: rules.LowGPUUtilization(thresold_p95=3), ConfigurationTypeError,
         r"unknown parameter 'thresold_p95'. Did you mean 'threshold_p95'\? Accepted: threshold_p95, threshold_p5"),
        (lambda: rules.StepOutlier(mode=1), ConfigurationTypeError, r"mode: expected one of 'TRAIN', 'EVAL'"),
        (lambda: rules.StepOutlier(mode="TRIAN"), ConfigurationError, r"must be one of .* got 'TRIAN'. Did you mean 'TRAIN'\?"),
        (lambda: rules.StepOutlier(stddev=0), ConfigurationError, r"stddev: must be greater than 0, got 0"),
        (lambda: rules.MaxInitializationTime(threshold=0), ConfigurationError, r"threshold: must be greater than 0"),
        (lambda: rules.GPUMemoryIncrease(increase=0), ConfigurationError, r"increase: must be greater than 0"),
        (lambda: rules.Dataloader(max_threshold=0), ConfigurationError, r"max_threshold: must be greater than 0"),
        (lambda: rules.Dataloader(min_threshold=300, max_threshold=100), ConfigurationError,
         r"min_threshold \(300\) must be lower than max_threshold \(100\)"),
        (lambda: rules.LoadBalancing(threshold=20), ConfigurationError,
         r"threshold: is a proportion between 0 and 1 \(0.2 means 20%\), got 20. Did you mean 0.2 \(20%\)\?"),
        (lambda: rules.BatchSize(name=""), ConfigurationError, r"RuleConfigurationName must be 1 to 256 characters, got 0"),
        (lambda: rules.BatchSize(name="x" * 257), ConfigurationError, r"1 to 256 characters, got 257"),
        (lambda: rules.BatchSize(name=5), ConfigurationTypeError, r"name: expected a string, got int 5"),
        (lambda: rules.BatchSize(s3_output_path="gs://x"), ConfigurationError, r"s3_output_path: must be an S3 URI"),
    ],
)
def test_invalid_parameters_raise_clear_errors(build, error, message):
    with pytest.raises(error, match=message):
        build()


def test_type_errors_are_also_type_errors_and_value_errors_are_value_errors():
    with pytest.raises(TypeError):
        rules.BatchSize(patience="10")
    with pytest.raises(ValueError):
        rules.BatchSize(patience=0)


def test_percentile_bounds_are_inclusive():
    rules.BatchSize(cpu_threshold_p95=0, gpu_threshold_p95=100, gpu_memory_threshold_p95=99.5)
    rules.LoadBalancing(threshold=0)
    rules.LoadBalancing(threshold=1)


def test_unresolved_tokens_skip_validation():
    rule = rules.LowGPUUtilization(threshold_p95="${Token[TOKEN.12]}", patience=-1.8881545897087626e289)
    config = rule.to_rule_configuration(region="us-west-2")
    assert config["RuleParameters"]["threshold_p95"] == "${Token[TOKEN.12]}"


class TestProfilerReportOverrides:
    def test_override_keys_are_kept_as_written_and_values_stringified(self):
        report = rules.ProfilerReport(Dataloader_min_threshold=10, StepOutlier_mode="EVAL")
        assert report.parameters == {"Dataloader_min_threshold": 10, "StepOutlier_mode": "EVAL"}
        params = report.to_rule_configuration(region="us-east-1")["RuleParameters"]
        assert params == {"Dataloader_min_threshold": "10", "StepOutlier_mode": "EVAL", "rule_to_invoke": "ProfilerReport"}

    @pytest.mark.parametrize(
        ("key", "value", "message"),
        [
            ("threshold", 5, r"unknown override 'threshold': overrides are named <RuleName>_<parameter>"),
            ("Foo_threshold", 5, r"RuleName is one of BatchSize, CPUBottleneck"),
            ("CPUBottleneck_foo", 5, r"CPUBottleneck has no parameter 'foo' \(accepted: threshold, gpu_threshold"),
            ("CPUBottleneck_treshold", 5, r"Did you mean 'CPUBottleneck_threshold'\?"),
            ("cpubottleneck_threshold", 5, r"Did you mean 'CPUBottleneck_threshold'\?"),
            ("CPUBottleneck_rule_to_invoke", "x", r"CPUBottleneck has no parameter 'rule_to_invoke'"),
            ("OverallFrameworkMetrics_scan_interval_us", 5, r"ProfilerReport does not accept overrides for OverallFrameworkMetrics"),
        ],
    )
    def test_unknown_overrides(self, key, value, message):
        with pytest.raises(ConfigurationTypeError, match=message):
            rules.ProfilerReport(**{key: value})

    def test_override_values_are_validated_against_the_sub_rule(self):
        with pytest.raises(ConfigurationError, match=r"rule 'ProfilerReport' > CPUBottleneck: threshold: is a percentage"):
            rules.ProfilerReport(CPUBottleneck_threshold=500)
        with pytest.raises(ConfigurationTypeError, match=r"threshold: expected a number, got str '90'"):
            rules.ProfilerReport(CPUBottleneck_threshold="90")


class TestCustomRules:
    def test_local_source_requires_upload_uri(self, tmp_path):
        source = tmp_path / "my_rule.py"
        source.write_text("class MyRule: pass\n")
        rule = rules.ProfilerRule.custom(name="Mine", rule_to_invoke="MyRule", source=str(source),
                                         instance_type="ml.t3.medium", volume_size_in_gb=5)
        assert rule.has_local_source
        with pytest.raises(ConfigurationError, match="is a local file; upload it and pass source_s3_uri="):
            rule.to_rule_configuration(region="us-east-1")
        config = rule.to_rule_configuration(region="us-east-1", source_s3_uri="s3://assets/abc.py")
        assert config["RuleParameters"] == {"source_s3_uri": "s3://assets/abc.py", "rule_to_invoke": "MyRule"}
        assert config["RuleEvaluatorImage"] == "864354269164.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rule-evaluator:latest"

    def test_own_image_is_used_as_is(self):
        rule = rules.ProfilerRule.custom(name="Own", rule_to_invoke="R", image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/r:1",
                                         instance_type="ml.m5.large", volume_size_in_gb=10, parameters={"a": True})
        config = rule.to_rule_configuration(region="us-east-1")
        assert config["RuleEvaluatorImage"] == "123456789012.dkr.ecr.us-east-1.amazonaws.com/r:1"
        assert config["RuleParameters"] == {"rule_to_invoke": "R", "a": "True"}

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"source": None}, r"needs source= .* or image_uri="),
            ({"source": "rule.txt"}, r"source: must be a Python file \(.py\) or an s3:// URI, got 'rule.txt'"),
            ({"source": "missing_rule.py"}, r"source: file 'missing_rule.py' does not exist"),
            ({"instance_type": "ml.m5.xlarg"}, r"instance_type: 'ml.m5.xlarg' is not a SageMaker processing instance type. Did you mean 'ml.m5.xlarge'\?"),
            ({"volume_size_in_gb": 0}, r"volume_size_in_gb: must be between 1 and 16384 GB, got 0"),
            ({"volume_size_in_gb": "30"}, r"volume_size_in_gb: expected an integer number of GB, got str '30'"),
            ({"rule_to_invoke": ""}, r"rule_to_invoke: is required"),
            ({"parameters": {"rule_to_invoke": "x"}}, r"'rule_to_invoke' is set by the library"),
            ({"parameters": {"source_s3_uri": "s3://b/x.py"}}, r"parameters.source_s3_uri: .* pass it as the source= argument"),
            ({"parameters": {"windows": [1, 2]}}, r"parameters.windows: expected a string, number or boolean"),
            ({"parameters": {"": 1}}, r"parameters: parameter names must be non-empty strings"),
        ],
    )
    def test_custom_rule_validation(self, kwargs, message):
        args = {"name": "C", "rule_to_invoke": "R", "source": "s3://b/r.py", "instance_type": "ml.m5.xlarge",
                "volume_size_in_gb": 30, **kwargs}
        with pytest.raises(ConfigurationError, match=message):
            rules.ProfilerRule.custom(**args)


@pytest.mark.parametrize(
    ("build", "where"),
    [
        (lambda actions: rules.LowGPUUtilization(actions=actions), "rule 'LowGPUUtilization'"),
        (lambda actions: rules.ProfilerReport(CPUBottleneck_threshold=90, actions=actions), "rule 'ProfilerReport'"),
        (lambda actions: rules.ProfilerRule.custom(name="C", rule_to_invoke="R", source="s3://b/r.py",
                                                   instance_type="ml.m5.xlarge", volume_size_in_gb=30, actions=actions),
         "rule 'C'"),
    ],
)
def test_actions_on_profiler_rules_are_explained(build, where):
    with pytest.raises(ConfigurationError) as raised:
        build(ActionList(StopTraining(), Email("ml@example.com")))
    message = str(raised.value)
    assert message.startswith(f"{where}: actions: SageMaker runs Email, SMS and StopTraining actions only for debugger")
    assert "RuleAlarm" in message and "unknown parameter" not in message


def test_from_name_builds_rules_and_suggests_names():
    assert rules.from_name("LowGPUUtilization", threshold_p95=80).parameters["threshold_p95"] == 80
    with pytest.raises(ConfigurationError, match=r"unknown profiler rule 'LowGpuUtilization'. Did you mean 'LowGPUUtilization'\?"):
        rules.from_name("LowGpuUtilization")


def test_rule_parameter_limits_are_enforced():
    too_many = {f"p{i}": i for i in range(100)}
    rule = rules.ProfilerRule.custom(name="C", rule_to_invoke="R", source="s3://b/r.py", instance_type="ml.m5.xlarge",
                                     volume_size_in_gb=30, parameters=too_many)
    with pytest.raises(ConfigurationError, match=r"has 102 rule parameters; the API allows at most 100"):
        rule.to_rule_configuration(region="us-east-1")
    long_value = rules.ProfilerRule.custom(name="C", rule_to_invoke="R", source="s3://b/r.py",
                                           instance_type="ml.m5.xlarge", volume_size_in_gb=30, parameters={"x": "v" * 257})
    with pytest.raises(ConfigurationError, match=r"RuleParameters.x: value is 257 characters; the API allows at most 256"):
        long_value.to_rule_configuration(region="us-east-1")
