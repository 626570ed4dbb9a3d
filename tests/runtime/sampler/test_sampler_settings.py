"""Settings: node id and job name from SageMaker's config files, the contract's variables, clear errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cdk_sagemaker_debugger.runtime.sampler import contract
from cdk_sagemaker_debugger.runtime.sampler.settings import SettingsError, from_environment, split_s3_uri


def sagemaker_config(folder: Path, host: str | None = "algo-3", job: str | None = "job-from-file") -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    if host:
        (folder / "resourceconfig.json").write_text(json.dumps({"current_host": host, "hosts": ["algo-1", host]}))
    if job:
        (folder / "trainingjobconfig.json").write_text(json.dumps({"TrainingJobName": job}))
    return {"CDK_SAGEMAKER_SAMPLER_CONFIG_DIR": str(folder), "CDK_SAGEMAKER_SAMPLER_LOCAL_DIR": str(folder / "out")}


def test_resourceconfig_names_the_node_and_wins_over_node(tmp_path: Path):
    env = sagemaker_config(tmp_path)
    assert from_environment(env, node="algo-1").node == "algo-3"
    assert from_environment(sagemaker_config(tmp_path / "none", host=None), node="algo-2").node == "algo-2"
    assert from_environment(sagemaker_config(tmp_path / "none2", host=None)).node == "algo-1"


def test_job_name_from_the_environment_then_trainingjobconfig(tmp_path: Path):
    env = sagemaker_config(tmp_path)
    assert from_environment(env).job_name == "job-from-file"
    assert from_environment(dict(env, TRAINING_JOB_NAME="job-from-env")).job_name == "job-from-env"
    assert from_environment(sagemaker_config(tmp_path / "none", job=None)).job_name is None


def test_the_contract_variables(tmp_path: Path):
    env = dict(sagemaker_config(tmp_path), **contract.environment("s3://bucket/prefix/", 100, framework_events=False))
    settings = from_environment(env)
    assert (settings.s3_uri, settings.interval_ms, settings.framework_events) == ("s3://bucket/prefix/", 100, False)
    assert split_s3_uri(settings.s3_uri) == ("bucket", "prefix")
    assert from_environment(sagemaker_config(tmp_path)).interval_ms == contract.DEFAULT_INTERVAL_MS == 500


@pytest.mark.parametrize(("variable", "value", "message"), [
    (contract.INTERVAL_MS, "250", "CDK_SAGEMAKER_SAMPLER_INTERVAL_MS='250': the sampling interval must be one of 100, "
                                  "200, 500, 1000, 5000, 60000"),
    (contract.S3_URI, "https://bucket/x", "expected s3://<bucket>[/<prefix>]"),
    (contract.FRAMEWORK_EVENTS, "yes", "use 1 (on) or 0 (off)"),
    ("CDK_SAGEMAKER_SAMPLER_UPLOADER", "curl", "use one of auto, boto3, stdlib"),
])
def test_bad_values_name_the_variable_and_the_fix(tmp_path: Path, variable: str, value: str, message: str):
    with pytest.raises(SettingsError, match=re.escape(message)):
        from_environment(dict(sagemaker_config(tmp_path), **{variable: value}))


def test_unknown_options_list_the_accepted_ones(tmp_path: Path):
    with pytest.raises(SettingsError, match=r"unknown sampler option 'interval'; accepted options: .*interval_ms"):
        from_environment(sagemaker_config(tmp_path), interval=100)
