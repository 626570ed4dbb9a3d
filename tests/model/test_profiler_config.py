"""ProfilerConfig and framework profiling: the SDK's exact string format and the checks it lacks."""

from __future__ import annotations

import pytest

from cdk_sagemaker_debugger.model import profiler_config as pc
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError
from cdk_sagemaker_debugger.model.frameworks import FrameworkInfo, parse_training_image


def test_framework_profile_defaults_match_the_sdk(sdk_profiler_data):
    expected = sdk_profiler_data["framework_profile_defaults"]
    request = pc.ProfilerConfig(profiling_interval_millis=100, framework_profile=pc.FrameworkProfile()).to_request(None)
    assert request["ProfilingIntervalInMilliseconds"] == expected["ProfilingIntervalInMilliseconds"]
    assert request["ProfilingParameters"] == expected["ProfilingParameters"]
    assert list(request["ProfilingParameters"]) == list(expected["ProfilingParameters"])


def test_metrics_configs_match_the_sdk(sdk_profiler_data):
    for case in sdk_profiler_data["metrics_configs"]:
        assert getattr(pc, case["class"])(**case["kwargs"]).render() == case["expected"]


def test_profiler_config_requests_match_the_sdk(sdk_profiler_data):
    for case in sdk_profiler_data["profiler_config"]:
        assert pc.ProfilerConfig(**case["kwargs"]).to_request(case["default_path"]) == case["expected"]


def test_range_applies_to_all_five_configs_and_explicit_configs_replace_them():
    params = pc.FrameworkProfile(start_step=2, num_steps=4).to_profiling_parameters()
    assert params["DetailedProfilingConfig"] == '{"StartStep": 2, "NumSteps": 4, }'
    assert params["PythonProfilingConfig"] == '{"StartStep": 2, "NumSteps": 4, "ProfilerName": "cprofile", "cProfileTimer": "total_time", }'
    only = pc.FrameworkProfile(dataloader_profiling_config=pc.DataloaderProfilingConfig(num_steps=2)).to_profiling_parameters()
    assert set(only) == {"LocalPath", "RotateMaxFileSizeInBytes", "RotateFileCloseIntervalInSeconds",
                         "FileOpenFailThreshold", "DataloaderProfilingConfig"}
    assert only["DataloaderProfilingConfig"] == '{"StartStep": 0, "NumSteps": 2, "MetricsRegex": ".*", }'


def test_partial_ranges_and_pyinstrument():
    assert pc.HorovodProfilingConfig(start_step=3).render() == '{"StartStep": 3, "NumSteps": 1, }'
    assert pc.SMDataParallelProfilingConfig(duration=12).render() == '{"Duration": 12, }'
    assert pc.PythonProfilingConfig(python_profiler="pyinstrument").render() == (
        '{"StartStep": 9, "NumSteps": 3, "ProfilerName": "pyinstrument", }'
    )


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: pc.ProfilerConfig(profiling_interval_millis=123), ConfigurationError,
         r"profiling_interval_millis: must be one of 100, 200, 500, 1000, 5000, 60000 milliseconds, got 123. Did you mean 100\?"),
        (lambda: pc.ProfilerConfig(profiling_interval_millis=4000), ConfigurationError, r"Did you mean 5000\?"),
        (lambda: pc.ProfilerConfig(profiling_interval_millis="500"), ConfigurationTypeError, r"expected an integer number of milliseconds"),
        (lambda: pc.ProfilerConfig(s3_output_path="gs://bucket"), ConfigurationError, r"s3_output_path: must be an S3 URI"),
        (lambda: pc.ProfilerConfig(disable_profiler="yes"), ConfigurationTypeError, r"disable_profiler: expected True or False"),
        (lambda: pc.ProfilerConfig(disable_profiler=True, profiling_interval_millis=500), ConfigurationError,
         r"disable_profiler=True turns the profiler off"),
        (lambda: pc.ProfilerConfig(framework_profile={}), ConfigurationTypeError, r"expected a FrameworkProfile"),
        (lambda: pc.DetailedProfilingConfig(start_step=1, duration=3), ConfigurationError, r"not both"),
        (lambda: pc.DetailedProfilingConfig(start_step=-1), ConfigurationError, r"start_step: must be >= 0, got -1"),
        (lambda: pc.DetailedProfilingConfig(num_steps=0), ConfigurationError, r"num_steps: must be >= 1, got 0"),
        (lambda: pc.DetailedProfilingConfig(num_steps=1.5), ConfigurationTypeError, r"num_steps: expected an integer"),
        (lambda: pc.DetailedProfilingConfig(duration=0), ConfigurationError, r"duration: must be greater than 0"),
        (lambda: pc.DetailedProfilingConfig(start_unix_time=10**20), ConfigurationError, r"is not a valid Unix time"),
        (lambda: pc.DataloaderProfilingConfig(metrics_regex="("), ConfigurationError, r"metrics_regex: '\(' is not a valid regular expression"),
        (lambda: pc.PythonProfilingConfig(python_profiler="cprof"), ConfigurationError, r"Did you mean 'cprofile'\?"),
        (lambda: pc.PythonProfilingConfig(cprofile_timer="cpu"), ConfigurationError, r"cprofile_timer: must be one of"),
        (lambda: pc.FrameworkProfile(file_max_size=0), ConfigurationError, r"file_max_size: must be >= 1"),
        (lambda: pc.FrameworkProfile(local_path=""), ConfigurationTypeError, r"local_path"),
        (lambda: pc.FrameworkProfile(detailed_profiling_config=pc.PythonProfilingConfig()), ConfigurationTypeError,
         r"expected a DetailedProfilingConfig"),
    ],
)
def test_validation(build, error, message):
    with pytest.raises(error, match=message):
        build()


@pytest.mark.parametrize(
    ("image", "framework", "deprecated"),
    [
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311", FrameworkInfo("pytorch", (2, 3, 0)), True),
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:1.13.1-gpu-py39", FrameworkInfo("pytorch", (1, 13, 1)), False),
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.11.0-gpu-py39", FrameworkInfo("tensorflow", (2, 11, 0)), True),
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.10.1-cpu-py39", FrameworkInfo("tensorflow", (2, 10, 1)), False),
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:2.1.0-transformers4.36.0-gpu-py310",
         FrameworkInfo("pytorch", (2, 1, 0)), True),
        ("683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1", FrameworkInfo("xgboost", (1, 7)), False),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/my-trainer:latest", None, False),
    ],
)
def test_framework_detection_and_deprecation(image, framework, deprecated):
    detected = parse_training_image(image)
    assert detected == framework
    message = pc.framework_profiling_deprecation(detected)
    assert (message is not None) == deprecated
    if deprecated:
        assert "Framework profiling is deprecated" in message and "System monitoring still works" in message
