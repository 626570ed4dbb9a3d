"""cdk-nag acknowledgements: on the one CloudFormation resource a finding is about, each with its own reason."""

from __future__ import annotations

import weakref
from collections.abc import Mapping

import aws_cdk as cdk
from constructs import IConstruct

from ...model.parameters import is_token

__all__ = ["Findings", "KMS_KEY_FINDINGS", "acknowledge", "acknowledge_pairs", "acknowledge_wildcards",
           "finding_target"]


def finding_target(scope: IConstruct) -> cdk.CfnResource:
    """The CloudFormation resource a finding about ``scope`` is reported on: ``scope`` itself or its default child.

    Acknowledgements go there and nowhere else: cdk-nag matches an acknowledgement to every finding of the resources
    *below* the construct it sits on, so one on a role or a whole job would also hide what a user adds later (a
    ``Resource::*`` statement in the role's DefaultPolicy, say)."""
    if isinstance(scope, cdk.CfnResource):
        return scope
    known = _TARGETS.get(scope)
    if known is not None:
        return known
    child = scope.node.default_child  # an L2 construct (asked first: the JavaScript check is a round trip)
    if child is not None and _is_cfn_resource(child):
        _TARGETS[scope] = child  # type: ignore[assignment]
        return child  # type: ignore[return-value]
    if _is_cfn_resource(scope):
        return scope  # type: ignore[return-value]
    raise TypeError(f"{scope.node.path} is not backed by one CloudFormation resource; acknowledge on that resource")


#: The resource behind each construct acknowledged on, found once (a construct's findings and its compliance findings
#: are acknowledged at different times).
_TARGETS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _is_cfn_resource(scope: object) -> bool:
    """Asked in Python first: jsii hands CloudFormation resources over as CfnResource subclasses (no round trip)."""
    return isinstance(scope, cdk.CfnResource) or cdk.CfnResource.is_cfn_resource(scope)


def acknowledge(scope: IConstruct, findings: dict[str, str], *, resource: cdk.CfnResource | None = None) -> None:
    """Acknowledge cdk-nag / validation findings on the one resource behind ``scope`` (``resource`` when the caller
    holds it already), each with its specific reason: one call for all of them."""
    if findings:
        acknowledge_pairs(resource if resource is not None else finding_target(scope), list(findings.items()))


def acknowledge_pairs(resource: cdk.CfnResource, pairs: list[tuple[str, str]]) -> None:
    """Acknowledge each ``(finding id, reason)`` of ``pairs`` on ``resource``, in order, in one call (a finding id may
    come twice, with two reasons, as two separate acknowledgements would record it)."""
    if pairs:
        _validations(resource).acknowledge(*(cdk.Acknowledgment(id=finding_id, reason=reason)
                                             for finding_id, reason in pairs))


#: ``Validations.of`` each resource acknowledged on, asked once (a resource is acknowledged on when it is made and again
#: for the compliance packs).
_VALIDATIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _validations(resource: cdk.CfnResource) -> cdk.Validations:
    validations = _VALIDATIONS.get(resource)
    if validations is None:
        validations = _VALIDATIONS[resource] = cdk.Validations.of(resource)
    return validations


