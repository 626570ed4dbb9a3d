"""The checks of a ProfiledTrainingJob's props that need the construct (its path, stack and region): each returns the
value the job records. Everything else is checked in the model (``model/request/``)."""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2
from constructs import IValidation

from ...model.distribution import Distribution
from ...model.errors import ConfigurationError, ConfigurationTypeError
from ...model.images import partition_of
from ...model.parameters import is_token
from ...model.profiler_config import ProfilerConfig
from ...model.request.render import stopping_condition
from ...model.request.training import TRAINING_INPUT_MODES, check_instance, check_job_name_prefix, check_stopping
from .._cdk.checks import whole_seconds
from ..rule_set import ProfilerRuleSet
from ._shared import ECR_IMAGE, WARNING_PREFIX

if TYPE_CHECKING:  # pragma: no cover
    from ._parts import JobParts

__all__ = ["StackValidation", "check_identity", "check_profiler", "check_rule_set", "check_distribution",
           "check_stopping_condition", "check_dependent_props", "subnet_kwargs"]

_EXAMPLE_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
# Every job of an app by lower-cased job-name prefix (ARNs are lower case), to warn about prefixes that overlap.
_PREFIXES: weakref.WeakKeyDictionary[Any, list[JobParts]] = weakref.WeakKeyDictionary()
# The app of each stack, looked up once per stack (``node.root`` is two round trips to jsii).
_ROOTS: weakref.WeakKeyDictionary[cdk.Stack, Any] = weakref.WeakKeyDictionary()


def check_identity(job: JobParts, *, job_name_prefix: str, training_image: object,
                   algorithm_name: object, output_prefix: object, training_input_mode: str, instance_type: str,
                   instance_count: int, volume_size_in_gb: int) -> None:
    """What the job is and what it runs on: checked before anything else. Warns about an image in another region than
    the stack's and about a prefix another job of the app covers too."""
    where = job._where
    check_job_name_prefix(job_name_prefix, where=where)
    if (training_image is None) == (algorithm_name is None):
        raise ConfigurationError(
            "give exactly one of training_image= (a container image URI) or algorithm_name= (a SageMaker algorithm).",
            where=where, field="training_image")
    if not isinstance(output_prefix, str):
        raise ConfigurationTypeError(
            f"expected a key prefix string such as 'training' (the default), or '' for the bucket root, got "
            f"{type(output_prefix).__name__} {output_prefix!r}.",
            where=where, field="output_prefix", value=output_prefix)
    if training_image is not None:
        if not isinstance(training_image, str) or not training_image.strip():
            raise ConfigurationError(
                f"must be a container image URI such as '{_EXAMPLE_IMAGE}', got {training_image!r}.",
                where=where, field="training_image", value=training_image)
        _warn_about_image_region(job, training_image)
    _warn_about_shared_prefix(job, job_name_prefix)
    if training_input_mode not in TRAINING_INPUT_MODES:
        raise ConfigurationError(
            f"must be one of {', '.join(TRAINING_INPUT_MODES)}, got {training_input_mode!r}.",
            where=where, field="training_input_mode", value=training_input_mode)
    check_instance(instance_type, instance_count, volume_size_in_gb, where=where)


def _warn_about_image_region(job: JobParts, image: str) -> None:
    match = ECR_IMAGE.match(image) if not is_token(image) else None
    region = job._region
    if match is None or region is None or match["region"] == region:
        return
    cdk.Annotations.of(job).add_warning_v2(
        f"{WARNING_PREFIX}:trainingImageRegion",
        f"The training image {image!r} is in {match['region']}, but this stack deploys to {region}; "
        "SageMaker pulls the training image in the job's own region"
        + (f" and partition ({partition_of(region)})" if partition_of(match["region"]) != job._partition else "")
        + f", so the job would not start. Use the image's copy in {region} (for AWS Deep Learning "
        "Containers, the registry of that region).",
    )


def _warn_about_shared_prefix(job: JobParts, prefix: str) -> None:
    """Warn when another job of the same stack, or of a stack in the same region, has this prefix (ARNs ignore case),
    or one whose runs this one's cover. Jobs in other regions, or where a region is unknown, cannot be compared."""
    root = _ROOTS.get(job._stack)
    if root is None:
        root = _ROOTS[job._stack] = job._stack.node.root
    known = _PREFIXES.setdefault(root, [])
    mine = prefix.lower()
    for other_job in known:
        other = other_job.job_name_prefix.lower()
        same_place = other_job._stack is job._stack or (job._region is not None and other_job._region == job._region)
        if not same_place:
            continue
        if other == mine:
            overlap = "uses the same job_name_prefix"
        elif other.startswith(f"{mine}-") or mine.startswith(f"{other}-"):
            overlap = f"uses job_name_prefix {other_job.job_name_prefix!r}, and one job's names start with the other's"
        else:
            continue
        cdk.Annotations.of(job).add_warning_v2(
            f"{WARNING_PREFIX}:sharedJobNamePrefix",
            f"{other_job.node.path} {overlap} ({prefix!r}): the IAM grants (training-job/{mine}-*), RuleAlarm and "
            "RuleEvaluator of each job then also cover the other's runs, so a verdict about one can stop or notify "
            "about the other. Give each job a prefix that does not start another's, such as 'team-a-bert'.",
        )
    known.append(job)


