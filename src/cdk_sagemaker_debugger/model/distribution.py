"""Distributed-training settings and the synth-time guard rails for Debugger features used with them.

The AWS "distributed training supported by Debugger" table and the SageMaker Python SDK's behaviour decide what is
checked. The SDK silently drops the hook (checkpointing, parameter server) or does nothing (model parallel); here the
combinations that cannot work fail at synth with the reason and the fix, and the ones that work partly return warnings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from .errors import ConfigurationError, ConfigurationTypeError, did_you_mean
from .frameworks import FrameworkInfo
from .images import check_debugger_region
from .parameters import is_token

__all__ = [
    "Distribution",
    "DebuggerFeatures",
    "check_debugger_compatibility",
    "is_trainium",
    "CHECKPOINTING_MESSAGE",
]

#: The message the SageMaker Python SDK logs (and the AWS docs quote) for distributed training with checkpointing.
CHECKPOINTING_MESSAGE = "SMDebug Does Not Currently Support Distributed Training Jobs With Checkpointing Enabled"

_TRAINIUM = re.compile(r"ml[._]trn[a-z0-9-]*(\..*)?")

_MPI = "mpi"
_DATA_PARALLEL = "smdistributed_dataparallel"
_MODEL_PARALLEL = "smdistributed_modelparallel"
_PARAMETER_SERVER = "parameter_server"
_TORCH_DISTRIBUTED = "torch_distributed"
_PYTORCH_DDP = "pytorch_ddp"

_LABELS = {
    _MPI: "MPI/Horovod",
    _DATA_PARALLEL: "SageMaker distributed data parallel (SMDDP)",
    _MODEL_PARALLEL: "SageMaker distributed model parallel",
    _PARAMETER_SERVER: "parameter server",
    _TORCH_DISTRIBUTED: "torch_distributed",
    _PYTORCH_DDP: "PyTorch DDP on SMDDP (pytorchddp)",
}


def is_trainium(instance_type: str | None) -> bool:
    """True for AWS Trainium training instances (``ml.trn1.32xlarge``, ``ml.trn2.48xlarge``, ...)."""
    return isinstance(instance_type, str) and not is_token(instance_type) and bool(_TRAINIUM.fullmatch(instance_type))


@dataclass(frozen=True)
class Distribution:
    """How the training script is launched on each host. Build it with the class methods, or from the SDK's dict
    with :meth:`from_sdk`.

    With ``code=TrainingCode...`` on a framework image, :meth:`hyperparameters` (the launcher's hyperparameters, as
    the SageMaker Python SDK sets them) go into the request and the toolkit in the container starts the launcher;
    what the SDK refuses (framework version, instance type, entry point) is refused when the job is created. It also
    drives Debugger's guard rails."""

    kind: str
    processes_per_host: int | None = None
    custom_mpi_options: str | None = None
    parameters: Mapping[str, Any] | None = None

    KINDS: ClassVar[tuple[str, ...]] = tuple(_LABELS)

    def __post_init__(self) -> None:
        if self.kind not in _LABELS:
            raise ConfigurationError(
                f"unknown distribution {self.kind!r}.{did_you_mean(str(self.kind), _LABELS)} "
                f"Use one of {', '.join(_LABELS)}.",
                where="Distribution",
                field="kind",
                value=self.kind,
            )
        count = self.processes_per_host
        if count is not None and not is_token(count):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ConfigurationError(
                    f"must be a positive integer, got {count!r}.", where="Distribution", field="processes_per_host", value=count
                )

    @property
    def label(self) -> str:
        return _LABELS[self.kind]

    @classmethod
    def mpi(cls, *, processes_per_host: int | None = None, custom_mpi_options: str | None = None) -> Distribution:
        """MPI, which is how Horovod jobs run."""
        return cls(_MPI, processes_per_host=processes_per_host, custom_mpi_options=custom_mpi_options)

    horovod = mpi

    @classmethod
    def smdistributed_data_parallel(cls, *, custom_mpi_options: str | None = None) -> Distribution:
        """The SageMaker distributed data parallel library (SMDDP), on ml.p3.16xlarge/p3dn/p4d/p4de.

        Args:
            custom_mpi_options: extra mpirun options. Default: None (``""``, as the SDK sends).
        """
        return cls(_DATA_PARALLEL, custom_mpi_options=custom_mpi_options)

    @classmethod
    def smdistributed_model_parallel(cls, *, parameters: Mapping[str, Any] | None = None,
                                     processes_per_host: int | None = None,
                                     custom_mpi_options: str | None = None) -> Distribution:
        """The SageMaker model parallel library, launched with MPI (as its documentation configures it).

        Args:
            parameters: the library's parameters (``mp_parameters``); ``partitions`` is required when the job
                ships its code (``code=``). Default: None.
            processes_per_host: MPI processes per host, usually the GPUs per instance. Default: None.
            custom_mpi_options: extra mpirun options. Default: None.
        """
        return cls(_MODEL_PARALLEL, parameters=parameters, processes_per_host=processes_per_host,
                   custom_mpi_options=custom_mpi_options)

    @classmethod
    def parameter_server(cls) -> Distribution:
        return cls(_PARAMETER_SERVER)

    @classmethod
    def torch_distributed(cls) -> Distribution:
        """torchrun on every host (``sagemaker_torch_distributed_enabled``), on GPU and Trainium instances."""
        return cls(_TORCH_DISTRIBUTED)

    @classmethod
    def pytorch_ddp(cls) -> Distribution:
        """The SDK's ``{"pytorchddp": {"enabled": True}}``, which the SDK turns into SMDDP (same hyperparameters and
        PyTorch versions as :meth:`smdistributed_data_parallel`)."""
        return cls(_PYTORCH_DDP)

    def to_sdk(self) -> dict[str, Any]:
        """The SageMaker Python SDK's ``distribution=`` dict for this launcher."""
        from .launchers import to_sdk

        return to_sdk(self)

    def hyperparameters(self, instance_type: str) -> dict[str, str]:
        """The HyperParameters the SDK sets for this launcher on ``instance_type``, JSON-encoded as it sends them."""
        from .launchers import launcher_hyperparameters

        return launcher_hyperparameters(self, instance_type)

    @classmethod
    def from_sdk(cls, distribution: Mapping[str, Any]) -> Distribution | None:
        """Read the SDK's ``distribution=`` dict, e.g. ``{"smdistributed": {"dataparallel": {"enabled": True}}}``.

        Returns None when nothing in it is enabled.
        """
        if not isinstance(distribution, Mapping):
            raise ConfigurationTypeError(
                f"expected the SageMaker SDK's distribution dict, got {type(distribution).__name__}.",
                where="Distribution",
                field="distribution",
                value=distribution,
            )
        found: list[Distribution] = []
        for key, section in distribution.items():
            if key == "smdistributed" and isinstance(section, Mapping):
                for sub, sub_section in section.items():
                    kind = {"dataparallel": _DATA_PARALLEL, "modelparallel": _MODEL_PARALLEL}.get(sub)
                    if kind is None:
                        raise ConfigurationError(
                            f"unknown smdistributed library {sub!r}; use 'dataparallel' or 'modelparallel'.",
                            where="Distribution",
                            field=f"smdistributed.{sub}",
                        )
                    if _enabled(sub_section):
                        found.append(cls(kind, parameters=sub_section.get("parameters"),
                                         custom_mpi_options=sub_section.get("custom_mpi_options")
                                         if kind == _DATA_PARALLEL else None))
            elif key in (_MPI, _PARAMETER_SERVER, _TORCH_DISTRIBUTED, "pytorchddp"):
                if _enabled(section):
                    kind = _PYTORCH_DDP if key == "pytorchddp" else key
                    if kind == _MPI:
                        found.append(
                            cls.mpi(
                                processes_per_host=section.get("processes_per_host"),
                                custom_mpi_options=section.get("custom_mpi_options"),
                            )
                        )
                    else:
                        found.append(cls(kind))
            else:
                known = ["mpi", "smdistributed", "parameter_server", "torch_distributed", "pytorchddp"]
                raise ConfigurationError(
                    f"unknown distribution key {key!r}.{did_you_mean(str(key), known)} Known: {', '.join(known)}.",
                    where="Distribution",
                    field=str(key),
                )
        found = _merge_model_parallel_mpi(found)
        if len(found) > 1:
            raise ConfigurationError(
                f"enables more than one strategy ({', '.join(d.label for d in found)}); a job uses one.",
                where="Distribution",
                field="distribution",
            )
        return found[0] if found else None


