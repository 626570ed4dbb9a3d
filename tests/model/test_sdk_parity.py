"""Launcher and training-code hyperparameters against the SageMaker Python SDK's own code, over a grid of inputs.

The oracle is ``sagemaker.pytorch.PyTorch`` itself (sagemaker 2.257.7, in the side environment ``.venv-sdk`` that
``make test`` creates; tests/sdk/sdk_oracle.py runs there): for each case it either returns the HyperParameters the
SDK sends or the ValueError it raises. This library must send the same hyperparameters, in the same order, and refuse
exactly the cases the SDK refuses.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from typing import Any

import pytest
from helpers import ROOT

from cdk_sagemaker_debugger import Distribution
from cdk_sagemaker_debugger.model.errors import ConfigurationError
from cdk_sagemaker_debugger.model.frameworks import parse_training_image
from cdk_sagemaker_debugger.model.launchers import check_launcher
from cdk_sagemaker_debugger.model.training_code import code_hyperparameters

SDK_PYTHON = ROOT / ".venv-sdk" / "bin" / "python"
ORACLE = ROOT / "tests" / "sdk" / "sdk_oracle.py"

LAUNCHERS: dict[str, Distribution | None] = {
    "none": None,
    "torch_distributed": Distribution.torch_distributed(),
    "pytorch_ddp": Distribution.pytorch_ddp(),
    "mpi": Distribution.mpi(),
    "mpi-8": Distribution.mpi(processes_per_host=8),
    "mpi-8-options": Distribution.mpi(processes_per_host=8, custom_mpi_options="-x NCCL_DEBUG=INFO"),
    "smddp": Distribution.smdistributed_data_parallel(),
    "smddp-options": Distribution.smdistributed_data_parallel(custom_mpi_options="-verbose"),
    "smp": Distribution.smdistributed_model_parallel(parameters={"partitions": 2, "microbatches": 4},
                                                     processes_per_host=8),
    "parameter_server": Distribution.parameter_server(),
}
INSTANCE_TYPES = ("ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g5.12xlarge", "ml.p3.16xlarge", "ml.m5.xlarge",
                  "ml.trn1.32xlarge")
VERSIONS = (("1.13.1", "py39"), ("2.0.0", "py310"), ("2.2.0", "py310"), ("2.3.0", "py311"), ("2.8.0", "py312"))
ENTRY_POINTS = ("train.py", "scripts/train.py", "run.sh")
OTHERS = (  # region, instance count, container log level, job name
    ("us-east-1", 1, None, None),
    ("eu-west-1", 4, 10, "llm-0a1b2c3d4e5f60718293"),
)


def cases() -> list[dict[str, Any]]:
    grid = []
    for (launcher, instance_type, (version, py), entry_point, (region, count, level, job)) in itertools.product(
            LAUNCHERS, INSTANCE_TYPES, VERSIONS, ENTRY_POINTS, OTHERS):
        distribution = LAUNCHERS[launcher]
        grid.append({
            "launcher": launcher, "region": region, "entry_point": entry_point,
            "submit_directory": f"s3://code-{region}/llm/sourcedir.tar.gz", "framework_version": version,
            "py_version": py, "instance_type": instance_type, "instance_count": count,
            "distribution": distribution.to_sdk() if distribution is not None else None,
            "container_log_level": level, "job_name": job,
            "image": f"763104351884.dkr.ecr.{region}.amazonaws.com/pytorch-training:{version}-gpu-{py}",
        })
    return grid


def ours(case: dict[str, Any]) -> dict[str, Any]:
    distribution = LAUNCHERS[case["launcher"]]
    try:
        check_launcher(distribution, framework=parse_training_image(case["image"]), training_image=case["image"],
                       instance_type=case["instance_type"], entry_point=case["entry_point"])
    except ConfigurationError as error:
        return {"error": str(error)}
    values = code_hyperparameters(entry_point=case["entry_point"], submit_directory=case["submit_directory"],
                                  region=case["region"], log_level=case["container_log_level"] or 20,
                                  job_name=case["job_name"])
    if distribution is not None:
        values.update(distribution.hyperparameters(case["instance_type"]))
    return {"hyperparameters": values}


@pytest.fixture(scope="module")
def sdk() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    if not SDK_PYTHON.exists():
        pytest.skip(f"{SDK_PYTHON.relative_to(ROOT)} is missing: `make test` (or `make side-venvs`) creates it")
    grid = cases()
    run = subprocess.run([str(SDK_PYTHON), str(ORACLE)], input=json.dumps(grid), capture_output=True, text=True,
                         timeout=600, check=True)
    answer = json.loads(run.stdout)
    assert answer["sagemaker"] == "2.257.7"
    return grid, answer["results"]


def test_the_grid_covers_every_launcher_and_both_outcomes(sdk):
    grid, results = sdk
    assert len(grid) == len(results) == 1800
    assert {case["launcher"] for case in grid} == set(LAUNCHERS)
    for launcher in LAUNCHERS:
        outcomes = {("error" in r) for c, r in zip(grid, results, strict=True) if c["launcher"] == launcher}
        assert outcomes == {True, False} or launcher == "none", launcher


def test_hyperparameters_and_refusals_equal_the_sdks(sdk):
    grid, results = sdk
    differences = []
    for case, expected in zip(grid, results, strict=True):
        got = ours(case)
        if "error" in expected or "error" in got:
            same = ("error" in expected) == ("error" in got)
        else:  # values and order
            same = list(got["hyperparameters"].items()) == list(expected["hyperparameters"].items())
        if not same:
            differences.append((case["launcher"], case["instance_type"], case["framework_version"],
                                case["entry_point"], expected, got))
    assert differences == [], f"{len(differences)} of {len(grid)} differ, first: {differences[:3]}"


def test_the_sdks_refusals_read_as_ours():
    """Our messages name the launcher, the field and the fix."""
    with pytest.raises(ConfigurationError, match=r"instance_type: torch_distributed: torchrun is supported on GPU "
                       r"\(ml.p\*, ml.g\*\) and Trainium \(ml.trn\*\) instances only, got ml.m5.xlarge"):
        check_launcher(Distribution.torch_distributed(), framework=parse_training_image("x/pytorch-training:2.3.0-gpu"),
                       training_image="x/pytorch-training:2.3.0-gpu", instance_type="ml.m5.xlarge")
    with pytest.raises(ConfigurationError, match="training_image: .*not supported by SMDDP.*torch_distributed"):
        check_launcher(Distribution.pytorch_ddp(), framework=parse_training_image("x/pytorch-training:2.3.0-gpu"),
                       training_image="x/pytorch-training:2.3.0-gpu", instance_type="ml.p4d.24xlarge")
