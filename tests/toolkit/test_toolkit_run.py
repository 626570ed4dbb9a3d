"""The synthesized request against code AWS wrote: SageMaker's in-container training toolkit (``sagemaker-training``
and ``sagemaker-pytorch-training`` from PyPI, as the PyTorch Deep Learning Containers run them), for two hosts on this
machine.

From the *synthesized* template (resolved as a deployment in 123456789012 would have it) the test builds the files a
container sees under a base directory per host (``input/config/hyperparameters.json``, ``resourceconfig.json``,
``inputdataconfig.json``, the channels' data), serves the code asset and the sampler bundle from moto's S3 server, and
runs the toolkit's own ``train`` entry point for each host with the request's environment. The user's ``train.py``
must run on both hosts under torchrun (one all-reduce over gloo between them), from the uploaded archive, and the
sampler must start once per host.

What stands in for SageMaker, and only that: SageMaker downloads the channels and writes the config files; its hosts
are ``algo-1`` and ``algo-2`` on the job's own network, which this machine cannot resolve, so the toolkit sees hosts
named ``127.0.0.1`` and ``localhost`` (both this machine) and the sampler, which names its files after the host,
reads a ``resourceconfig.json`` with the ``algo-N`` name. The environment is PyTorch 2.13.0 on CPU, in
``.venv-toolkit`` (``make test`` creates it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk.assertions import Template
from helpers import ROOT
from moto.server import ThreadedMotoServer
from template_values import TemplateResolver

from cdk_sagemaker_debugger import Distribution, ProfiledTrainingJob, TrainingCode

TOOLKIT = ROOT / ".venv-toolkit" / "bin"
SOURCE = Path(__file__).parent / "train_src"
REGION = "us-east-1"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
JOB = "toolkit-0a1b2c3d4e5f60718293"
HOSTS = ["127.0.0.1", "localhost"]  # what the toolkit sees; SageMaker's algo-1, algo-2 (sorted, as SageMaker sorts)
RUN_NAME = """States.Format('"{}"', $.trainingRun.TrainingJobName)"""

pytestmark = pytest.mark.skipif(not (TOOLKIT / "train").exists(),
                                reason=".venv-toolkit is missing: `make test` (or `make side-venvs`) creates it")


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("toolkit-cdk-out")
    app = cdk.App(outdir=str(out))
    stack = cdk.Stack(app, "Toolkit", env=cdk.Environment(account="123456789012", region=REGION))
    ProfiledTrainingJob(stack, "Job", job_name_prefix="toolkit", training_image=IMAGE,
                        instance_type="ml.g5.2xlarge", instance_count=2,
                        code=TrainingCode.from_asset(str(SOURCE), entry_point="train.py"),
                        distribution=Distribution.torch_distributed(),
                        hyperparameters={"epochs": 2})
    app.synth()
    resolver = TemplateResolver("Toolkit", Template.from_stack(stack).to_json(), REGION)
    return {"request": _request(resolver), "assets": json.loads((out / "Toolkit.assets.json").read_text()),
            "out": out, "resolver": resolver}


def _request(resolver: TemplateResolver) -> dict[str, Any]:
    """The task's CreateTrainingJob parameters, resolved, with the run's name where the state machine puts it."""
    _, machine = resolver.one("AWS::StepFunctions::StateMachine")
    states = json.loads(resolver.resolve(machine["DefinitionString"]))["States"]
    parameters = states["CreateTrainingJob"]["Parameters"]
    hyper = dict(parameters["HyperParameters"])
    assert hyper.pop("sagemaker_job_name.$") == RUN_NAME  # the one path in it; evaluated here for this run's name
    hyper["sagemaker_job_name"] = json.dumps(JOB)
    return {**{k: v for k, v in parameters.items() if not k.endswith(".$")}, "HyperParameters": hyper,
            "TrainingJobName": JOB}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's server on a free port (real HTTP, as the toolkit's boto3 and the sampler's own client speak it)."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    yield "http://{}:{}".format(*server.get_host_and_port())
    server.stop()


def _s3(endpoint: str) -> Any:
    return boto3.client("s3", region_name=REGION, endpoint_url=endpoint, aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def upload_assets(synthesized: dict[str, Any], endpoint: str) -> None:
    """What `cdk deploy` publishes: every file asset, under the bucket and key the manifest names."""
    s3 = _s3(endpoint)
    for asset in synthesized["assets"]["files"].values():
        for destination in asset["destinations"].values():
            bucket = destination["bucketName"].replace("${AWS::AccountId}", "123456789012").replace(
                "${AWS::Region}", REGION)
            if bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
                s3.create_bucket(Bucket=bucket)
            path = synthesized["out"] / asset["source"]["path"]
            if path.is_dir():  # packaging "zip": the CLI zips the folder when it publishes
                path = Path(shutil.make_archive(str(synthesized["out"] / f"published-{path.name}"), "zip", path))
            s3.upload_file(str(path), bucket, destination["objectKey"])
    output = synthesized["request"]["OutputDataConfig"]["S3OutputPath"].removeprefix("s3://").split("/")[0]
    s3.create_bucket(Bucket=output)


def container_files(request: dict[str, Any], base: Path, host: str, endpoint: str) -> None:
    """What SageMaker puts in a container before the image's entry point starts: the config files and the channels."""
    config = base / "input" / "config"
    config.mkdir(parents=True)
    (config / "hyperparameters.json").write_text(json.dumps(request["HyperParameters"]))
    resource = request["ResourceConfig"]
    (config / "resourceconfig.json").write_text(json.dumps({
        "current_host": host, "hosts": HOSTS, "network_interface_name": "lo",
        "current_instance_type": resource["InstanceType"], "current_group_name": "homogeneousCluster",
        "instance_groups": [{"instance_group_name": "homogeneousCluster", "instance_type": resource["InstanceType"],
                             "hosts": HOSTS}]}))
    channels = {}
    s3 = _s3(endpoint)
    for channel in request.get("InputDataConfig", []):
        source = channel["DataSource"]["S3DataSource"]
        channels[channel["ChannelName"]] = {"TrainingInputMode": channel.get("InputMode", "File"),
                                            "S3DistributionType": source["S3DataDistributionType"],
                                            "RecordWrapperType": "None"}
        bucket, _, prefix = source["S3Uri"].removeprefix("s3://").partition("/")
        folder = base / "input" / "data" / channel["ChannelName"]
        folder.mkdir(parents=True)
        for item in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []):
            relative = item["Key"][len(prefix):].lstrip("/") or item["Key"].rsplit("/", 1)[-1]
            s3.download_file(bucket, item["Key"], str(folder / relative))
    (config / "inputdataconfig.json").write_text(json.dumps(channels))


