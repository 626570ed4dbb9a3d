"""Checks on the CreateTrainingJob request that need no CDK."""

from __future__ import annotations

import pytest

from cdk_sagemaker_debugger.model import training_request as tr
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError


@pytest.mark.parametrize("prefix", ["resnet", "a", "bert-large-2", "x" * 42, "A1--b"])
def test_valid_prefixes_give_valid_job_names(prefix):
    tr.check_job_name_prefix(prefix)
    name = tr.example_job_name(prefix)
    assert len(name) <= 63


@pytest.mark.parametrize(
    ("prefix", "error", "message"),
    [
        ("x" * 43, ConfigurationError, r"is 43 characters; at most 42 fit"),
        ("my_job", ConfigurationError, r"'my_job' is not a valid training job name start.* Try 'my-job'"),
        ("legacy-", ConfigurationError, r"beginning and ending with a letter or digit"),
        ("-x", ConfigurationError, r"not a valid training job name start"),
        ("", ConfigurationError, r"not a valid training job name start"),
        (5, ConfigurationTypeError, r"job_name_prefix: expected a job-name prefix string such as .*, got int 5"),
        ("${Token[TOKEN.1]}", ConfigurationError, r"must be a literal string"),
    ],
)
def test_invalid_prefixes(prefix, error, message):
    with pytest.raises(error, match=message):
        tr.check_job_name_prefix(prefix, where="Stack/Job")


def test_string_maps():
    assert tr.normalize_string_map({"lr": 0.01, "epochs": 10, "opt": "adam"}, field="hyperparameters") == {
        "lr": "0.01", "epochs": "10", "opt": "adam"}
    with pytest.raises(ConfigurationTypeError, match=r"hyperparameters.flag: value of 'flag' is the boolean True"):
        tr.normalize_string_map({"flag": True}, field="hyperparameters")
    with pytest.raises(ConfigurationTypeError, match=r"must be a string or number, got list"):
        tr.normalize_string_map({"x": [1]}, field="environment")


def test_instance_checks():
    tr.check_instance("ml.g5.2xlarge", 2, 100)
    with pytest.raises(ConfigurationError, match=r"'ml.g5.2xl' is not a SageMaker training instance type"):
        tr.check_instance("ml.g5.2xl", 1, 30)
    with pytest.raises(ConfigurationError, match=r"instance_count: must be at least 1, got 0"):
        tr.check_instance("ml.g5.2xlarge", 0, 30)
    with pytest.raises(ConfigurationTypeError, match=r"volume_size_in_gb: expected an integer"):
        tr.check_instance("ml.g5.2xlarge", 1, 30.5)


def test_stopping_checks():
    tr.check_stopping(3600, 7200, True)
    with pytest.raises(ConfigurationError, match=r"max_wait \(60 s\) must be at least max_runtime \(3600 s\)"):
        tr.check_stopping(3600, 60, True)
    with pytest.raises(ConfigurationError, match=r"max_wait only applies to managed spot training"):
        tr.check_stopping(3600, 7200, False)


def test_assemble_orders_and_drops_empty_members():
    request = tr.assemble_request({"ProfilerConfig": {"DisableProfiler": False}, "RoleArn": "r", "Tags": [],
                                   "TrainingJobName": "n", "HyperParameters": None})
    assert list(request) == ["TrainingJobName", "RoleArn", "ProfilerConfig"]
