"""TrainingPipeline: an AWS::SageMaker::Pipeline whose Training steps come from ProfiledTrainingJob.pipeline_step()."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct, IValidation

from ..model.api_model import request_problems
from ..model.contract import PIPELINE_EXECUTION_TAG, PIPELINE_JOB_NAME_PREFIX
from ..model.job_family import check_pipeline_name
from ..model.pipeline_definition import PLACEHOLDER_JOB_NAME, pipeline_definition
from ._cdk.compliance import acknowledge_compliance
from ._cdk.lazy import LazyPath
from ._cdk.nag import acknowledge_wildcards

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
            # only SageMaker acting for this account (confused deputy)
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com").with_conditions(
                {"StringEquals": {"aws:SourceAccount": stack.account}}),
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