def _merge_model_parallel_mpi(found: list[Distribution]) -> list[Distribution]:
    """The SDK's model parallel dict enables ``mpi`` too: one launcher, with the MPI settings."""
    kinds = [d.kind for d in found]
    if sorted(kinds) != sorted([_MODEL_PARALLEL, _MPI]):
        return found
    model, mpi = found[kinds.index(_MODEL_PARALLEL)], found[kinds.index(_MPI)]
    return [Distribution(_MODEL_PARALLEL, parameters=model.parameters, processes_per_host=mpi.processes_per_host,
                         custom_mpi_options=mpi.custom_mpi_options)]


def _enabled(section: Any) -> bool:
    return isinstance(section, Mapping) and section.get("enabled") is True


@dataclass(frozen=True)
class DebuggerFeatures:
    """Which Debugger features a training job uses.

    ``system_monitoring``: the profiler collects system metrics (on unless ProfilerConfig(disable_profiler=True)).
    ``framework_profiling``: a FrameworkProfile is configured; ``profiles_collectives`` when it includes the Horovod or
    SMDDP profiling configs. ``profiler_rules``: any profiler rule. ``tensor_debugging``: the debugger hook or any
    debugger rule.
    """

    system_monitoring: bool = False
    framework_profiling: bool = False
    profiles_collectives: bool = False
    profiler_rules: bool = False
    tensor_debugging: bool = False

    @property
    def profiler(self) -> bool:
        return self.system_monitoring or self.framework_profiling or self.profiler_rules

    @property
    def any(self) -> bool:
        return self.profiler or self.tensor_debugging


