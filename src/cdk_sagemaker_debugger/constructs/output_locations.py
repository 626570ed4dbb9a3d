"""Who may write where in a training output bucket: the RuleEvaluator's own objects, and which constructs share a
location.

The trust model (docs/evaluator.md, "What a run's code can and cannot do"): the training code runs with the job's
execution role, so it writes only its own runs' folders (``<prefix>/<job_name_prefix>-*``, and ``<prefix>/pipelines-*``
once the job is a pipeline step). The evaluator's objects (its state and lease under ``rule-output/evaluator-state/``,
its reports and summaries under ``rule-output/<rule>/evaluator-output/``) are a location that no execution role can
write, anywhere in the bucket: each execution role this library creates denies them explicitly, and where the bucket
belongs to the app (an ``s3.Bucket`` in the evaluator's stack) its bucket policy denies them to every principal but the
RuleEvaluators' roles, so a role made elsewhere cannot forge a verdict either (an evaluator in another stack is named
by a physical role name it is given here).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import IConstruct

from ..model.errors import ConfigurationError
from ..model.parameters import is_token
from ._cdk.layout import EVALUATOR_REPORT_FOLDER, EVALUATOR_STATE_FILE
from ._cdk.lazy import path_of

__all__ = ["EVALUATOR_KEY_WRITES", "evaluator_key_arns", "guard_evaluator_keys", "claim_output_location",
           "SHARED_OUTPUT_WARNING"]

#: What no principal but the evaluator may do to the evaluator's objects.
EVALUATOR_KEY_WRITES = ("s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion")
#: The warning id of two families or jobs sharing an output location.
SHARED_OUTPUT_WARNING = "cdk-sagemaker-debugger:sharedOutputLocation"
_WRITERS_ATTRIBUTE = "_cdk_sagemaker_debugger_evaluator_writers"
_CLAIMS_ATTRIBUTE = "_cdk_sagemaker_debugger_output_claims"


def evaluator_key_arns(bucket_arn: str) -> list[str]:
    """The evaluator's objects of every job anywhere in the bucket: state and lease, reports and summaries."""
    return [f"{bucket_arn}/*/rule-output/{EVALUATOR_STATE_FILE}",
            f"{bucket_arn}/*/rule-output/*/{EVALUATOR_REPORT_FOLDER}/*"]


def guard_evaluator_keys(evaluator: IConstruct, bucket: s3.IBucket, role: iam.IRole) -> None:
    """Where the app owns ``bucket`` (an ``s3.Bucket``), deny writing the evaluator's objects to every principal but
    the RuleEvaluators' roles (one bucket-policy statement per bucket, naming each evaluator that covers it)."""
    if not isinstance(bucket, s3.Bucket):
        return  # an imported bucket: its owner writes its policy; the execution roles' Deny still holds
    writer = _writer_arn(evaluator, bucket, role)
    writers: list[str] | None = getattr(bucket, _WRITERS_ATTRIBUTE, None)
    if writers is None:
        writers = []
        setattr(bucket, _WRITERS_ATTRIBUTE, writers)
        bucket.add_to_resource_policy(iam.PolicyStatement(
            sid="OnlyTheRuleEvaluatorWritesItsState",
            effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()], actions=list(EVALUATOR_KEY_WRITES),
            resources=evaluator_key_arns(bucket.bucket_arn),
            conditions={"ArnNotEquals": {"aws:PrincipalArn": cdk.Lazy.list(_Writers(writers))}}))
    if writer not in writers:
        writers.append(writer)


def _writer_arn(evaluator: IConstruct, bucket: s3.Bucket, role: iam.IRole) -> str:
    """The evaluator role's ARN as the bucket's stack may name it: its token in the same stack; in another stack (a
    monitoring stack) an ARN built from a physical role name given here, so that the bucket's stack does not depend
    on the evaluator's stack (which already depends on it for the bucket)."""
    home = cdk.Stack.of(bucket)
    if cdk.Stack.of(role) is home:
        return role.role_arn
    resource = role.node.default_child if isinstance(role, iam.Role) else None
    given = cdk.Stack.of(role).resolve(resource.role_name) if isinstance(resource, iam.CfnRole) else None
    if not isinstance(resource, iam.CfnRole) or (given is not None and not isinstance(given, str)):
        raise ConfigurationError(
            f"the output bucket {bucket.node.path} belongs to the stack {home.node.path}, whose bucket policy lets "
            "only the RuleEvaluators write the evaluator's state and reports, and this evaluator's role cannot be "
            f"named there. Create the RuleEvaluator in {home.node.path}.", where=evaluator.node.path,
            field="training_jobs")
    if given is None:
        region = cdk.Stack.of(role).region
        suffix = f"-{region}" if not is_token(region) else ""  # role names are global to the account
        given = cdk.Names.unique_resource_name(role, max_length=64 - len(suffix), separator="-") + suffix
        resource.role_name = given
    return f"arn:{home.partition}:iam::{home.account}:role/{given}"


