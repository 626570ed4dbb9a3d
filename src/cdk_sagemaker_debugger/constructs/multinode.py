"""What a ProfiledTrainingJob needs to run right the first time on a multi-node cluster: its code and launcher
hyperparameters, its checkpoint grants, a security group whose hosts reach each other, and the request checks the API
documents but botocore does not run.

ProfiledTrainingJob calls one function of this module per construction step (see each function); the logic lives here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import IValidation

from ..model.errors import ConfigurationError, ConfigurationTypeError
from ..model.job_checks import JobShape, check_job
from ..model.launchers import LAUNCHER_HYPERPARAMETERS, check_launcher
from ..model.training_code import CODE_HYPERPARAMETERS, JOB_NAME, check_reserved, code_hyperparameters
from ._cdk.nag import KMS_KEY_FINDINGS
from .checkpoints import Checkpoints
from .training_code import BoundTrainingCode, TrainingCode

if TYPE_CHECKING:  # pragma: no cover
    from .training_job import ProfiledTrainingJob

__all__ = ["resolve_props", "attach_code", "grant_job_locations", "secure_cluster_network", "hyperparameters",
           "with_run_name"]

_WARNING = "cdk-sagemaker-debugger"


def resolve_props(job: ProfiledTrainingJob, *, checkpoints: Any, checkpoint_s3_uri: str | None,
                  checkpoint_local_path: str | None, encrypt_inter_container_traffic: bool,
                  enable_inter_container_traffic_encryption: bool | None) -> tuple[str | None, str | None, bool]:
    """``checkpoints=`` and ``enable_inter_container_traffic_encryption=`` onto the props they spell differently.
    Returns the checkpoint URI and local path and the traffic-encryption flag."""
    where = job._where
    if enable_inter_container_traffic_encryption is not None:
        if encrypt_inter_container_traffic and not enable_inter_container_traffic_encryption:
            raise ConfigurationError("encrypt_inter_container_traffic=True contradicts "
                                     "enable_inter_container_traffic_encryption=False; pass one of them.",
                                     where=where, field="enable_inter_container_traffic_encryption")
        encrypt_inter_container_traffic = enable_inter_container_traffic_encryption
    job.checkpoints = None
    if checkpoints is None:
        if checkpoint_s3_uri is not None:
            job.checkpoints = Checkpoints.from_s3_uri(checkpoint_s3_uri, local_path=checkpoint_local_path)
        return checkpoint_s3_uri, checkpoint_local_path, encrypt_inter_container_traffic
    if not isinstance(checkpoints, Checkpoints):
        raise ConfigurationTypeError(f"expected Checkpoints.from_bucket(bucket, 'ckpt/prefix') or "
                                     f"Checkpoints.from_s3_uri(...), got {type(checkpoints).__name__}.",
                                     where=where, field="checkpoints", value=checkpoints)
    if checkpoint_s3_uri is not None or checkpoint_local_path is not None:
        raise ConfigurationError("give checkpoints= or checkpoint_s3_uri=/checkpoint_local_path=, not both.",
                                 where=where, field="checkpoints")
    job.checkpoints = checkpoints
    return checkpoints.s3_uri, checkpoints.local_path, encrypt_inter_container_traffic


def attach_code(job: ProfiledTrainingJob, code: Any) -> BoundTrainingCode | None:
    """Bind ``code=`` (creating its asset), check the launcher against the SDK's rules and the request against the
    documented limits. Runs once the request members and the framework are known."""
    where = job._where
    bound = None
    if code is not None:
        if not isinstance(code, TrainingCode):
            raise ConfigurationTypeError(f"expected TrainingCode.from_asset('./src', entry_point='train.py') (or "
                                         f"from_bucket / from_s3_uri), got {type(code).__name__}.", where=where,
                                         field="code", value=code)
        if job.algorithm_name is not None:
            raise ConfigurationError("a SageMaker algorithm runs its own code; remove code= or use training_image=.",
                                     where=where, field="code")
        if job.framework is None:
            raise ConfigurationError(
                f"the training image {job.training_image!r} is not an AWS Deep Learning Container, so nothing in it is "
                "known to read sagemaker_program and sagemaker_submit_directory. Use a framework image (or one with "
                "the SageMaker training toolkit and a framework name in its repository), or build the code into your "
                "image and set container_entrypoint=.", where=where, field="code", value=job.training_image)
        check_reserved(job._hyperparameters, dict.fromkeys(CODE_HYPERPARAMETERS), owner="code=", where=where)
        if job.distribution is not None:
            check_reserved(job._hyperparameters, dict.fromkeys(LAUNCHER_HYPERPARAMETERS), owner="distribution=",
                           where=where)
        bound = code._bind(job, job._partition)
    _check_request(job, bound)
    job.training_code = code
    job.training_code_location = bound
    return bound


def _check_request(job: ProfiledTrainingJob, bound: BoundTrainingCode | None) -> None:
    groups = job.request_members.resource.get("InstanceGroups") or []
    instance_types = [g["InstanceType"] for g in groups] or [job.instance_type]
    if bound is not None:
        for instance_type in instance_types:
            check_launcher(job.distribution, framework=job.framework, training_image=job.training_image,
                           instance_type=instance_type, entry_point=bound.entry_point, where=job._where)
    check_job(JobShape(
        instance_types=instance_types, volume_kms_key=job.volume_kms_key is not None,
        use_spot=job.use_spot_instances, max_runtime_seconds=job._stopping.get("MaxRuntimeInSeconds"),
        max_wait_seconds=job._stopping.get("MaxWaitTimeInSeconds"),
        keep_alive_seconds=job.request_members.resource.get("KeepAlivePeriodInSeconds")), where=job._where)
    if job.distribution is not None and bound is None and job.framework is not None:
        job._warn("distributionWithoutCode", (
            f"distribution={job.distribution.label} sets no launcher: the launcher hyperparameters go with the "
            "job's code. Pass code=TrainingCode.from_asset('./src', entry_point='train.py') so the toolkit in "
            f"{job.training_image} starts the launcher on every host (or set its hyperparameters yourself)."))


def hyperparameters(job: ProfiledTrainingJob, job_name: str) -> dict[str, str] | None:
    """HyperParameters: the user's, then the code's and the launcher's as the SDK orders them (for the job
    ``job_name``)."""
    bound = job.training_code_location
    if bound is None:
        return job._hyperparameters
    values = dict(job._hyperparameters or {})
    values.update(code_hyperparameters(entry_point=bound.entry_point, submit_directory=bound.s3_uri,
                                       region=job._region or cdk.Aws.REGION, log_level=bound.container_log_level,
                                       job_name=job_name))
    if job.distribution is not None:
        values.update(job.distribution.hyperparameters(job.instance_type))
    return values


def with_run_name(hyperparameters: dict[str, str] | None, placeholder: str) -> dict[str, str] | None:
    """``sagemaker_job_name`` of the state's request reads the run's name (JSON-encoded) from the execution."""
    if not hyperparameters or hyperparameters.get(JOB_NAME) != f'"{placeholder}"':
        return hyperparameters
    path = """States.Format('"{}"', $.trainingRun.TrainingJobName)"""
    return {(f"{JOB_NAME}.$" if key == JOB_NAME else key): (path if key == JOB_NAME else value)
            for key, value in hyperparameters.items()}


def grant_job_locations(job: ProfiledTrainingJob) -> None:
    """The execution role this construct created may read the code object and use the checkpoint prefix, and its
    KMS statements for keys passed to the job are acknowledged on that role's policy. A location that cannot be
    granted gets a warning."""
    role = job._policy.owned_role
    bound = job.training_code_location
    if role is not None and bound is not None and job.training_code.grant_read(role, bound) is None:
        job._warn("codeNotGranted", f"The execution role cannot be granted read on the training code {bound.s3_uri!r} "
                  "(its bucket is not known at synth). Use TrainingCode.from_bucket(bucket, key, ...) or grant it: "
                  "bucket.grant_read(job, key).")
    _grant_checkpoints(job, role)
    if role is not None and (job.volume_kms_key is not None or job.output_kms_key is not None):
        job._findings.add("ExecutionRole/DefaultPolicy", dict(KMS_KEY_FINDINGS))


def _grant_checkpoints(job: ProfiledTrainingJob, role: iam.Role | None) -> None:
    checkpoints = job.checkpoints
    if role is None or checkpoints is None:
        return
    literal = checkpoints.bucket is None and not cdk.Token.is_unresolved(checkpoints.s3_uri)
    if literal:
        return  # the construct's own grant covers literal URIs (_allow_s3_prefix)
    grant = checkpoints.grant_statements(job._partition)
    if grant is None:
        job._warn("checkpointsNotGranted", (
            f"The checkpoint location {checkpoints.s3_uri!r} names no bucket this construct can read at synth, so "
            "the execution role gets no access to it and spot runs could neither save nor restore checkpoints. Use "
            "checkpoints=Checkpoints.from_bucket(bucket, 'ckpt/prefix'), or grant it: "
            "bucket.grant_read_write(job, 'ckpt/prefix/*')."))
        return
    for statement in grant.statements:
        role.add_to_policy(iam.PolicyStatement.from_json(statement))
    job._findings.add("ExecutionRole/DefaultPolicy", grant.findings)
    if checkpoints.bucket is not None and checkpoints.bucket.encryption_key is not None:
        checkpoints.bucket.encryption_key.grant_encrypt_decrypt(role)
        job._findings.add("ExecutionRole/DefaultPolicy", dict(KMS_KEY_FINDINGS))
    elif checkpoints.bucket is None:
        job._warn("checkpointsKey", (
            f"Checkpoints at {checkpoints.s3_uri!r} are granted on their prefix; if that bucket is encrypted with a "
            "customer managed KMS key, the execution role needs it too: key.grant_encrypt_decrypt(job), or use "
            "Checkpoints.from_bucket(bucket, prefix), which grants the bucket's key."))


def _instances(job: ProfiledTrainingJob) -> int | None:
    groups = job.request_members.resource.get("InstanceGroups")
    if groups:
        counts = [g["InstanceCount"] for g in groups]
        return None if any(cdk.Token.is_unresolved(c) for c in counts) else sum(counts)
    count = job.instance_count
    return None if cdk.Token.is_unresolved(count) else count


def secure_cluster_network(job: ProfiledTrainingJob, *, created: bool) -> None:
    """With more than one instance in a VPC, the hosts of a run must reach each other (NCCL, MPI, torchrun's
    rendezvous): the security group this construct created allows all traffic from itself; groups passed in are
    checked at synth, with a warning naming the fix when no group allows it."""
    if job.vpc is None:
        return
    count = _instances(job)
    if count is not None and count < 2:
        return
    if created:
        group = job.security_groups[0]
        group.connections.allow_internally(ec2.Port.all_traffic(), "Hosts of one training job reach each other")
        return
    job.node.add_validation(_SelfReferenceCheck(job))


@jsii.implements(IValidation)
class _SelfReferenceCheck:
    """At synth: does one of the job's security groups allow traffic from itself? Warns otherwise (never fails)."""

    def __init__(self, job: ProfiledTrainingJob) -> None:
        self._job = job

    def validate(self) -> list[str]:
        job = self._job
        stack = cdk.Stack.of(job)
        if any(_allows_itself(stack, group) for group in job.security_groups):
            return []
        names = ", ".join(group.node.path for group in job.security_groups)
        cdk.Annotations.of(job).add_warning_v2(f"{_WARNING}:securityGroupSelfReference", (
            f"None of the security groups passed to this job ({names}) is known to allow traffic from itself; the "
            "hosts of a distributed run could not reach each other (NCCL, MPI, torchrun) and the job would hang or "
            "fail. Add the rule: job.connections.allow_internally(ec2.Port.all_traffic()) (or make sure the "
            "imported group has it)."))
        return []


def _allows_itself(stack: cdk.Stack, group: ec2.ISecurityGroup) -> bool:
    own = stack.resolve(group.security_group_id)
    for child in group.node.find_all():
        if isinstance(child, ec2.CfnSecurityGroupIngress):
            if stack.resolve(child.source_security_group_id) == own and stack.resolve(child.ip_protocol) == "-1":
                return True
        elif isinstance(child, ec2.CfnSecurityGroup):
            for rule in stack.resolve(child.security_group_ingress) or []:
                if rule.get("SourceSecurityGroupId") == own and rule.get("IpProtocol") == "-1":
                    return True
    return False
