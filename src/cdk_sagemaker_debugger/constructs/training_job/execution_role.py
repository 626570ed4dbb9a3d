"""The execution role of a ProfiledTrainingJob: its statements (least privilege for the job's prefixes), the role
this construct owns, and the cdk-nag findings its wildcards raise, acknowledged on the exact resource in one batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aws_cdk import aws_iam as iam

from ...model.contract import PIPELINE_JOB_NAME_PREFIX
from ...model.parameters import is_token
from ..output_locations import EVALUATOR_KEY_WRITES, evaluator_key_arns
from ._shared import ecr_repository_arns
from .channels import S3_URI

if TYPE_CHECKING:  # pragma: no cover
    from ._parts import JobParts

__all__ = ["ExecutionPolicy"]

_LOG_GROUPS = ("/aws/sagemaker/TrainingJobs", "/aws/sagemaker/ProcessingJobs")
_VPC_ACTIONS = [
    "ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission", "ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups",
]


class ExecutionPolicy:
    """The statements of the execution role a job creates. While the job is built they are collected and become the
    role's one inline policy (one call into the CDK instead of two per statement); statements for rules added later go
    to the role's default policy. With a role the user passed, nothing is granted."""

    def __init__(self, job: JobParts) -> None:
        self._job = job
        self._pending: list[dict[str, Any]] | None = None
        self._image_pull: dict[str, Any] | None = None
        self._pulled_repositories: list[str] = []
        self._pipeline_runs = False
        #: The role this construct created, or None for a role the user passed.
        self.owned_role: iam.Role | None = None

    @property
    def grants(self) -> bool:
        """Whether statements are granted: the job owns its role (or is creating it)."""
        return self.owned_role is not None or self._pending is not None

    def create_role(self, in_vpc: bool) -> iam.Role:
        """The job's own role with every statement its runs and its rule engine need."""
        job = self._job
        self._pending = []
        self._grant_execution_permissions(in_vpc)
        job._engine.grant_initial(self)
        role = iam.Role(
            job,
            "ExecutionRole",
            # only SageMaker acting for a resource of this account and region (confused deputy)
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com").with_conditions({
                "StringEquals": {"aws:SourceAccount": job._stack.account},
                "ArnLike": {"aws:SourceArn": job._arn("sagemaker", "*")}}),
            description=f"SageMaker execution role of training jobs {job.job_name_prefix}-*",
            inline_policies={"TrainingJobs": iam.PolicyDocument.from_json(
                {"Version": "2012-10-17", "Statement": self._pending})},
        )
        self.owned_role = role
        job._findings.register("ExecutionRole", role.node.default_child)  # type: ignore[arg-type]
        self._pending = None
        self._grant_role_dependent(role)
        job._engine.grant_on_role(role)
        return role

    # -- statements --------------------------------------------------------------------------------------------------
    def allow(self, statement: dict[str, Any]) -> dict[str, Any]:
        """Add a policy statement (JSON form) to the execution role this construct owns: buffered while the construct
        is being built (they become the role's inline policy), added directly for rules added later."""
        if self._pending is not None:
            self._pending.append(statement)
        elif self.owned_role is not None:
            self.owned_role.add_to_policy(iam.PolicyStatement.from_json(statement))
        return statement

    def acknowledge(self, findings: dict[str, str]) -> None:
        """Record cdk-nag findings of the execution-role policy the statements just went to: its inline policy while
        the job is built, its default policy for rules added later. An acknowledgement covers that resource only, so
        a wildcard a user adds elsewhere (``job.role.add_to_policy``) is reported."""
        target = "ExecutionRole" if self._pending is not None else "ExecutionRole/DefaultPolicy"
        self._job._findings.add(target, findings)

    def allow_s3_prefix(self, uri: str | None, label: str, *, writable: bool) -> dict[str, str]:
        """Allow the objects under a literal s3:// prefix; returns the cdk-nag wildcard finding with its reason."""
        match = S3_URI.match(uri) if uri and not is_token(uri) else None
        if match is None:
            return {}
        key = match["key"].strip("/")
        bucket_arn = f"arn:{self._job._partition}:s3:::{match['bucket']}"
        objects = f"{bucket_arn}/{key + '/' if key else ''}*"
        actions = ["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"] if writable else ["s3:GetObject"]
        self.allow({"Effect": "Allow", "Action": actions, "Resource": objects})
        self.allow({"Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn})
        access = "written" if writable else "read"
        return {f"Resource::{objects}": f"Objects under the configured {label} prefix, {access} by every run."}

    def allow_image_pull(self, repository_arns: Sequence[str]) -> None:
        """Let the role pull from these ECR repositories; one statement, extended as rules are added."""
        new = [arn for arn in dict.fromkeys(repository_arns) if arn not in self._pulled_repositories]
        if not new:
            return
        self._pulled_repositories += new
        if self._image_pull is not None and self._pending is not None:
            self._image_pull["Resource"] += new  # still buffered: extend the one statement
            return
        self._image_pull = self.allow({
            "Effect": "Allow",
            "Action": ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
            "Resource": new,
        })

    def upload_prefix(self, name_start: str) -> str:
        """Key pattern of the profiler-output/ folders of runs whose name starts with ``name_start``, where the
        profiler writes."""
        job = self._job
        match = S3_URI.match(job.profiler_s3_uri) if not is_token(job.profiler_s3_uri) else None
        key = match["key"].strip("/") if match else job.output_prefix
        bucket_arn = f"arn:{job._partition}:s3:::{match['bucket']}" if match else job._output_bucket_arn
        return f"{bucket_arn}/{key + '/' if key else ''}{name_start}*/profiler-output/*"

    # -- what every run needs ----------------------------------------------------------------------------------------
    def _grant_execution_permissions(self, in_vpc: bool) -> None:
        """Least privilege for SageMaker: the job's own S3 prefixes, image pulls, its log groups and metrics."""
        job = self._job
        wildcards = self._grant_storage()
        if job.training_image is not None:
            self.allow_image_pull(ecr_repository_arns(job._partition, job.training_image))
        job._engine.bind_rule_set()
        self.allow({"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"})
        self.allow({"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
                    "Condition": {"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*"]}}})
        wildcards["Resource::*"] = (
            "ecr:GetAuthorizationToken and cloudwatch:PutMetricData have no resource-level permissions; PutMetricData "
            "is limited to the /aws/sagemaker/* namespaces by condition."
        )
        log_groups = [job._arn("logs", f"log-group:{group}:*") for group in _LOG_GROUPS]
        self.allow({"Effect": "Allow", "Resource": log_groups, "Action": [
            "logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"]})
        for arn in log_groups:
            wildcards[f"Resource::{arn}"] = (
                "Log streams of SageMaker's training and rule-job log groups, named after each run's job."
            )
        if in_vpc:
            self.allow({"Effect": "Allow", "Resource": "*", "Action": list(_VPC_ACTIONS)})
            wildcards["Resource::*"] += (
                " The EC2 network-interface actions SageMaker needs to attach the job to the VPC have no resource-level "
                "permissions either."
            )
        self.acknowledge(wildcards)
        self._deny_evaluator_keys()

    def _own_runs(self, name_start: str, label: str) -> dict[str, str]:
        """Read and write the output folders of the runs whose name starts with ``name_start`` (and list them);
        returns the cdk-nag finding."""
        job = self._job
        bucket_arn = job._output_bucket_arn
        object_prefix = f"{job.output_prefix}/" if job.output_prefix else ""
        output_objects = f"{bucket_arn}/{object_prefix}{name_start}*"
        self.allow({"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
                    "Resource": output_objects})
        self.allow({"Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
                    "Condition": {"StringLike": {"s3:prefix": [f"{object_prefix}{name_start}*"]}}})
        return {f"Resource::{output_objects}": (
            f"The output folders of {label} only (<output_prefix>/{name_start}<generated>/: output, profiler-output, "
            "rule-output), whose names are generated per run; never other jobs' folders in the bucket.")}

    def allow_pipeline_runs(self) -> None:
        """Once the job is a pipeline step: the output folders of pipeline runs (``pipelines-*``), where SageMaker
        Pipelines writes the step's output (it names each job ``pipelines-<execution>-<step>-...``)."""
        if self.owned_role is None or self._pipeline_runs:
            return
        self._pipeline_runs = True
        self.acknowledge(self._own_runs(PIPELINE_JOB_NAME_PREFIX, "SageMaker Pipelines runs"))

    def _grant_storage(self) -> dict[str, str]:
        """The job's own runs under the output prefix, the other configured S3 locations and the input channels;
        returns the findings."""
        job = self._job
        wildcards = self._own_runs(f"{job.job_name_prefix}-", "this job's runs")
        locations = [(job.profiler.s3_output_path, "profiler output"), (job.checkpoint_s3_uri, "checkpoints"),
                     *job._engine.written_locations()]
        for uri, label in locations:
            wildcards.update(self.allow_s3_prefix(uri, label, writable=True))
        for channel in job.inputs:
            for statement in channel.read_statements(job._partition):
                self.allow(statement)
            wildcards.update(channel.wildcard_findings(job._partition))
        return wildcards

    def _deny_evaluator_keys(self) -> None:
        """The RuleEvaluator keeps its state, lease, reports and summaries under each run's rule-output/: the
        training code (this execution role) must not write them for any job in the bucket (its own runs, its
        siblings, pipeline runs or another team's), or a run could forge, pre-empt or silence verdicts. SageMaker's own
        rule output beside them (rule-output/<rule>/profiler-output/) stays writable."""
        self.allow({"Effect": "Deny", "Action": list(EVALUATOR_KEY_WRITES),
                    "Resource": evaluator_key_arns(self._job._output_bucket_arn)})

    def _grant_role_dependent(self, role: iam.Role) -> None:
        """Grants that CDK resources make on the role itself (KMS keys, an ECR repository object)."""
        job = self._job
        if job.volume_kms_key is not None:
            job.volume_kms_key.grant_encrypt_decrypt(role)
        if job.output_kms_key is not None:
            job.output_kms_key.grant_encrypt_decrypt(role)
        if job.training_image_repository is not None:
            job.training_image_repository.grant_pull(role)