_DISPLAY_NAMES = {"tensorflow": "TensorFlow", "pytorch": "PyTorch", "mxnet": "MXNet", "xgboost": "XGBoost"}

_FRAMEWORKS_BY_KIND = {
    _MPI: ("tensorflow", "pytorch", "mxnet"),  # the Horovod table of the Debugger documentation
    _DATA_PARALLEL: ("tensorflow", "pytorch"),
    _MODEL_PARALLEL: ("tensorflow", "pytorch"),
    _PARAMETER_SERVER: ("tensorflow", "mxnet"),
    _TORCH_DISTRIBUTED: ("pytorch",),
    _PYTORCH_DDP: ("pytorch",),
}


def _check_framework(distribution: Distribution, framework: FrameworkInfo | None, where: str | None) -> None:
    if framework is None:
        return
    supported = _FRAMEWORKS_BY_KIND[distribution.kind]
    if framework.name not in supported:
        names = [_DISPLAY_NAMES.get(name, name) for name in supported]
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
        raise ConfigurationError(
            f"{distribution.label} runs {listed} training, but the training image is "
            f"{_DISPLAY_NAMES.get(framework.name, framework.name)} {framework.version_string}. Use a matching "
            "framework image or remove the distribution.",
            where=where,
            field="distribution",
            value=distribution.kind,
        )
    if distribution.kind == _DATA_PARALLEL and framework.name == "tensorflow" and framework.version and framework.version[0] < 2:
        raise ConfigurationError(
            f"{distribution.label} supports TensorFlow 2.x, but the training image is TensorFlow "
            f"{framework.version_string}. Use a TensorFlow 2.x image, or MPI/Horovod.",
            where=where,
            field="distribution",
            value=distribution.kind,
        )


def _framework_profiling_warnings(distribution: Distribution, framework: FrameworkInfo | None) -> list[str]:
    warnings = []
    if framework is not None:
        if distribution.kind == _MPI and framework.name == "mxnet":
            warnings.append(
                "Framework profiling is not collected for MXNet training with Horovod; only system metrics are."
            )
        elif distribution.kind == _MPI and framework.name == "tensorflow":
            warnings.append(
                "Framework profiling with Horovod is collected only for TensorFlow 2.x models built with Keras; "
                f"with TensorFlow {framework.version_string} and other model APIs only system metrics are collected."
            )
        elif distribution.kind == _DATA_PARALLEL and framework.name == "tensorflow":
            warnings.append(
                "Debugger does not profile TensorFlow 2.x framework operations under SMDDP; only system metrics "
                "and tensors are collected."
            )
    return warnings


