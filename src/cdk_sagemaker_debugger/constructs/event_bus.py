"""The verdict bus: one EventBridge bus per stack for RuleEvaluator verdicts and continuation events.

Only the roles of the evaluator functions may publish on it. Its resource policy denies ``events:PutEvents`` to every
principal whose ``aws:PrincipalArn`` is not one of those roles; an explicit Deny in a resource policy wins over any
Allow, so an identity policy with ``events:PutEvents`` on ``*`` (an administrator, a CI role, the training code's
execution role) cannot publish a verdict. The event pattern of every rule on the bus still filters by source,
detail-type and job prefix, and RuleAlarm checks each verdict again before it acts (docs/rule-alarm.md, "Trust model").

Every RuleEvaluator and RuleAlarm of a stack, including the ones a construct creates for itself, gets the bus with
:func:`verdict_bus`; an evaluator function joins the publishers with :func:`allow_verdict_publisher`::

    bus = verdict_bus(self)
    allow_verdict_publisher(self, function_role)     # identity grant + exception from the Deny
    events.Rule(self, "Verdicts", event_bus=bus, event_pattern=...)
"""

from __future__ import annotations

import weakref
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

__all__ = ["VERDICT_BUS_ID", "VerdictBus", "verdict_bus", "allow_verdict_publisher", "is_verdict_bus"]

#: Construct id of the verdict bus, a direct child of its stack.
VERDICT_BUS_ID = "CdkSageMakerDebuggerVerdictBus"
_STATEMENT_ID = "OnlyRuleEvaluatorsPublish"

_BUSES: weakref.WeakKeyDictionary[cdk.Stack, VerdictBus] = weakref.WeakKeyDictionary()


@jsii.implements(cdk.IAnyProducer)
class _Producer:
    """Renders the Deny statement when the template is written, after every evaluator has joined."""

    def __init__(self, bus: VerdictBus) -> None:
        self._bus = bus

    def produce(self, context: cdk.IResolveContext) -> Any:
        return self._bus.deny_statement()


class VerdictBus(Construct):
    """The stack's verdict bus and its resource policy. Create it through :func:`verdict_bus`."""

    def __init__(self, scope: cdk.Stack, id: str) -> None:
        super().__init__(scope, id)
        #: The custom event bus the evaluators publish on and RuleAlarm listens on.
        self.bus = events.EventBus(
            self, "Bus", description="cdk-sagemaker-debugger: RuleEvaluator verdicts and continuation events"
        )
        self._publishers: list[iam.IRole] = []
        # Each publisher's ARN, read once when it joins (the policy is rendered more than once at synth).
        self._publisher_arns: list[str] = []
        #: Denies events:PutEvents to every principal but the publishers (all principals while there are none).
        #: The same AWS::Events::EventBusPolicy the L1 class writes, declared as a plain CfnResource: cdk-nag 3's
        #: EventBusOpenAccess check reads the L1's deprecated ``principal`` property from every CfnEventBusPolicy,
        #: which printed a jsii deprecation warning on each synth. This policy is a Deny (never open access) and
        #: uses ``Statement``, not the deprecated ``Principal``/``Action``/``Condition`` properties.
        self.policy = cdk.CfnResource(
            self,
            "PublishersOnly",
            type="AWS::Events::EventBusPolicy",
            properties={
                "EventBusName": self.bus.event_bus_name,
                "StatementId": _STATEMENT_ID,
                "Statement": cdk.Lazy.uncached_any(_Producer(self)),
            },
        )

    @property
    def publishers(self) -> tuple[iam.IRole, ...]:
        """The roles allowed to publish, in the order they joined."""
        return tuple(self._publishers)

    def allow(self, role: iam.IRole) -> None:
        """Let ``role`` publish: an identity grant on this bus and an exception from the bus policy's Deny."""
        if any(known is role for known in self._publishers):
            return
        self._publishers.append(role)
        self._publisher_arns.append(role.role_arn)
        self.bus.grant_put_events_to(role)

    def deny_statement(self) -> dict[str, Any]:
        """The policy statement (role ARNs are tokens; the condition compares them as ARNs, never as text)."""
        statement: dict[str, Any] = {
            "Sid": _STATEMENT_ID,
            "Effect": "Deny",
            "Principal": "*",
            "Action": "events:PutEvents",
            "Resource": self.bus.event_bus_arn,
        }
        if self._publishers:
            statement["Condition"] = {"ArnNotEquals": {"aws:PrincipalArn": list(self._publisher_arns)}}
        return statement


# The stack of each scope that asked (an evaluator asks for its bus, then to publish there: one lookup).
_STACKS: weakref.WeakKeyDictionary[IConstruct, cdk.Stack] = weakref.WeakKeyDictionary()


def _holder(scope: IConstruct) -> VerdictBus:
    stack = _STACKS.get(scope)
    if stack is None:
        stack = _STACKS[scope] = cdk.Stack.of(scope)
    holder = _BUSES.get(stack)
    if holder is None:
        existing = stack.node.try_find_child(VERDICT_BUS_ID)
        holder = existing if isinstance(existing, VerdictBus) else VerdictBus(stack, VERDICT_BUS_ID)
        _BUSES[stack] = holder
    return holder


def verdict_bus(scope: IConstruct) -> events.EventBus:
    """The verdict bus of ``scope``'s stack, created on first use."""
    return _holder(scope).bus


def allow_verdict_publisher(scope: IConstruct, role: iam.IRole) -> None:
    """Let ``role`` (an evaluator function's role) publish on the verdict bus of ``scope``'s stack."""
    _holder(scope).allow(role)


def is_verdict_bus(bus: object) -> bool:
    """Whether ``bus`` is the verdict bus of its stack (not an ``event_bus=`` of the user's)."""
    scope = getattr(getattr(bus, "node", None), "scope", None)
    return isinstance(scope, VerdictBus) and scope.node.id == VERDICT_BUS_ID