def check_profiler(job: JobParts, profiler: Any, instance_type: str) -> ProfilerConfig:
    """Debugger's profiler as the rule engine decides (defaulted, or refused by RuleEngine.EVALUATOR)."""
    profiler = job._engine.profiler(profiler, instance_type)
    if not isinstance(profiler, ProfilerConfig):
        raise ConfigurationTypeError(
            f"expected a ProfilerConfig, got {type(profiler).__name__}.", where=job._where, field="profiler",
            value=profiler)
    return profiler


def check_rule_set(job: JobParts, rule_set: Any) -> ProfilerRuleSet | None:
    """A ProfilerRuleSet (a dict or a list of rules gets a hint how to wrap it), as the rule engine needs it."""
    if rule_set is not None and not isinstance(rule_set, ProfilerRuleSet):
        raise ConfigurationTypeError(
            f"expected a ProfilerRuleSet, got {type(rule_set).__name__}. Wrap the rules: "
            "ProfilerRuleSet(stack, 'Rules', rules=[...]).",
            where=job._where, field="rule_set", value=rule_set)
    job._engine.check_rule_set(rule_set)
    return rule_set


def check_distribution(job: JobParts, distribution: Any) -> Distribution | None:
    if distribution is not None and not isinstance(distribution, Distribution):
        hint = (" Convert the SageMaker SDK's dict with Distribution.from_sdk({...})."
                if isinstance(distribution, Mapping) else "")
        raise ConfigurationTypeError(
            f"expected a Distribution such as Distribution.mpi(), got {type(distribution).__name__}.{hint}",
            where=job._where, field="distribution", value=distribution)
    return distribution


def check_stopping_condition(job: JobParts, max_runtime: cdk.Duration | None,
                             max_wait: cdk.Duration | None, use_spot_instances: bool) -> dict[str, Any]:
    """StoppingCondition in whole seconds (one day unless given), within the limits spot training sets."""
    where = job._where
    stopping = stopping_condition(
        max_runtime_seconds=None if max_runtime is None else whole_seconds(max_runtime, where=where,
                                                                           field="max_runtime", minimum=0),
        max_wait_seconds=None if max_wait is None else whole_seconds(max_wait, where=where, field="max_wait",
                                                                     minimum=0))
    check_stopping(stopping["MaxRuntimeInSeconds"], stopping.get("MaxWaitTimeInSeconds"), use_spot_instances,
                   where=where)
    return stopping


def check_dependent_props(job: JobParts, checkpoint_s3_uri: str | None, checkpoint_local_path: str | None,
                          vpc: ec2.IVpc | None, vpc_subnets: ec2.SubnetSelection | None,
                          security_groups: Sequence[ec2.ISecurityGroup] | None) -> None:
    """Props that mean nothing without another: a local checkpoint path without its S3 copy, subnets and security
    groups without a VPC."""
    if checkpoint_local_path is not None and checkpoint_s3_uri is None:
        raise ConfigurationError(
            "checkpoint_local_path needs checkpoint_s3_uri (where SageMaker copies the checkpoints).",
            where=job._where, field="checkpoint_local_path")
    if vpc is None and (vpc_subnets is not None or security_groups):
        raise ConfigurationError("vpc_subnets and security_groups need vpc=.", where=job._where, field="vpc")


def subnet_kwargs(selection: ec2.SubnetSelection | None) -> dict[str, Any]:
    if selection is None:
        return {"subnet_type": ec2.SubnetType.PRIVATE_WITH_EGRESS}
    return {k: getattr(selection, k) for k in ("availability_zones", "one_per_az", "subnet_filters", "subnet_group_name",
                                                "subnets", "subnet_type") if getattr(selection, k, None) is not None}


@jsii.implements(IValidation)
class StackValidation:
    """Validates every job's full request when the app synthesizes (after every add_rule call). One validation per
    stack rather than per job: each registration is a round trip to the jsii process."""

    _by_stack: weakref.WeakKeyDictionary[cdk.Stack, StackValidation] = weakref.WeakKeyDictionary()

    def __init__(self) -> None:
        self._jobs: list[JobParts] = []

    @classmethod
    def register(cls, job: JobParts) -> None:
        validation = cls._by_stack.get(job._stack)
        if validation is None:
            validation = cls._by_stack[job._stack] = cls()
            job._stack.node.add_validation(validation)
        validation._jobs.append(job)

    def validate(self) -> list[str]:
        return [f"{job.node.path}: {problem}" for job in self._jobs for problem in job.validate_request()]