def check_debugger_compatibility(
    *,
    features: DebuggerFeatures,
    distribution: Distribution | None = None,
    framework: FrameworkInfo | None = None,
    instance_type: str | None = None,
    instance_count: int | None = 1,
    checkpointing: bool = False,
    region: str | None = None,
    where: str | None = None,
) -> list[str]:
    """Check a training job's Debugger features against its region, instances, distribution and checkpointing.

    Raises :class:`cdk_sagemaker_debugger.ConfigurationError` (or ``UnsupportedRegionError``) for combinations that cannot work and returns
    warnings for those that work partly. ``region`` None or a token (environment-agnostic stack) skips the region check.
    """
    warnings: list[str] = []
    if features.any and isinstance(region, str) and not is_token(region):
        check_debugger_region(region, where=where)

    if features.profiler and is_trainium(instance_type):
        raise ConfigurationError(
            f"{instance_type} is an AWS Trainium instance, where the SageMaker profiler is not supported. Turn it off: "
            "profiler=ProfilerConfig(disable_profiler=True) and no profiler rules (debugger rules still work).",
            where=where,
            field="instance_type",
            value=instance_type,
        )

    if distribution is not None:
        warnings += _distribution_warnings(features, distribution, framework, where)
    _check_checkpointing(features, distribution, instance_count, checkpointing, where)
    return warnings


def _distribution_warnings(
    features: DebuggerFeatures, distribution: Distribution, framework: FrameworkInfo | None, where: str | None
) -> list[str]:
    """What Debugger cannot do under ``distribution``: raises for features it refuses, warns about partial data."""
    warnings: list[str] = []
    _check_framework(distribution, framework, where)
    if distribution.kind in (_MODEL_PARALLEL, _PARAMETER_SERVER):
        reason = f"SageMaker Debugger does not support {distribution.label} training"
        if features.tensor_debugging or features.framework_profiling:
            used = []
            if features.tensor_debugging:
                used.append("the debugger hook/rules")
            if features.framework_profiling:
                used.append("framework profiling")
            raise ConfigurationError(
                f"{reason}, but {' and '.join(used)} are configured. Remove debug_hook, debugger_rules and "
                "framework_profile (system monitoring may stay), or use another distribution strategy.",
                where=where,
                field="distribution",
                value=distribution.kind,
            )
        if features.profiler:
            warnings.append(
                f"{reason}; system monitoring and profiler rules may report incomplete data for this job."
            )
    if features.framework_profiling:
        warnings += _framework_profiling_warnings(distribution, framework)
    if distribution.kind in (_MPI, _DATA_PARALLEL) and features.profiles_collectives:
        warnings.append(
            f"Framework profiling does not collect the collective operations of {distribution.label} "
            "(AllReduce and Horovod operations); their time shows only in step durations."
        )
    return warnings


def _check_checkpointing(features: DebuggerFeatures, distribution: Distribution | None, instance_count: int | None,
                         checkpointing: bool, where: str | None) -> None:
    """SageMaker checkpointing and the debugger hook cannot share a multi-instance or distributed job."""
    multi_instance = isinstance(instance_count, int) and not is_token(instance_count) and instance_count > 1
    if checkpointing and features.tensor_debugging and (multi_instance or distribution is not None):
        shape = distribution.label if distribution is not None else f"{instance_count} instances"
        raise ConfigurationError(
            f"{CHECKPOINTING_MESSAGE} ({shape} with checkpoint_s3_uri). Either disable SageMaker checkpointing "
            "(remove checkpoint_s3_uri and checkpoint_local_path) and save checkpoints from your training script, or "
            "remove debug_hook and debugger_rules from this job.",
            where=where,
            field="checkpoint_s3_uri",
        )