@jsii.implements(cdk.IStableListProducer)
class _Writers:
    """The role ARNs of the RuleEvaluators covering a bucket, when the template is written (later ones count)."""

    def __init__(self, writers: list[str]) -> None:
        self._writers = writers

    def produce(self) -> list[str]:
        return list(self._writers)


# -- shared locations -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Claim:
    path: str
    bucket: str
    prefix: str
    #: the start of the job names whose folders this construct writes or reads ("" for every name)
    names: str
    #: the roles its jobs run as: constructs that share one are one party (a job, its evaluator, its pipeline)
    roles: frozenset[str]
    what: str


#: What each bucket claimed is known by (its name, or its path when the name is a token), found once per bucket.
_IDENTITIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def remember_bucket_identity(bucket: s3.IBucket, identity: str) -> None:
    """What a bucket the library just created is known by, so that claiming it does not ask Node.js."""
    _IDENTITIES[bucket] = identity


def _bucket_identity(bucket: s3.IBucket) -> str:
    identity = _IDENTITIES.get(bucket)
    if identity is None:
        name = cdk.Stack.of(bucket).resolve(bucket.bucket_name)
        identity = name if isinstance(name, str) and not is_token(name) else f"bucket {path_of(bucket)}"
        _IDENTITIES[bucket] = identity
    return identity


#: The root of each stack's construct tree, asked once per stack.
_ROOTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _root(scope: IConstruct, stack: cdk.Stack | None) -> IConstruct:
    if stack is None:
        return scope.node.root
    root = _ROOTS.get(stack)
    if root is None:
        root = _ROOTS[stack] = stack.node.root
    return root


def claim_output_location(scope: IConstruct, *, bucket: s3.IBucket, prefix: str, names: str,
                          roles: Sequence[str], what: str, stack: cdk.Stack | None = None) -> None:
    """Record that ``scope`` (a ProfiledTrainingJob's runs or pipeline runs, or a RuleEvaluator's family) uses the job
    folders ``<bucket>/<prefix>/<names>*`` with jobs running as ``roles``, and warn when a construct of another party
    (no role in common) uses overlapping folders: one party's training code could then write profiler files for the
    other's runs, and read or replace its models, or the evaluator would judge the other's runs. ``stack``, the stack
    of ``scope`` when the caller holds it, saves asking for the root of the tree each time."""
    claims: list[_Claim] = _root(scope, stack).__dict__.setdefault(_CLAIMS_ATTRIBUTE, [])
    claim = _Claim(path_of(scope), _bucket_identity(bucket), prefix.strip("/"), names, frozenset(roles), what)
    for other in claims:
        if claim.roles & other.roles or other.bucket != claim.bucket or other.prefix != claim.prefix:
            continue
        if other.path == claim.path:
            continue
        if not (claim.names.lower().startswith(other.names.lower()) or
                other.names.lower().startswith(claim.names.lower())):
            continue
        bucket = f"<{claim.bucket[len('bucket '):]}>" if claim.bucket.startswith("bucket ") else claim.bucket
        where = f"s3://{bucket}/{claim.prefix}".rstrip("/")
        cdk.Annotations.of(scope).add_warning_v2(
            SHARED_OUTPUT_WARNING,
            f"{claim.what} {claim.path} and {other.what} {other.path} share the output location {where} (job "
            f"folders {claim.names or '<any name>'}* and {other.names or '<any name>'}*) without a role in common: "
            "the training code of one can write files the other reads (profiler samples that decide its verdicts, "
            "its models). Give each its own output_prefix (or output_bucket), or the family the jobs' execution "
            "role.")
    claims.append(claim)
