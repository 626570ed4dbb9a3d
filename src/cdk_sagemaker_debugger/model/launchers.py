"""What a :class:`~cdk_sagemaker_debugger.Distribution` puts in HyperParameters, and what it refuses, exactly as the
SageMaker Python SDK's ``sagemaker.pytorch.PyTorch`` estimator does.

The toolkit in the AWS Deep Learning Containers (``sagemaker-training`` and the framework toolkits) starts the script
with the launcher these hyperparameters name: ``sagemaker_torch_distributed_enabled`` runs torchrun on every host,
``sagemaker_mpi_enabled`` runs mpirun, ``sagemaker_distributed_dataparallel_enabled`` runs SMDDP. The SDK sets no
environment variable for any launcher, so neither does this module.

Source: ``sagemaker`` 2.257.7, ``sagemaker/estimator.py`` (``Framework._distribution_configuration``),
``sagemaker/pytorch/estimator.py`` (``_pytorch_distribution_configuration``, the ``pytorchddp`` rewrite) and
``sagemaker/fw_utils.py`` (``validate_distribution``, ``validate_torch_distributed_distribution``,
``validate_smdistributed``, the version lists below). tests/model/test_sdk_parity.py runs that SDK over a grid of inputs
and compares.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError
from .frameworks import FrameworkInfo
from .parameters import is_token

if TYPE_CHECKING:  # pragma: no cover
    from .distribution import Distribution

__all__ = [
    "TORCH_DISTRIBUTED_GPU_VERSIONS",
    "TORCH_DISTRIBUTED_TRAINIUM_VERSIONS",
    "SMDDP_VERSIONS",
    "LAUNCHER_HYPERPARAMETERS",
    "to_sdk",
    "launcher_hyperparameters",
    "check_launcher",
    "check_model_parallel_parameters",
]

#: ``fw_utils.TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS`` (sagemaker 2.257.7).
TORCH_DISTRIBUTED_GPU_VERSIONS = ("1.13.1", "2.0.0", "2.0.1", "2.1.0", "2.1.2", "2.2.0", "2.3.0", "2.3.1", "2.4.1",
                                  "2.5.1", "2.6.0", "2.7.1", "2.8.0")
#: ``fw_utils.TRAINIUM_SUPPORTED_TORCH_DISTRIBUTED_FRAMEWORK_VERSIONS``.
TORCH_DISTRIBUTED_TRAINIUM_VERSIONS = ("1.11", "1.11.0", "1.12", "1.12.0", "1.12.1", "1.13.1", "2.0.0")
#: ``fw_utils.SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS`` (SMDDP, and ``pytorchddp``, which the SDK rewrites to it).
SMDDP_VERSIONS = {
    "pytorch": ("1.6", "1.6.0", "1.7", "1.7.1", "1.8", "1.8.0", "1.8.1", "1.9", "1.9.0", "1.9.1", "1.10", "1.10.0",
                "1.10.2", "1.11", "1.11.0", "1.12", "1.12.0", "1.12.1", "1.13.1", "2.0.0", "2.0.1", "2.1.0", "2.1.2",
                "2.2.0"),
    "tensorflow": ("2.3", "2.3.1", "2.3.2", "2.4", "2.4.1", "2.4.3", "2.5", "2.5.0", "2.5.1", "2.6", "2.6.0", "2.6.2",
                   "2.6.3", "2.7", "2.7.1", "2.8", "2.8.0", "2.9", "2.9.1", "2.9.2", "2.10", "2.10.1", "2.11", "2.11.0"),
}
#: ``Framework.UNSUPPORTED_DLC_IMAGE_FOR_SM_PARALLELISM``: image tags the SMDDP/SMP libraries do not work with.
_SMDISTRIBUTED_UNSUPPORTED_IMAGES = ("2.0.1-gpu-py310-cu121",)
#: Every hyperparameter a launcher may set; the same names in ``hyperparameters=`` are refused.
LAUNCHER_HYPERPARAMETERS = (
    "sagemaker_torch_distributed_enabled", "sagemaker_instance_type", "sagemaker_mpi_enabled",
    "sagemaker_mpi_num_of_processes_per_host", "sagemaker_mpi_custom_mpi_options",
    "sagemaker_distributed_dataparallel_enabled", "sagemaker_distributed_dataparallel_custom_mpi_options",
    "mp_parameters", "sagemaker_parameter_server_enabled",
)
_FAMILY = re.compile(r"^ml[._]([a-z\d\-]+)\.?\w*$")  # the SDK's instance-family pattern


def _family(instance_type: str) -> str:
    match = _FAMILY.match(instance_type)
    return match[1] if match else ""


def to_sdk(distribution: Distribution) -> dict[str, Any]:
    """The SDK's ``distribution=`` dict for the same launcher (what :meth:`cdk_sagemaker_debugger.Distribution.from_sdk` reads back)."""
    kind = distribution.kind
    if kind == "torch_distributed":
        return {"torch_distributed": {"enabled": True}}
    if kind == "pytorch_ddp":
        return {"pytorchddp": {"enabled": True}}
    if kind == "parameter_server":
        return {"parameter_server": {"enabled": True}}
    if kind == "smdistributed_dataparallel":
        section: dict[str, Any] = {"enabled": True}
        if distribution.custom_mpi_options is not None:
            section["custom_mpi_options"] = distribution.custom_mpi_options
        return {"smdistributed": {"dataparallel": section}}
    mpi: dict[str, Any] = {"enabled": True}
    if distribution.processes_per_host is not None:
        mpi["processes_per_host"] = distribution.processes_per_host
    if distribution.custom_mpi_options is not None:
        mpi["custom_mpi_options"] = distribution.custom_mpi_options
    if kind == "mpi":
        return {"mpi": mpi}
    return {"smdistributed": {"modelparallel": {"enabled": True, "parameters": dict(distribution.parameters or {})}},
            "mpi": mpi}


