"""What cdk-nag's HIPAA Security and NIST 800-53 R5 packs report on the library's own resources and the library does
not change, each with its reason: the one list the constructs acknowledge from and docs/compliance.md shows.

Everything else those packs check is met by the resources themselves (alarm actions, log retention, encryption,
point-in-time recovery, dead-letter queues, reserved concurrency). A finding is acknowledged on the one CloudFormation
resource it is about, named by its path below the library construct that creates it, and only for the two packs'
rule ids listed here; AwsSolutions findings are acknowledged where each resource is made (see ``nag.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

import aws_cdk as cdk
import jsii
from constructs import Construct, IConstruct, Node

from .nag import Findings, acknowledge_pairs, finding_target

__all__ = ["COMPLIANCE_PACKS", "ACKNOWLEDGED", "Acknowledged", "acknowledge_compliance"]

#: The cdk-nag packs whose findings this list acknowledges (the prefix of their rule ids).
COMPLIANCE_PACKS = ("HIPAA.Security", "NIST.800.53.R5")


@dataclass(frozen=True)
class Acknowledged:
    """One rule of both packs (``HIPAA.Security-<rule>`` and ``NIST.800.53.R5-<rule>``), the resources it is
    acknowledged on (``<construct class>/<path below it>``) and why."""

    rule: str
    resources: tuple[str, ...]
    reason: str

    @property
    def rule_ids(self) -> tuple[str, ...]:
        return tuple(f"{pack}-{self.rule}" for pack in COMPLIANCE_PACKS)


ACKNOWLEDGED: tuple[Acknowledged, ...] = (
    Acknowledged(
        "S3BucketLoggingEnabled", ("ProfiledTrainingJob/OutputBucket",),
        "The output bucket is written only by SageMaker and the library's functions, under roles scoped to the "
        "family's prefixes, and read through the same roles (CloudTrail records the API calls); server access logs "
        "need a log bucket of their own. Pass output_bucket= with the bucket logging your organisation requires.",
    ),
    Acknowledged(
        "S3BucketReplicationEnabled", ("ProfiledTrainingJob/OutputBucket",),
        "Training outputs (model artifacts, profiler samples, rule reports) can be produced again by training again; "
        "replication needs a second bucket in another region, which is the bucket owner's choice. Pass "
        "output_bucket= with a replicated bucket when your recovery plan needs one.",
    ),
    Acknowledged(
        "IAMNoInlinePolicy",
        ("ProfiledTrainingJob/ExecutionRole", "ProfiledTrainingJob/ExecutionRole/DefaultPolicy",
         "ProfiledTrainingJob/StateMachineRole", "ProfiledTrainingJob/StateMachineRole/DefaultPolicy",
         "ProfiledTrainingJob/RuleActionsPolicy", "ProfiledTrainingJob/DebuggerTopicDenyPolicy",
         "RuleEvaluator/Role/DefaultPolicy", "RuleEvaluator/Permissions",
         "RuleAlarm/Role/DefaultPolicy", "TrainingDashboard/GpuWatch/Role/DefaultPolicy",
         "TrainingDashboard/GpuWatch/UnscopedActions", "TrainingPipeline/ExecutionRole"),
        "Each policy names the resources of one construct and belongs to the one role created with it; as customer "
        "managed policies they could be attached to other principals and would outlive the role. Their statements "
        "are still checked one by one (AwsSolutions-IAM5).",
    ),
    Acknowledged(
        "CloudWatchLogGroupEncrypted",
        ("ProfiledTrainingJob/StateMachineLogs", "RuleEvaluator/Logs", "RuleAlarm/Logs",
         "TrainingDashboard/GpuWatch/Logs"),
        "The logs hold job names, rule names, statuses and request ids, no training data; CloudWatch Logs encrypts "
        "them at rest with its own keys. A customer-managed key would need a key policy for the logs service of "
        "each region and a key per stack.",
    ),
    Acknowledged(
        "LambdaInsideVPC",
        ("RuleEvaluator/Function", "RuleAlarm/Handler", "TrainingDashboard/GpuWatch/Function"),
        "The functions call only AWS APIs (SageMaker, S3, DynamoDB, SNS, EventBridge, CloudWatch) with their own "
        "scoped roles and reach nothing inside a VPC; in one they would need a NAT gateway or an interface endpoint "
        "per service.",
    ),
    Acknowledged(
        "DynamoDBInBackupPlan", ("RuleAlarm/Ledger",),
        "The ledger holds which verdicts were already notified, each item expiring after transition_retention; it "
        "has point-in-time recovery (35 days). Restoring an older copy would only make notifications repeat.",
    ),
)


def _by_construct() -> dict[str, dict[str, dict[str, str]]]:
    """construct class -> path below it -> rule id -> reason."""
    table: dict[str, dict[str, dict[str, str]]] = {}
    for entry in ACKNOWLEDGED:
        for resource in entry.resources:
            kind, _, path = resource.partition("/")
            ids = table.setdefault(kind, {}).setdefault(path, {})
            for rule_id in entry.rule_ids:
                ids[f"{rule_id.partition('-')[0]}::{rule_id}"] = entry.reason
    return table


_BY_CONSTRUCT = _by_construct()


@jsii.implements(cdk.IAspect)
class _AcknowledgeCompliance:
    """Acknowledges, once, when the app is synthesized, the listed findings of the resources below one construct that
    exist by then (a role's default policy may be created after the construct, by a grant of another one).

    It is applied to the construct's first CloudFormation resource, not to the construct: an aspect is called back (a
    jsii round trip) for every construct below the one it is applied to, and its work is done on the first call. The
    tree walk reaches that resource before any other resource of the construct, and the aspect runs there before any
    aspect of default priority, so every resource is acknowledged before such an aspect visits it.

    With the construct's closed cdk-nag :class:`~.nag.Findings`, their acknowledgements are written here too, each
    resource's before its compliance ones, in one call per resource."""

    def __init__(self, root: Construct, paths: dict[str, dict[str, str]], known: Mapping[str, cdk.CfnResource],
                 findings: Findings | None = None) -> None:
        self._root = root
        self._paths: dict[str, dict[str, str]] | None = paths
        self._known = known
        self._findings = findings

    def visit(self, node: IConstruct) -> None:
        paths, self._paths = self._paths, None
        if paths is None:
            return
        by_resource: dict[int, tuple[cdk.CfnResource, list[tuple[str, str]]]] = {}
        if self._findings is not None:
            for target, pairs in self._findings.take().items():
                resource = self._findings.resource(target)
                by_resource.setdefault(id(resource), (resource, []))[1].extend(pairs)
        root: Node | None = None
        for path, findings in paths.items():
            resource = self._known.get(path)
            if resource is None:
                root = root or self._root.node
                found = _find(root, path)
                resource = finding_target(found) if found is not None else None
            if resource is not None:
                by_resource.setdefault(id(resource), (resource, []))[1].extend(findings.items())
        for resource, pairs in by_resource.values():
            acknowledge_pairs(resource, pairs)


