"""TrainingPipeline: an AWS::SageMaker::Pipeline whose Training steps come from ProfiledTrainingJob.pipeline_step()."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct, IConstruct, IValidation

from ..model.api_model import request_problems
from ..model.contract import PIPELINE_EXECUTION_TAG, PIPELINE_JOB_NAME_PREFIX
from ..model.errors import ConfigurationError
from ..model.job_family import check_pipeline_name
from ..model.parameters import is_token
from ..model.pipeline_definition import PLACEHOLDER_JOB_NAME, pipeline_definition
from ..runtime.sampler import contract as sampler_contract
from ._cdk.compliance import acknowledge_compliance
from ._cdk.lazy import LazyPath
from ._cdk.nag import acknowledge_wildcards
from .family import TrainingJobs

__all__ = ["TrainingPipeline"]


class TrainingPipeline(Construct):
    """A SageMaker Pipelines pipeline (``AWS::SageMaker::Pipeline``) running Training steps.

    ``steps`` are dicts as :meth:`cdk_sagemaker_debugger.ProfiledTrainingJob.pipeline_step` returns them (any other
    step of the 2020-12-01 definition schema is passed through). The definition is written inline as
    ``PipelineDefinitionBody``; its Training steps' Arguments are checked against CreateTrainingJob in botocore's model
    again at synth. Creating the pipeline does not run it: start executions with ``StartPipelineExecution``.

    Pipelines names each job ``pipelines-<execution id>-<step name>-<random>``, so the prefix-based RuleEvaluator,
    RuleAlarm and metric searches of a ProfiledTrainingJob do not see pipeline runs.

    :param steps: the pipeline's steps, at least one; names unique, ``DependsOn`` naming steps of this pipeline.
    :param role: the pipeline execution role, used unchanged. Default: a role assumed by SageMaker with exactly what
        Training steps need: create, describe, stop and tag ``training-job/pipelines-*``, and ``iam:PassRole`` on the
        steps' execution roles, to SageMaker only.
    :param pipeline_name: ``PipelineName``: letters, digits and hyphens, up to 256. Default: generated from the
        construct path.
    :param display_name: ``PipelineDisplayName``. Default: None.
    :param description: ``PipelineDescription``. Default: None.
    :param max_parallel_steps: ``ParallelismConfiguration.MaxParallelExecutionSteps``. Default: None (SageMaker's
        default).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        steps: Sequence[Mapping[str, Any]],
        role: iam.IRole | None = None,
        pipeline_name: str | None = None,
        display_name: str | None = None,
        description: str | None = None,
        max_parallel_steps: int | None = None,
    ) -> None:
        super().__init__(scope, id)
        where = LazyPath(self)
        #: The pipeline definition document (CDK tokens unresolved).
        self.definition: dict[str, Any] = pipeline_definition(steps, where=where)
        if pipeline_name is None:
            pipeline_name = cdk.Names.unique_resource_name(self, max_length=80, separator="-")
        check_pipeline_name(pipeline_name, where=where, allow_token=True)
        self.pipeline_name: str = pipeline_name
        #: The pipeline execution role.
        self.role: iam.IRole = role if role is not None else self._execution_role()
        stack = cdk.Stack.of(self)
        self.pipeline = sagemaker.CfnPipeline(
            self,
            "Resource",
            pipeline_name=pipeline_name,
            role_arn=self.role.role_arn,
            pipeline_definition={"PipelineDefinitionBody": stack.to_json_string(self.definition)},
            pipeline_display_name=display_name,
            pipeline_description=description,
            parallelism_configuration=None if max_parallel_steps is None else
            sagemaker.CfnPipeline.ParallelismConfigurationProperty(max_parallel_execution_steps=max_parallel_steps),
        )
        self.pipeline.node.add_dependency(self.role)
        self.node.add_validation(_DefinitionValidation(self.definition))
        acknowledge_compliance(self, "TrainingPipeline")
        cdk.Aspects.of(self).add(_FamilyLocationCheck(self))

    @functools.cached_property
    def training_jobs(self) -> TrainingJobs:
        """The training jobs of this pipeline's executions, with the bucket and prefix its Training steps write to and
        the roles they run as: what a RuleEvaluator, RuleAlarm or TrainingDashboard takes as ``training_jobs=``."""
        where = f"{self.node.path}.training_jobs"
        if is_token(self.pipeline_name):
            raise ConfigurationError("needs a literal pipeline_name: the functions compare it with the pipeline "
                                     "named in each job's tag.", where=where, field="pipeline_name",
                                     value=self.pipeline_name)
        locations = self.step_locations()
        if not locations:
            raise ConfigurationError("the pipeline has no Training step with an OutputDataConfig.S3OutputPath and a "
                                     "RoleArn, so there is no family of its jobs to watch.", where=where)
        if len({(output, profiler) for _, output, profiler, _ in locations}) > 1:
            found = "; ".join(f"step {name!r} writes {output}" for name, output, _, _ in locations)
            raise ConfigurationError(
                f"the Training steps write to different locations ({found}); build one family per location with "
                "TrainingJobs.from_pipeline(..., output_bucket=..., output_prefix=..., execution_roles=[...]).",
                where=where)
        _, output, profiler, _ = locations[0]
        (bucket_name, prefix), profiler_place = _split(output), (_split(profiler) if profiler != output else None)
        roles = [self._role(arn, index) for index, arn in enumerate(dict.fromkeys(r for *_, r in locations))]
        return TrainingJobs.from_pipeline(
            self.pipeline_name, output_bucket=self._bucket(bucket_name, "StepOutputBucket"), output_prefix=prefix,
            profiler_bucket=self._bucket(profiler_place[0], "StepProfilerBucket") if profiler_place else None,
            profiler_prefix=profiler_place[1] if profiler_place else None, execution_roles=roles)

    def step_locations(self) -> list[tuple[str, str, str, str]]:
        """``(step name, S3OutputPath, profiler location, RoleArn)`` of each Training step (the profiler location is
        ProfilerConfig.S3OutputPath, else the sampler's upload URI, else the output path)."""
        found = []
        for step in self.definition["Steps"]:
            arguments = step.get("Arguments", {}) if step.get("Type") == "Training" else {}
            output = arguments.get("OutputDataConfig", {}).get("S3OutputPath")
            if not isinstance(output, str) or "RoleArn" not in arguments:
                continue
            profiler_config = arguments.get("ProfilerConfig") or {}
            profiler = (profiler_config.get("S3OutputPath") if not profiler_config.get("DisableProfiler") else None) \
                or (arguments.get("Environment") or {}).get(sampler_contract.S3_URI) or output
            found.append((step["Name"], output.rstrip("/"), str(profiler).rstrip("/"), arguments["RoleArn"]))
        return found

    def _bucket(self, name: str, id: str) -> s3.IBucket:
        """The app's own bucket of that name when this stack has it (its bucket policy then guards the evaluator's
        objects), else the bucket imported by name."""
        for child in cdk.Stack.of(self).node.find_all():
            if isinstance(child, s3.Bucket) and child.bucket_name == name:
                return child
        return s3.Bucket.from_bucket_name(self, id, name)

    def _role(self, arn: str, index: int) -> iam.IRole:
        for child in cdk.Stack.of(self).node.find_all():
            if isinstance(child, iam.Role) and child.role_arn == arn:
                return child
        return iam.Role.from_role_arn(self, f"StepRole{index}", arn, mutable=False)

    def _training_roles(self) -> list[str]:
        roles = [step["Arguments"]["RoleArn"] for step in self.definition["Steps"]
                 if step.get("Type") == "Training" and "RoleArn" in step.get("Arguments", {})]
        return list(dict.fromkeys(roles))

    def _execution_role(self) -> iam.Role:
        """Least privilege for Training steps. Per "IAM Access Management" of SageMaker Pipelines
        (https://docs.aws.amazon.com/sagemaker/latest/dg/build-and-manage-access.html) the pipeline execution role needs
        Create and Describe for each job type it runs and iam:PassRole for the roles its steps pass; StopTrainingJob
        lets StopPipelineExecution stop a running job, and AddTags lets SageMaker tag the jobs it creates (tags are set
        with CreateTrainingJob). Jobs are named pipelines-<execution id>-<step name>-..., hence the resource pattern."""
        stack = cdk.Stack.of(self)
        jobs = stack.format_arn(service="sagemaker", resource="training-job",
                                resource_name=f"{PIPELINE_JOB_NAME_PREFIX}*")
        own = _own_executions(stack, self.pipeline_name)
        statements: list[dict[str, Any]] = [
            {"Effect": "Allow", "Action": ["sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob"],
             "Resource": jobs},
            # stop only this pipeline's jobs (SageMaker tags each with its execution's ARN)
            {"Effect": "Allow", "Action": "sagemaker:StopTrainingJob", "Resource": jobs,
             "Condition": {"StringLike": {f"aws:ResourceTag/{PIPELINE_EXECUTION_TAG}": own}}},
            # tag a job being created, or one of this pipeline's, and never with another pipeline's execution
            {"Effect": "Allow", "Action": "sagemaker:AddTags", "Resource": jobs,
             "Condition": {"StringLikeIfExists": {f"aws:ResourceTag/{PIPELINE_EXECUTION_TAG}": own,
                                                  f"aws:RequestTag/{PIPELINE_EXECUTION_TAG}": own}}},
        ]
        passed = self._training_roles()
        if passed:
            statements.append({"Effect": "Allow", "Action": "iam:PassRole", "Resource": passed,
                               "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}})
        role = iam.Role(
            self,
            "ExecutionRole",
            # only SageMaker acting for this pipeline of this account (confused deputy)
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com").with_conditions({
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnLike": {"aws:SourceArn": _own_pipeline(stack, self.pipeline_name)}}),
            description="SageMaker Pipelines execution role: runs the pipeline's training steps",
            inline_policies={"TrainingSteps": iam.PolicyDocument.from_json(
                {"Version": "2012-10-17", "Statement": statements})},
        )
        acknowledge_wildcards(role, {f"Resource::{jobs}": (
            "SageMaker Pipelines names every job it starts pipelines-<execution id>-<step name>-<random>, so the "
            "execution role can create and describe only jobs named that way, and stop and tag only its own "
            "pipeline's (the sagemaker:pipeline-execution-arn tag condition)."
        )}, stack=stack)
        return role


def _own_pipeline(stack: cdk.Stack, pipeline_name: str) -> list[str]:
    """ARN patterns of this pipeline and its executions (the name in either case)."""
    names = dict.fromkeys((pipeline_name, pipeline_name.lower()))
    return [stack.format_arn(service="sagemaker", resource="pipeline", resource_name=f"{n}{below}")
            for n in names for below in ("", "/*")]


def _split(uri: str) -> tuple[str, str]:
    """Bucket name and key prefix of ``s3://bucket/prefix`` (either may be a deploy-time token)."""
    bucket, _, prefix = uri[len("s3://"):].partition("/") if uri.startswith("s3://") else (uri, "", "")
    return bucket, prefix.strip("/")


@jsii.implements(cdk.IAspect)
class _FamilyLocationCheck:
    """At synth: warn on every RuleEvaluator, RuleAlarm or TrainingDashboard of this pipeline's family (built with
    ``TrainingJobs.from_pipeline``) that reads another bucket or prefix than the one the steps write to: it would
    read nothing."""

    def __init__(self, pipeline: TrainingPipeline) -> None:
        self._pipeline = pipeline

    def visit(self, node: IConstruct) -> None:
        pipeline = self._pipeline
        if node is not pipeline or is_token(pipeline.pipeline_name):
            return
        steps = pipeline.step_locations()
        if not steps:
            return
        stack = cdk.Stack.of(pipeline)
        written = {(_comparable(stack, _split(output)[0]), _split(output)[1]) for _, output, _, _ in steps}
        for construct in pipeline.node.root.node.find_all():
            jobs = getattr(construct, "training_jobs", None)
            if construct is pipeline or not isinstance(jobs, TrainingJobs) or jobs.family.pipeline_name is None:
                continue
            if jobs.family.pipeline_name.lower() != pipeline.pipeline_name.lower():
                continue
            read = (_comparable(stack, jobs.output_bucket.bucket_name), jobs.output_prefix)
            if read in written:
                continue
            name, output, _, _ = steps[0]
            cdk.Annotations.of(construct).add_warning_v2(
                "cdk-sagemaker-debugger:pipelineFamilyLocation",
                f"{construct.node.path} watches the runs of the SageMaker Pipeline {pipeline.pipeline_name} under "
                f"output_prefix {jobs.output_prefix!r} of its output_bucket, but {pipeline.node.path}'s step {name!r} "
                f"writes them under its S3OutputPath ({_shown(stack, output)}/pipelines-...): it would find no "
                f"report or profiler file. Pass training_jobs={pipeline.node.id.lower()}.training_jobs "
                "(TrainingPipeline.training_jobs knows the steps' bucket, prefix and roles), or the step's bucket and "
                "output_prefix to TrainingJobs.from_pipeline.")


def _comparable(stack: cdk.Stack, value: str) -> str:
    """A comparable form of a bucket name that may be a deploy-time token."""
    return json.dumps(stack.resolve(value), sort_keys=True) if is_token(value) else value


def _shown(stack: cdk.Stack, uri: str) -> str:
    bucket, prefix = _split(uri)
    return f"s3://{'<bucket>' if is_token(bucket) else bucket}/{prefix}".rstrip("/")


def _own_executions(stack: cdk.Stack, pipeline_name: str) -> list[str]:
    """ARN patterns of this pipeline's executions (SageMaker may write the name in lower case in the tag)."""
    names = dict.fromkeys((pipeline_name, pipeline_name.lower()))
    return [stack.format_arn(service="sagemaker", resource="pipeline", resource_name=f"{n}/execution/*") for n in names]


@jsii.implements(IValidation)
class _DefinitionValidation:
    """Re-checks every Training step's Arguments at synth (rules or overrides may have changed since)."""

    def __init__(self, definition: Mapping[str, Any]) -> None:
        self._definition = definition

    def validate(self) -> list[str]:
        problems = []
        for step in self._definition["Steps"]:
            if step.get("Type") != "Training":
                continue
            arguments = {"TrainingJobName": PLACEHOLDER_JOB_NAME, **step.get("Arguments", {})}
            problems += [f"step {step['Name']!r}: {path}: {problem}" for path, problem in request_problems(arguments)]
        return problems
