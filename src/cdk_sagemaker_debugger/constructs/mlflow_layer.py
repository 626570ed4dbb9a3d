"""``MlflowLayer``: the Lambda layer with the MLflow client that ``RuleEvaluator(mlflow=EvaluatorMlflow(...))`` loads,
built by the synth from pinned requirements with pip on this machine (no Docker needed).

The library ships the requirements (``mlflow-layer/requirements.txt``, written by ``tools/lock_mlflow_layer.py``):
``mlflow-skinny`` and ``sagemaker-mlflow`` (the plugin that signs requests to SageMaker's managed tracking servers)
with every dependency pinned to one version and one sha256, for the evaluator's platform (Lambda Python 3.14, arm64).
pip installs exactly those files (``--only-binary=:all:`` for that platform, so nothing is compiled here); the asset's
hash is that of the requirements and the pip arguments, so the same inputs give the same asset on every machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from ..model.errors import ConfigurationError, ConfigurationTypeError

__all__ = ["MlflowLayer", "LOCK", "PYTHON_VERSION", "PLATFORMS", "MAX_UNZIPPED_BYTES", "pip_platform_arguments"]

#: The library's pinned requirements (the default of ``requirements=``).
LOCK = Path(__file__).resolve().with_name("mlflow-layer") / "requirements.txt"
#: The evaluator's runtime (``_cdk/lambda_function.py``): the wheels pip may take are the ones for this platform.
PYTHON_VERSION = "3.14"
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64", "manylinux_2_34_aarch64")
#: Lambda's limit for a function and all its layers, unzipped, less room for the evaluator's own code (under 1 MiB).
MAX_UNZIPPED_BYTES = 250 * 2**20 - 10 * 2**20
_SHARED_ID = "CdkSagemakerDebuggerMlflowLayer"
_FORMAT = 1  # bump when the layout of the built layer changes, so the asset hash changes with it


def pip_platform_arguments() -> list[str]:
    """pip's arguments that take only wheels built for the evaluator's platform (this machine's does not matter)."""
    platforms = [argument for platform in PLATFORMS for argument in ("--platform", platform)]
    return [*platforms, "--python-version", PYTHON_VERSION, "--implementation", "cp", "--only-binary=:all:"]


def _install_command(requirements: str, target: str, pip_arguments: Sequence[str], python: str) -> list[str]:
    return [python, "-m", "pip", "install", "--quiet", "--no-compile", "--no-input", "--disable-pip-version-check",
            "--target", target, *pip_platform_arguments(), *pip_arguments, "-r", requirements]


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


@jsii.implements(cdk.ILocalBundling)
class _PipInstall:
    """Installs the requirements into ``<asset>/python`` with this machine's pip; returns False (Docker then builds the
    layer) only when this Python has no pip."""

    def __init__(self, requirements: Path, pip_arguments: Sequence[str], where: str) -> None:
        self._requirements = requirements
        self._pip_arguments = tuple(pip_arguments)
        self._where = where
        self.error: ConfigurationError | None = None
        self.unzipped_bytes: int | None = None

    def try_bundle(self, output_dir: str, *args: Any, **kwargs: Any) -> bool:
        if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
            return False
        target = Path(output_dir, "python")
        done = subprocess.run(_install_command(str(self._requirements), str(target), self._pip_arguments,
                                               sys.executable), capture_output=True, text=True)
        if done.returncode != 0:
            detail = " ".join(line.strip() for line in done.stderr.splitlines() if line.strip()
                              and "is ignored" not in line)[-600:]
            self.error = ConfigurationError(
                f"pip could not install {self._requirements} for Lambda Python {PYTHON_VERSION} on arm64: {detail} "
                "The synth needs the package index for this layer: check the network, give a mirror with "
                "pip_arguments=['--index-url', 'https://.../simple'], or pass a layer you built to "
                "EvaluatorMlflow(layer=...).", where=self._where, field="requirements", value=str(self._requirements))
            raise self.error
        shutil.rmtree(target / "bin", ignore_errors=True)  # console scripts: not used, and their shebangs name this machine
        self.unzipped_bytes = _size(target)
        if self.unzipped_bytes > MAX_UNZIPPED_BYTES:
            self.error = ConfigurationError(
                f"the layer is {self.unzipped_bytes / 2**20:.0f} MiB unzipped; Lambda allows 250 MiB for the function "
                "and its layers together. Leave out what the evaluator does not import (the library's requirements "
                "are about 100 MiB).", where=self._where, field="requirements", value=self.unzipped_bytes)
            raise self.error
        return True


class MlflowLayer(lambda_.LayerVersion):
    """The MLflow client layer of ``RuleEvaluator(mlflow=EvaluatorMlflow(...))``, built from pinned requirements.

    Example::

        layer = MlflowLayer(stack, "MlflowLayer")  # the library's pinned mlflow-skinny + sagemaker-mlflow
        RuleEvaluator(stack, "Evaluator", training_jobs=job.training_jobs,
                      mlflow=EvaluatorMlflow(tracking_server_arn=server_arn, artifact_bucket=artifacts, layer=layer))
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        requirements: str | os.PathLike[str] | None = None,
        pip_arguments: Sequence[str] = (),
        description: str | None = None,
        removal_policy: cdk.RemovalPolicy | None = None,
    ) -> None:
        """
        Args:
            requirements: a pip requirements file for the layer. Default: the library's pinned requirements
                (``mlflow-skinny`` and ``sagemaker-mlflow``, every dependency pinned with its sha256). A file of
                your own is installed the same way: pinned with ``--hash`` it is reproducible too.
            pip_arguments: more arguments for ``pip install``, e.g. ``["--index-url", "https://mirror/simple"]`` for
                a package mirror. Default: none.
            description: the layer version's description. Default: says what it holds and where it comes from.
            removal_policy: what happens to the layer version when it leaves the stack. Default: CDK's (DESTROY).
        """
        where = f"{scope.node.path}/{id}" if scope.node.path else id
        path = LOCK if requirements is None else Path(os.fspath(requirements))
        if not path.is_file():
            raise ConfigurationError(f"no requirements file at {str(path)!r}; pass the path of a pip requirements file.",
                                     where=where, field="requirements", value=str(path))
        if isinstance(pip_arguments, str) or not all(isinstance(a, str) for a in pip_arguments):
            raise ConfigurationTypeError(f"expected a list of strings, got {pip_arguments!r}.", where=where,
                                         field="pip_arguments", value=pip_arguments)
        self._bundler = _PipInstall(path.resolve(), pip_arguments, where)
        inputs = {"format": _FORMAT, "requirements": path.read_text(), "platform": pip_platform_arguments(),
                  "pip": list(pip_arguments)}
        docker = " ".join(_install_command(f"/asset-input/{path.name}", "/asset-output/python", pip_arguments, "python"))
        code = lambda_.Code.from_asset(
            str(path.resolve().parent),
            asset_hash_type=cdk.AssetHashType.CUSTOM,
            asset_hash=hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest(),
            bundling=cdk.BundlingOptions(image=lambda_.Runtime.PYTHON_3_14.bundling_image,
                                         command=["bash", "-c", f"{docker} && rm -rf /asset-output/python/bin"],
                                         local=self._bundler),
        )
        try:
            super().__init__(
                scope, id, code=code,
                compatible_runtimes=[lambda_.Runtime.PYTHON_3_14],
                compatible_architectures=[lambda_.Architecture.ARM_64],
                description=description or f"MLflow client for the rule evaluator, from {path.name} "
                                           f"(cdk-sagemaker-debugger MlflowLayer)",
                removal_policy=removal_policy,
            )
        except Exception:
            if self._bundler.error is not None:
                raise self._bundler.error from None
            raise

    @property
    def unzipped_bytes(self) -> int | None:
        """The built layer's size, unzipped (None when this synth skipped bundling the stack)."""
        return self._bundler.unzipped_bytes

    @classmethod
    def shared(cls, scope: Construct) -> MlflowLayer:
        """The stack's one layer from the library's requirements (made on first use): every evaluator of the stack
        that writes MLflow loads the same layer version."""
        stack = cdk.Stack.of(scope)
        found = stack.node.try_find_child(_SHARED_ID)
        return found if isinstance(found, MlflowLayer) else cls(stack, _SHARED_ID)