def _flatten(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref":
            return f"<{arg}>"
        if key == "Fn::GetAtt":
            return f"<{arg[0]}.{arg[1]}>"
        if key == "Fn::Join":
            separator, parts = arg
            return separator.join(_flatten(part) for part in parts)
    return str(value)


#: The two wildcard actions ``IKey.grant_encrypt_decrypt`` adds, with why they are acceptable on a key a user passed.
KMS_KEY_FINDINGS = {
    "Action::kms:ReEncrypt*": "kms:ReEncrypt* comes with IKey.grant_encrypt_decrypt on a key passed to the library "
    "(for its volumes, output or buckets) and is limited to that one key.",
    "Action::kms:GenerateDataKey*": "kms:GenerateDataKey* comes with IKey.grant_encrypt_decrypt on a key passed to "
    "the library (for its volumes, output or buckets) and is limited to that one key.",
}


def acknowledge_wildcards(scope: IConstruct, findings: dict[str, str], *, stack: cdk.Stack | None = None,
                          resource: cdk.CfnResource | None = None) -> None:
    """Acknowledge each AwsSolutions-IAM5 finding of one resource on its own, with its own reason.

    ``scope`` is the policy-bearing resource (an ``iam.Policy``, a role whose inline policy holds the statements, or
    their CloudFormation resource): the acknowledgement covers that resource only. Keys are
    ``"Action::<action pattern>"`` or ``"Resource::<resource>"`` (cdk-nag's ``appliesTo``, the exact strings); a
    resource may hold CDK tokens (it is spelled the way cdk-nag spells it). Keys that already are finding ids
    (``"AwsSolutions::..."``) pass through unchanged.
    """
    acknowledge(scope, _spelled_ids(findings, lambda: stack or cdk.Stack.of(scope)), resource=resource)


def _spelled_ids(findings: dict[str, str], stack_of) -> dict[str, str]:
    """``findings`` by finding id, their tokenized resources spelled as cdk-nag spells them (``stack_of()`` is asked
    for the stack only when some resource holds a token)."""
    tokenized = _tokenized_resources(findings)
    return _finding_ids(findings, _spell(tokenized, stack_of()) if tokenized else {})


def _tokenized_resources(findings: dict[str, str]) -> list[str]:
    """The ``Resource::`` targets of ``findings`` that hold CDK tokens (spelled by resolving them)."""
    return [target for kind, _, target in (key.partition("::") for key in findings)
            if kind == "Resource" and is_token(target)]


def _spell(tokenized: list[str], stack: cdk.Stack) -> dict[str, str]:
    """How cdk-nag spells each tokenized resource: one resolve for all of them instead of one jsii round trip each."""
    unique = list(dict.fromkeys(tokenized))
    return dict(zip(unique, (_flatten(v) for v in stack.resolve(unique)), strict=True))


def _finding_ids(findings: dict[str, str], spelled: dict[str, str]) -> dict[str, str]:
    ids = {}
    for key, reason in findings.items():
        kind, _, target = key.partition("::")
        if kind in ("Action", "Resource"):
            ids[f"AwsSolutions::AwsSolutions-IAM5[{kind}::{spelled.get(target, target)}]"] = reason
        else:
            ids[key] = reason
    return ids


class Findings:
    """cdk-nag findings of the resources below one construct, collected while it is built and acknowledged in one
    batch per resource at the end (each acknowledgement is a round trip to jsii). After :meth:`flush`, findings are
    acknowledged as they come (for grants made later, such as rules added after the construct).

    :meth:`close` instead of :meth:`flush` keeps the batch, and what comes after it in order, for :meth:`take`: the
    construct's compliance acknowledgements write them together with their own, one call per resource."""

    def __init__(self, scope: IConstruct, stack: cdk.Stack) -> None:
        self._scope = scope
        self._stack = stack
        self._pending: dict[str, dict[str, str]] | None = {}
        self._queued: dict[str, list[tuple[str, str]]] | None = None
        self._resources: dict[str, cdk.CfnResource] = {}

    def register(self, target: str, resource: cdk.CfnResource) -> None:
        """The CloudFormation resource at path ``target`` (the caller built it, so it need not be looked up)."""
        self._resources[target] = resource

    @property
    def resources(self) -> Mapping[str, cdk.CfnResource]:
        """The registered resources by path below the scope (a live view: later registrations show)."""
        return self._resources

    def add(self, target: str, findings: dict[str, str]) -> None:
        """Record ``findings`` (``Resource::...``, ``Action::...`` or finding ids, to reasons) of the resource at path
        ``target`` below the scope; a second reason for the same finding is appended to the first."""
        if self._pending is None:
            if self._queued is None:
                self._acknowledge(target, findings)
            else:
                self._queue(target, findings)
            return
        known = self._pending.setdefault(target, {})
        for finding, reason in findings.items():
            previous = known.get(finding)
            known[finding] = reason if previous is None or reason in previous else f"{previous} {reason}"

    def flush(self) -> None:
        """Acknowledge what was collected: one call per resource, and one resolve for every tokenized resource of
        all of them."""
        self.close()
        for target, pairs in self.take().items():
            acknowledge_pairs(self.resource(target), pairs)

    def close(self) -> None:
        """End the batch: what was collected (one resolve for every tokenized resource of it), and what comes until
        :meth:`take`, waits for :meth:`take`."""
        pending, self._pending = self._pending, None
        self._queued = {}
        if not pending:
            return
        tokenized = [target for grouped in pending.values() for target in _tokenized_resources(grouped)]
        spelled = _spell(tokenized, self._stack) if tokenized else {}
        for target, grouped in pending.items():
            self._queued.setdefault(target, []).extend(_finding_ids(grouped, spelled).items())

    def take(self) -> dict[str, list[tuple[str, str]]]:
        """The ``(finding id, reason)`` pairs waiting since :meth:`close`, by target path, in the order they came; from
        now on findings are acknowledged as they come."""
        queued, self._queued = self._queued or {}, None
        return queued

    def resource(self, target: str) -> cdk.CfnResource:
        """The CloudFormation resource at path ``target`` below the scope (registered, or looked up)."""
        resource = self._resources.get(target)
        return resource if resource is not None else finding_target(self._resource_at(target))

    def _queue(self, target: str, findings: dict[str, str]) -> None:
        ids = _spelled_ids(findings, lambda: self._stack)
        self._queued.setdefault(target, []).extend(ids.items())  # type: ignore[union-attr]

    def _acknowledge(self, target: str, findings: dict[str, str]) -> None:
        resource = self._resources.get(target)
        scope = resource if resource is not None else self._resource_at(target)
        acknowledge_wildcards(scope, findings, stack=self._stack, resource=resource)

    def _resource_at(self, path: str) -> IConstruct:
        node: IConstruct = self._scope
        for part in path.split("/"):
            child = node.node.try_find_child(part)
            if child is None:
                raise LookupError(f"{self._scope.node.path}: no {path!r} to acknowledge cdk-nag findings on")
            node = child
        return node