def host_environment(request: dict[str, Any], base: Path, node: str, endpoint: str) -> dict[str, str]:
    """The request's Environment (its /opt/ml paths under this host's base directory), what SageMaker and the DLC
    image set, and what points this machine's processes at moto."""
    environment = {k: v.replace("/opt/ml", str(base)) for k, v in (request.get("Environment") or {}).items()}
    sampler_config = base / "sampler-config"
    sampler_config.mkdir()
    (sampler_config / "resourceconfig.json").write_text(json.dumps({"current_host": node}))
    return {
        "PATH": f"{TOOLKIT}:/usr/bin:/bin", "HOME": str(base), "LANG": "C.UTF-8",
        "SAGEMAKER_BASE_DIR": str(base), "TRAINING_JOB_NAME": JOB,
        "SAGEMAKER_TRAINING_MODULE": "sagemaker_pytorch_container.training:main",  # set by the PyTorch DLC
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION, "S3_ENDPOINT_URL": endpoint, "AWS_ENDPOINT_URL_S3": endpoint,
        "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
        "CDK_SAGEMAKER_SAMPLER_LOCAL_DIR": str(base / "output" / "cdk-sagemaker-sampler"),
        "CDK_SAGEMAKER_SAMPLER_CONFIG_DIR": str(sampler_config),
        **environment,
    }


@pytest.fixture(scope="module")
def run(synthesized: dict[str, Any], s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    upload_assets(synthesized, s3_endpoint)
    request = synthesized["request"]
    root = tmp_path_factory.mktemp("hosts")
    processes = {}
    for index, host in enumerate(HOSTS):
        base = root / f"algo-{index + 1}"
        container_files(request, base, host, s3_endpoint)
        log = (root / f"algo-{index + 1}.log").open("w")
        processes[host] = (base, log, subprocess.Popen(
            [str(TOOLKIT / "train")], env=host_environment(request, base, f"algo-{index + 1}", s3_endpoint),
            cwd=base, stdout=log, stderr=subprocess.STDOUT))
    results = {}
    for host, (base, log, process) in processes.items():
        try:
            code = process.wait(timeout=600)
        except subprocess.TimeoutExpired:
            for _, _, other in processes.values():
                other.kill()
            code = "timeout"
        log.close()
        results[host] = {"base": base, "exit": code, "log": (root / f"{base.name}.log").read_text()}
    return results


def report(result: dict[str, Any]) -> dict[str, Any]:
    path = result["base"] / "output" / "data" / "report.json"
    assert path.exists(), f"train.py wrote no report; the toolkit's log:\n{result['log'][-4000:]}"
    return json.loads(path.read_text())


def test_the_toolkit_runs_train_py_from_the_archive_on_both_hosts(run):
    for host, result in run.items():
        assert result["exit"] == 0, f"{host}: exit {result['exit']}\n{result['log'][-4000:]}"
        got = report(result)
        assert got["cwd"] == str(result["base"] / "code")  # unpacked from sagemaker_submit_directory
        assert sorted(os.listdir(result["base"] / "code")) == ["train.py"]
        assert got["argv"] == ["--epochs", "2"] and got["host"] == host


def test_train_py_runs_under_torchrun_and_the_hosts_reach_each_other(run):
    reports = [report(result) for result in run.values()]
    assert all(r["launched_by_torchrun"] for r in reports), reports
    assert sorted(r["rank"] for r in reports) == [0, 1]
    assert {r["world_size"] for r in reports} == {2} and {r["all_reduce_sum"] for r in reports} == {3.0}
    assert all("torchrun --nnodes 2 --nproc_per_node 1 --master_addr 127.0.0.1" in r["log"] for r in run.values())


def test_the_sampler_starts_once_per_host(run):
    for index, result in enumerate(run.values()):
        local = result["base"] / "output" / "cdk-sagemaker-sampler"
        assert sorted(p.name for p in (local / "sampler").glob("status-*.json")) == [f"status-algo-{index + 1}.json"]
        assert result["log"].count("cdk-sagemaker-debugger sampler: not started") == 0
