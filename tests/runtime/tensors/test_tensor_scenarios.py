"""Each scenario training gives its verdict through the CLI and through the Lambda handler: the trainings run with
the bundle's sitecustomize starting the collector, upload to moto's S3 server over HTTP, and are evaluated there."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto.server import ThreadedMotoServer
from tensor_jobs import EXPECTED, RULES, bundle, finish, job_env, start

from cdk_sagemaker_debugger import cli
from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
from cdk_sagemaker_debugger.runtime.evaluator.contract_shared import JobFamily

pytest.importorskip("torch")

REGION = "us-east-1"
BUCKET = "tensor-bucket"
PREFIX = "out"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    saved = dict(os.environ)
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION=REGION,
                      AWS_REGION=REGION)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    os.environ["AWS_ENDPOINT_URL"] = url
    boto3.client("s3", region_name=REGION).create_bucket(Bucket=BUCKET)
    try:
        yield url
    finally:
        server.stop()
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def trained(endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every scenario trained once (in parallel), uploaded to s3://tensor-bucket/out/tens-<scenario>/tensor-output/."""
    root = tmp_path_factory.mktemp("tensors")
    bundle_dir = bundle(root / "bundle")
    credentials = {k: os.environ[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")}
    running = {}
    for scenario in EXPECTED:
        env = job_env(bundle_dir, root / scenario, CDK_SAGEMAKER_SAMPLER_S3_URI=f"s3://{BUCKET}/{PREFIX}",
                      TRAINING_JOB_NAME=f"tens-{scenario.replace('_', '-')}", AWS_ENDPOINT_URL_S3=endpoint,
                      **credentials)
        running[scenario] = start(scenario, env)
    return {scenario: finish(process) for scenario, process in running.items()}


def job(scenario: str) -> str:
    return f"tens-{scenario.replace('_', '-')}"


def expected_statuses(scenario: str) -> dict[str, str]:
    wanted = EXPECTED[scenario]
    if wanted is None:
        return dict.fromkeys(RULES, "NoIssuesFound")
    return {wanted: "IssuesFound"}


def test_the_collector_uploaded_its_files_and_status(trained: dict[str, str]):
    s3 = boto3.client("s3", region_name=REGION)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/{job('healthy')}/")["Contents"]]
    steps = [k for k in keys if k.endswith(".jsonl")]
    assert f"{PREFIX}/tens-healthy/tensor-output/algo-1/00000/000000000000.jsonl" in steps
    # 60 optimizer steps, save_interval 10: steps 0, 10, ..., 50; and the labels of every step until 500 samples
    # were counted (batches of 32: steps 0 to 15)
    recorded = sorted(int(k.rsplit("/", 1)[1].split(".")[0]) for k in steps)
    assert recorded == [*range(16), 20, 30, 40, 50]
    status = json.loads(s3.get_object(Bucket=BUCKET, Key=f"{PREFIX}/tens-healthy/tensor-output/status/algo-1-0.json")
                        ["Body"].read())
    assert status["steps"] == 60 and status["uploaded"] == 20 and status["failures"] == {}
    assert status["mode"] == "replicated"


@pytest.mark.parametrize("scenario", list(EXPECTED))
def test_cli_gives_the_scenario_verdict(trained: dict[str, str], scenario: str, tmp_path: Path):
    out, err = io.StringIO(), io.StringIO()
    args = ["evaluate", f"s3://{BUCKET}/{PREFIX}/{job(scenario)}/tensor-output", "--out", str(tmp_path),
            "--format", "json", "--quiet"]
    for rule in RULES:
        args += ["--rule", rule]
    assert cli.main(args, stdout=out, stderr=err) == 0, err.getvalue()
    statuses = {r["RuleConfigurationName"]: r["RuleEvaluationStatus"]
                for r in json.loads(out.getvalue())["rules"]}
    assert {rule: statuses[rule] for rule in expected_statuses(scenario)} == expected_statuses(scenario)
    if EXPECTED[scenario]:
        report = json.loads((tmp_path / "profiler-reports" / f"{EXPECTED[scenario]}.json").read_text())
        assert report["RuleTriggered"] == 1 and report["Details"]


def describe(scenario: str) -> dict[str, Any]:
    from datetime import datetime, timezone

    name = job(scenario)
    return {"TrainingJobName": name, "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{name}",
            "TrainingJobStatus": "Completed", "SecondaryStatus": "Completed",
            "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "123.dkr.ecr.us-east-1.amazonaws.com/t"},
            "ModelArtifacts": {"S3ModelArtifacts": f"s3://{BUCKET}/{PREFIX}/{name}/output/model.tar.gz"},
            "ResourceConfig": {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
            "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
            "CreationTime": datetime(2026, 12, 1, 7, 0, tzinfo=timezone.utc),
            "TrainingStartTime": datetime(2026, 12, 1, 7, 2, tzinfo=timezone.utc),
            "TrainingEndTime": datetime(2026, 12, 1, 7, 3, tzinfo=timezone.utc),
            "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/{PREFIX}"},
            "ProfilerConfig": {"DisableProfiler": True}}


@pytest.mark.parametrize("scenario", list(EXPECTED))
def test_lambda_handler_gives_the_scenario_verdict(trained: dict[str, str], scenario: str):
    sagemaker = boto3.client("sagemaker", region_name=REGION, endpoint_url="https://sagemaker.invalid")
    stub = Stubber(sagemaker)
    stub.add_response("describe_training_job", describe(scenario), {"TrainingJobName": job(scenario)})
    stub.activate()
    clients = lh.Clients(s3=boto3.client("s3", region_name=REGION), events=boto3.client("events", region_name=REGION),
                         sagemaker=sagemaker)
    settings = lh.Settings(family=JobFamily(job_name_prefix="tens-"), rules=[lh.RuleConfig(r, r, {}) for r in RULES],
                           profiler_s3_uri=f"s3://{BUCKET}/{PREFIX}")
    outcome = lh.handler({"detail": {"TrainingJobName": job(scenario)}}, None, clients=clients, settings=settings)
    [result] = outcome["jobs"]
    assert result["result"] == "final"
    assert {rule: result["statuses"][rule] for rule in expected_statuses(scenario)} == expected_statuses(scenario)
    if EXPECTED[scenario]:
        key = f"{PREFIX}/{job(scenario)}/rule-output/{EXPECTED[scenario]}/evaluator-output/profiler-reports/" \
              f"{EXPECTED[scenario]}.json"
        report = json.loads(clients.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
        assert report["RuleTriggered"] == 1 and report["FirstStep"] is not None
    stub.assert_no_pending_responses()
