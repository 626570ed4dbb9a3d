"""SageMaker Pipelines definitions (schema version 2020-12-01) built from a rendered CreateTrainingJob request.

A Training step is ``{"Name", "Type": "Training", "Arguments": <CreateTrainingJob request without TrainingJobName>}``
(plus optional ``DependsOn``, ``DisplayName``, ``Description``, ``CacheConfig``): Pipelines names each job itself,
``pipelines-<execution id>-<step name>-<random>`` (for example ``pipelines-kytlemm1lvpq-PreprocessingStep-cIpzShs3Qp``
in aws/amazon-sagemaker-examples#3106), so a job-name prefix does not select those jobs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import regex

from .api_model import request_problems, sagemaker_model
from .errors import ConfigurationError, ConfigurationTypeError, RequestValidationError
from .parameters import is_token

__all__ = [
    "PIPELINE_SCHEMA_VERSION",
    "PLACEHOLDER_JOB_NAME",
    "training_step",
    "pipeline_definition",
]

PIPELINE_SCHEMA_VERSION = "2020-12-01"
#: Stands in for the name Pipelines generates, when the step's Arguments go through the CreateTrainingJob check.
PLACEHOLDER_JOB_NAME = "pipelines-0000000000ab-Step-0000000000"


def _check_string(value: Any, shape_name: str, field: str, where: Any) -> None:
    """``value`` against a string shape of the SageMaker model (length and pattern); tokens are skipped."""
    if value is None or is_token(value):
        return
    if not isinstance(value, str):
        raise ConfigurationTypeError(f"expected a string, got {type(value).__name__} {value!r}.", where=where,
                                     field=field, value=value)
    meta = sagemaker_model().shape_for(shape_name).metadata
    low, high, pattern = meta.get("min", 0), meta.get("max", len(value)), meta.get("pattern")
    if not low <= len(value) <= high or (pattern and not regex.fullmatch(pattern, value)):
        raise ConfigurationError(f"{value!r} must be {low}-{high} characters matching {pattern} (SageMaker's "
                                 f"{shape_name}).", where=where, field=field, value=value)


def training_step(
    name: str,
    request: Mapping[str, Any],
    *,
    depends_on: Sequence[str] | None = None,
    display_name: str | None = None,
    description: str | None = None,
    cache_expire_after: str | None = None,
    where: Any = None,
) -> dict[str, Any]:
    """A Training step running ``request`` (TrainingJobName removed; ExperimentConfig trimmed to its
    TrialComponentDisplayName like the SageMaker Python SDK). Its Arguments must pass the CreateTrainingJob check."""
    _check_string(name, "StepName", "name", where)
    if not name:
        raise ConfigurationError("a step needs a name (letters, digits, '-' and '_', up to 64 characters).",
                                 where=where, field="name", value=name)
    _check_string(display_name, "StepDisplayName", "display_name", where)
    _check_string(description, "StepDescription", "description", where)
    arguments = {key: value for key, value in request.items() if key != "TrainingJobName"}
    experiment = arguments.pop("ExperimentConfig", None)
    if experiment and experiment.get("TrialComponentDisplayName"):
        arguments["ExperimentConfig"] = {"TrialComponentDisplayName": experiment["TrialComponentDisplayName"]}
    problems = request_problems({"TrainingJobName": PLACEHOLDER_JOB_NAME, **arguments})
    if problems:
        lines = "\n".join(f"  - {path}: {problem}" for path, problem in problems)
        raise RequestValidationError(f"the Arguments of Training step {name!r} are not a valid CreateTrainingJob "
                                     f"request ({len(problems)} problem(s)):\n{lines}", where=where)
    step: dict[str, Any] = {"Name": name, "Type": "Training", "Arguments": arguments}
    if depends_on:
        if isinstance(depends_on, str):
            raise ConfigurationTypeError(f"expected a list of step names, got the string {depends_on!r}; write "
                                         f"depends_on=[{depends_on!r}].", where=where, field="depends_on",
                                         value=depends_on)
        step["DependsOn"] = list(depends_on)
    for key, value in (("DisplayName", display_name), ("Description", description)):
        if value is not None:
            step[key] = value
    if cache_expire_after is not None:
        step["CacheConfig"] = {"Enabled": True, "ExpireAfter": cache_expire_after}
    return step


def pipeline_definition(steps: Sequence[Mapping[str, Any]], *, where: Any = None) -> dict[str, Any]:
    """The pipeline definition document: unique step names, and DependsOn naming steps of this pipeline."""
    if isinstance(steps, (str, Mapping)) or not isinstance(steps, Sequence) or not steps:
        raise ConfigurationTypeError("expected a non-empty list of steps, e.g. steps=[job.pipeline_step('Train')].",
                                     where=where, field="steps", value=steps)
    names: list[str] = []
    for index, step in enumerate(steps):
        if not isinstance(step, Mapping) or not {"Name", "Type"} <= set(step):
            raise ConfigurationTypeError(f"step {index} is not a pipeline step (a mapping with Name and Type); build "
                                         "it with job.pipeline_step(name).", where=where, field=f"steps[{index}]",
                                         value=step)
        if step["Name"] in names:
            raise ConfigurationError(f"two steps are named {step['Name']!r}; step names must be unique in a pipeline.",
                                     where=where, field=f"steps[{index}].Name", value=step["Name"])
        names.append(step["Name"])
    for step in steps:
        missing = [d for d in step.get("DependsOn", ()) if d not in names]
        if missing:
            raise ConfigurationError(f"step {step['Name']!r} depends on {', '.join(map(repr, missing))}, which is not a "
                                     f"step of this pipeline (steps: {', '.join(names)}).", where=where,
                                     field="steps", value=missing)
    return {"Version": PIPELINE_SCHEMA_VERSION, "Metadata": {}, "Parameters": [], "Steps": [dict(s) for s in steps]}
