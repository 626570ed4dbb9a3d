"""MlflowLayer: the synth builds the evaluator's MLflow client layer with this machine's pip, for the evaluator's
platform, reproducibly. The tests install a tiny local wheel (no network); the library's own pinned requirements are
checked as a file (every line pinned with a hash, the MLflow client and the SageMaker plugin in it)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zipfile
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from cdk_sagemaker_debugger import EvaluatorMlflow, MlflowLayer, RuleEvaluator, TrainingJobs
from cdk_sagemaker_debugger.constructs.mlflow_layer import LOCK
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError

SERVER = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team"


def _wheel(folder: Path, name: str = "tinyclient", version: str = "1.0") -> Path:
    """A pure-Python wheel (py3-none-any: installable for any platform), written by hand."""
    files = {f"{name}/__init__.py": f"VERSION = {version!r}\n",
             f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{name}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
                                                 "Tag: py3-none-any\n"}
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{name}-{version}.dist-info/RECORD,,")
    files[f"{name}-{version}.dist-info/RECORD"] = "\n".join(record) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


@pytest.fixture
def local_index(tmp_path: Path) -> tuple[Path, list[str]]:
    wheels = tmp_path / "wheels"
    sha = hashlib.sha256(_wheel(wheels).read_bytes()).hexdigest()
    requirements = tmp_path / "layer" / "requirements.txt"
    requirements.parent.mkdir()
    requirements.write_text(f"tinyclient==1.0 --hash=sha256:{sha}\n")
    return requirements, ["--no-index", "--find-links", str(wheels)]


def _stack(outdir: Path, context: dict | None = None) -> cdk.Stack:
    app = cdk.App(outdir=str(outdir), context=context or {})
    return cdk.Stack(app, "S", env=cdk.Environment(account="123456789012", region="us-east-1"))


def _asset_folder(stack: cdk.Stack) -> Path:
    assembly = stack.node.root.synth()
    template = assembly.get_stack_by_name("S").template
    (layer,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::LayerVersion"]
    key = layer["Properties"]["Content"]["S3Key"]
    return Path(assembly.directory) / f"asset.{key.removesuffix('.zip')}"


def test_the_synth_installs_the_requirements_under_python_for_the_evaluators_platform(tmp_path, local_index):
    requirements, pip_arguments = local_index
    stack = _stack(tmp_path / "out")
    layer = MlflowLayer(stack, "Mlflow", requirements=requirements, pip_arguments=pip_arguments)
    folder = _asset_folder(stack)
    assert (folder / "python" / "tinyclient" / "__init__.py").read_text() == "VERSION = '1.0'\n"
    assert not list(folder.rglob("*.pyc")) and not (folder / "python" / "bin").exists()
    assert layer.unzipped_bytes == sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    Template.from_stack(stack).has_resource_properties("AWS::Lambda::LayerVersion", {
        "CompatibleRuntimes": ["python3.14"], "CompatibleArchitectures": ["arm64"]})


def test_the_asset_is_named_by_its_inputs_so_every_machine_builds_the_same_one(tmp_path, local_index):
    requirements, pip_arguments = local_index

    def key(outdir: str, args: list[str]) -> str:
        stack = _stack(tmp_path / outdir)
        MlflowLayer(stack, "Mlflow", requirements=requirements, pip_arguments=args)
        return _asset_folder(stack).name

    first, again = key("a", pip_arguments), key("b", pip_arguments)
    assert first == again
    assert key("c", [*pip_arguments, "--no-deps"]) != first
    requirements.write_text(requirements.read_text() + "# pinned again\n")
    assert key("d", pip_arguments) != first


def test_an_install_that_fails_names_the_construct_the_file_and_the_ways_out(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("no-such-package-for-this-test==0.0.1\n")
    stack = _stack(tmp_path / "out")
    with pytest.raises(ConfigurationError) as raised:
        MlflowLayer(stack, "Mlflow", requirements=requirements, pip_arguments=["--no-index"])
    message = str(raised.value)
    assert message.startswith("S/Mlflow: requirements: pip could not install ")
    assert "no-such-package-for-this-test" in message and "--index-url" in message and "layer=" in message


def test_bad_inputs_are_refused_before_pip_runs(tmp_path):
    stack = _stack(tmp_path / "out")
    with pytest.raises(ConfigurationError, match=r"^S/A: requirements: no requirements file at .*missing.txt"):
        MlflowLayer(stack, "A", requirements=tmp_path / "missing.txt")
    with pytest.raises(ConfigurationTypeError, match=r"^S/B: pip_arguments: expected a list of strings"):
        MlflowLayer(stack, "B", pip_arguments="--no-index")


def test_the_librarys_requirements_pin_every_package_to_one_file():
    lines = [line for line in LOCK.read_text().replace("\\\n", " ").splitlines() if not line.startswith("#")]
    pins = {line.split("==")[0]: line for line in lines}
    assert {"mlflow-skinny", "sagemaker-mlflow", "boto3"} <= set(pins)
    for name, line in pins.items():
        assert "==" in line and line.count("--hash=sha256:") == 1, name


def test_an_evaluator_without_a_layer_gets_the_stacks_one_library_layer(tmp_path):
    # bundling skipped for every stack: the test does not install the real client (that needs the package index)
    stack = _stack(tmp_path / "out", context={"aws:cdk:bundling-stacks": []})
    bucket = s3.Bucket(stack, "Output", enforce_ssl=True)
    artifacts = s3.Bucket.from_bucket_name(stack, "Artifacts", "team-mlflow-artifacts")
    for name in ("One", "Two"):
        RuleEvaluator(stack, name, training_jobs=TrainingJobs.from_job_name_prefix(f"{name.lower()}-", output_bucket=bucket),
                      mlflow=EvaluatorMlflow(tracking_server_arn=SERVER, artifact_bucket=artifacts))
    template = Template.from_stack(stack)
    (layer_id,) = template.find_resources("AWS::Lambda::LayerVersion")
    functions = [f for f in template.find_resources("AWS::Lambda::Function").values()
                 if "MLFLOW_TRACKING_SERVER_ARN" in json.dumps(f)]
    assert len(functions) == 2
    assert all(f["Properties"]["Layers"] == [{"Ref": layer_id}] for f in functions)
    assert isinstance(stack.node.find_child("CdkSagemakerDebuggerMlflowLayer"), MlflowLayer)


def test_a_layer_of_your_own_is_used_as_given(tmp_path):
    stack = _stack(tmp_path / "out")
    layer = lambda_.LayerVersion.from_layer_version_arn(stack, "Own", "arn:aws:lambda:us-east-1:123456789012:layer:m:3")
    RuleEvaluator(stack, "E", training_jobs=TrainingJobs.from_job_name_prefix("exp-", output_bucket=s3.Bucket(
        stack, "Output", enforce_ssl=True)), mlflow=EvaluatorMlflow(
        tracking_server_arn=SERVER, artifact_bucket=s3.Bucket.from_bucket_name(stack, "A", "team-artifacts"), layer=layer))
    template = Template.from_stack(stack)
    assert template.find_resources("AWS::Lambda::LayerVersion") == {}
    assert stack.node.try_find_child("CdkSagemakerDebuggerMlflowLayer") is None


@pytest.mark.skipif(not os.environ.get("CDK_SAGEMAKER_DEBUGGER_BUILD_MLFLOW_LAYER"),
                    reason="builds the real layer from the package index: set CDK_SAGEMAKER_DEBUGGER_BUILD_MLFLOW_LAYER=1")
def test_the_librarys_layer_builds_and_fits_lambdas_limit(tmp_path):
    stack = _stack(tmp_path / "out")
    layer = MlflowLayer(stack, "Mlflow")
    folder = _asset_folder(stack) / "python"
    assert (folder / "mlflow" / "tracking" / "client.py").is_file() and (folder / "sagemaker_mlflow").is_dir()
    assert platform_tags(folder / "pydantic_core") == {"cpython-314-aarch64-linux-gnu"}
    assert layer.unzipped_bytes is not None and layer.unzipped_bytes < 250 * 2**20
    print(f"MlflowLayer: {layer.unzipped_bytes / 2**20:.1f} MiB unzipped")


def platform_tags(package: Path) -> set[str]:
    """The interpreter/platform part of the compiled modules' names (``_x.cpython-314-aarch64-linux-gnu.so``)."""
    return {p.name.split(".")[-2] for p in package.glob("*.so")}
