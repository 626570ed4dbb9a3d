"""AWS CDK v2 constructs for SageMaker training jobs with Debugger profiler rules.

Exports are resolved lazily (PEP 562): ``import cdk_sagemaker_debugger.rules`` or the CLI never starts the jsii runtime;
only touching a construct class imports ``aws_cdk``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # model layer (no aws_cdk)
    "ConfigurationError": "cdk_sagemaker_debugger.model.errors",
    "ConfigurationTypeError": "cdk_sagemaker_debugger.model.errors",
    "UnsupportedRegionError": "cdk_sagemaker_debugger.model.errors",
    "RequestValidationError": "cdk_sagemaker_debugger.model.errors",
    "ProfilerConfig": "cdk_sagemaker_debugger.model.profiler_config",
    "FrameworkProfile": "cdk_sagemaker_debugger.model.profiler_config",
    "DetailedProfilingConfig": "cdk_sagemaker_debugger.model.profiler_config",
    "DataloaderProfilingConfig": "cdk_sagemaker_debugger.model.profiler_config",
    "PythonProfilingConfig": "cdk_sagemaker_debugger.model.profiler_config",
    "HorovodProfilingConfig": "cdk_sagemaker_debugger.model.profiler_config",
    "SMDataParallelProfilingConfig": "cdk_sagemaker_debugger.model.profiler_config",
    "Email": "cdk_sagemaker_debugger.model.actions",
    "SMS": "cdk_sagemaker_debugger.model.actions",
    "StopTraining": "cdk_sagemaker_debugger.model.actions",
    "ActionList": "cdk_sagemaker_debugger.model.actions",
    "DebugHookConfig": "cdk_sagemaker_debugger.model.debug_hook",
    "CollectionConfig": "cdk_sagemaker_debugger.model.debug_hook",
    "TensorBoardOutputConfig": "cdk_sagemaker_debugger.model.debug_hook",
    "Distribution": "cdk_sagemaker_debugger.model.distribution",
    "RuleEngine": "cdk_sagemaker_debugger.model.rule_engine",
    "TrainingImageConfig": "cdk_sagemaker_debugger.model.request_members",
    "InstanceGroup": "cdk_sagemaker_debugger.model.request_members",
    "ExperimentConfig": "cdk_sagemaker_debugger.model.request_members",
    "MlflowConfig": "cdk_sagemaker_debugger.model.request_members",
    # constructs (import aws_cdk on first use)
    "ProfilerRuleSet": "cdk_sagemaker_debugger.constructs.rule_set",
    "ProfiledTrainingJob": "cdk_sagemaker_debugger.constructs.training_job",
    "InputChannel": "cdk_sagemaker_debugger.constructs.training_job",
    "Sampler": "cdk_sagemaker_debugger.constructs.sampler",
    "HangAction": "cdk_sagemaker_debugger.constructs.sampler",
    "RuleAlarm": "cdk_sagemaker_debugger.constructs.rule_alarm",
    "RuleEvaluator": "cdk_sagemaker_debugger.constructs.rule_evaluator",
    "MetricsSource": "cdk_sagemaker_debugger.constructs.rule_evaluator",
    "EvaluatorMlflow": "cdk_sagemaker_debugger.constructs.evaluator_mlflow",
    "MlflowLayer": "cdk_sagemaker_debugger.constructs.mlflow_layer",
    "TrainingPipeline": "cdk_sagemaker_debugger.constructs.pipeline",
    "TrainingDashboard": "cdk_sagemaker_debugger.constructs.dashboard",
    "TrainingJobs": "cdk_sagemaker_debugger.constructs.family",
    "TrainingCode": "cdk_sagemaker_debugger.constructs.training_code",
    "Checkpoints": "cdk_sagemaker_debugger.constructs.checkpoints",
}

_SUBMODULES = {"rules", "images", "debugger_rules", "model", "constructs", "runtime", "cli", "sampler"}

__all__ = sorted([*_EXPORTS, *_SUBMODULES])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from . import debugger_rules, images, rules  # noqa: F401
    from .constructs.checkpoints import Checkpoints  # noqa: F401
    from .constructs.dashboard import TrainingDashboard  # noqa: F401
    from .constructs.evaluator_mlflow import EvaluatorMlflow  # noqa: F401
    from .constructs.family import TrainingJobs  # noqa: F401
    from .constructs.mlflow_layer import MlflowLayer  # noqa: F401
    from .constructs.pipeline import TrainingPipeline  # noqa: F401
    from .constructs.rule_alarm import RuleAlarm  # noqa: F401
    from .constructs.rule_evaluator import MetricsSource, RuleEvaluator  # noqa: F401
    from .constructs.rule_set import ProfilerRuleSet  # noqa: F401
    from .constructs.sampler import HangAction, Sampler  # noqa: F401
    from .constructs.training_code import TrainingCode  # noqa: F401
    from .constructs.training_job import InputChannel, ProfiledTrainingJob  # noqa: F401
    from .model.actions import SMS, ActionList, Email, StopTraining  # noqa: F401
    from .model.debug_hook import CollectionConfig, DebugHookConfig, TensorBoardOutputConfig  # noqa: F401
    from .model.distribution import Distribution  # noqa: F401
    from .model.errors import (  # noqa: F401
        ConfigurationError,
        ConfigurationTypeError,
        RequestValidationError,
        UnsupportedRegionError,
    )
    from .model.request_members import ExperimentConfig, InstanceGroup, MlflowConfig, TrainingImageConfig  # noqa: F401
    from .model.rule_engine import RuleEngine  # noqa: F401