def _mpi(distribution: Distribution) -> dict[str, Any]:
    values: dict[str, Any] = {"sagemaker_mpi_enabled": True}
    if distribution.processes_per_host:  # the SDK leaves out a missing (or zero) count
        values["sagemaker_mpi_num_of_processes_per_host"] = distribution.processes_per_host
    values["sagemaker_mpi_custom_mpi_options"] = distribution.custom_mpi_options or ""
    return values


def launcher_hyperparameters(distribution: Distribution | None, instance_type: str) -> dict[str, str]:
    """The launcher's hyperparameters, JSON-encoded in the SDK's order (empty without a distribution)."""
    if distribution is None:
        return {}
    kind = distribution.kind
    values: dict[str, Any]
    if kind == "torch_distributed":
        values = {"sagemaker_torch_distributed_enabled": True, "sagemaker_instance_type": instance_type}
    elif kind == "parameter_server":
        values = {"sagemaker_parameter_server_enabled": True}
    elif kind == "mpi":
        values = _mpi(distribution)
    elif kind == "smdistributed_modelparallel":
        values = {**_mpi(distribution), "mp_parameters": dict(distribution.parameters or {}),
                  "sagemaker_distributed_dataparallel_enabled": False, "sagemaker_instance_type": instance_type}
    else:  # SMDDP, and pytorch_ddp, which the SDK rewrites to SMDDP
        values = {"sagemaker_distributed_dataparallel_enabled": True, "sagemaker_instance_type": instance_type,
                  "sagemaker_distributed_dataparallel_custom_mpi_options": distribution.custom_mpi_options or ""}
    return {key: json.dumps(value) for key, value in values.items()}


def _refuse(distribution: Distribution, message: str, where: str | None, field: str = "distribution") -> None:
    raise ConfigurationError(f"{distribution.label}: {message}", where=where, field=field, value=distribution.kind)


def _supported(version: FrameworkInfo, versions: tuple[str, ...]) -> bool:
    """The SDK compares framework_version strings; a DLC tag such as ``2.3-gpu-py311`` names a minor version, which
    passes when one of its patch releases is supported."""
    text = version.version_string
    return text in versions or (len(version.version or ()) == 2 and any(v.startswith(f"{text}.") for v in versions))