def _find(root: Node, path: str) -> IConstruct | None:
    first, *rest = path.split("/")
    node = root.try_find_child(first)
    for part in rest:
        node = node.node.try_find_child(part) if node is not None else None
    return node


def _anchor(construct: IConstruct) -> IConstruct:
    """The first CloudFormation resource below ``construct`` in the order aspects visit the tree (``construct`` if
    there is none): the construct tree in one request, each resource recognized in Python. No resource below
    ``construct`` is visited before it, and (a CloudFormation resource) it has no children to visit."""
    return next((node for node in construct.node.find_all() if isinstance(node, cdk.CfnResource)), construct)


@functools.cache
def _mutating() -> int:
    """``AspectPriority.MUTATING``, read from jsii once."""
    return cdk.AspectPriority.MUTATING


def acknowledge_compliance(construct: Construct, kind: str, *, known: Mapping[str, cdk.CfnResource] | None = None,
                           findings: Findings | None = None) -> None:
    """Acknowledge, on each resource of ``construct`` (a library construct of class ``kind``) listed in
    :data:`ACKNOWLEDGED`, that resource's findings of the two packs, when the app is synthesized.

    ``known`` (default: none) maps paths below ``construct`` to the CloudFormation resources the caller built there
    (read when the app is synthesized, so later entries count): those are not looked up in the construct tree.

    ``findings`` (default: none), the construct's cdk-nag findings, are closed here and written with the compliance
    acknowledgements (their resources, :attr:`~.nag.Findings.resources`, count as ``known``): one call per resource
    instead of two."""
    paths = _BY_CONSTRUCT.get(kind)
    if not paths:
        if findings is not None:
            findings.flush()
        return
    if findings is not None:
        findings.close()
        known = findings.resources if known is None else known
    cdk.Aspects.of(_anchor(construct)).add(_AcknowledgeCompliance(construct, paths, known or {}, findings),
                                            priority=_mutating())