def _check_versions(distribution: Distribution, framework: FrameworkInfo, instance_type: str,
                    where: str | None) -> None:
    kind = distribution.kind
    if kind == "torch_distributed" and framework.name == "pytorch":
        family = _family(instance_type)
        if family.startswith(("p", "g")):
            versions = TORCH_DISTRIBUTED_GPU_VERSIONS
        elif family.startswith("trn"):
            versions = TORCH_DISTRIBUTED_TRAINIUM_VERSIONS
        else:
            _refuse(distribution, f"torchrun is supported on GPU (ml.p*, ml.g*) and Trainium (ml.trn*) instances "
                    f"only, got {instance_type}. Choose such an instance type, or another distribution.", where,
                    "instance_type")
            return
        if framework.version is not None and not _supported(framework, versions):
            _refuse(distribution, f"PyTorch {framework.version_string} is not supported on {instance_type}; use an "
                    f"image of one of the versions {', '.join(versions)} (the SageMaker Python SDK's list).", where,
                    "training_image")
    if kind in ("smdistributed_dataparallel", "pytorch_ddp") and framework.name in SMDDP_VERSIONS:
        versions = SMDDP_VERSIONS[framework.name]
        if framework.version is not None and not _supported(framework, versions):
            _refuse(distribution, f"{framework.name} {framework.version_string} is not supported by SMDDP; use an "
                    f"image of one of the versions {', '.join(versions)}, or Distribution.torch_distributed() for "
                    "newer PyTorch.", where, "training_image")


def check_launcher(distribution: Distribution | None, *, framework: FrameworkInfo | None, training_image: str | None,
                   instance_type: str, entry_point: str | None = None, where: str | None = None) -> None:
    """Refuse what the SDK refuses for this launcher. Versions are read from the image tag (the SDK checks
    ``framework_version``); images this library cannot read, and token instance types, skip those checks."""
    if distribution is None or is_token(instance_type):
        return
    kind = distribution.kind
    if _family(instance_type).startswith("trn") and kind != "torch_distributed":
        _refuse(distribution, f"Trainium instances ({instance_type}) run only Distribution.torch_distributed().",
                where, "instance_type")
    if kind.startswith("smdistributed") or kind == "pytorch_ddp":
        if "p5.48xlarge" in instance_type:
            _refuse(distribution, "the SageMaker model and data parallel libraries do not support p5 instances; use "
                    "Distribution.torch_distributed().", where, "instance_type")
        image = training_image or ""
        if not is_token(image) and any(tag in image for tag in _SMDISTRIBUTED_UNSUPPORTED_IMAGES):
            _refuse(distribution, f"the SageMaker distributed libraries do not work with the image {image} (its CUDA "
                    "version); use another image.", where, "training_image")
    if kind == "torch_distributed" and entry_point is not None and not entry_point.endswith(".py"):
        _refuse(distribution, f"torchrun runs Python programs (*.py) only, got entry_point {entry_point!r}.", where,
                "entry_point")
    if kind == "smdistributed_modelparallel":
        check_model_parallel_parameters(distribution.parameters, where=where)
    if framework is not None:
        _check_versions(distribution, framework, instance_type, where)


def check_model_parallel_parameters(parameters: Mapping[str, Any] | None, *, where: str | None = None) -> None:
    """The SDK's ``validate_mp_config``: ``partitions`` is required and positive."""
    params = dict(parameters or {})
    partitions = params.get("partitions")
    if partitions is None or is_token(partitions):
        if partitions is None:
            raise ConfigurationError("'partitions' is a required parameter of model parallelism, e.g. "
                                     "parameters={'partitions': 2}.", where=where, field="parameters")
        return
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise ConfigurationError(f"'partitions' must be a positive integer, got {partitions!r}.", where=where,
                                 field="parameters.partitions", value=partitions)
