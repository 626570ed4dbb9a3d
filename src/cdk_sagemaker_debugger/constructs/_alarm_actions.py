"""Actions for the CloudWatch alarms the library creates: an operations topic, and CloudWatch's right to publish to it."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import aws_cdk as cdk
import jsii
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct, IConstruct

from ..model.errors import ConfigurationTypeError

__all__ = ["AlarmActions", "allow_alarm_notifications", "own_ops_topic", "owned_alarm_name"]

_CLOUDWATCH = "cloudwatch.amazonaws.com"
# Topics (and keys) whose policy already admits the library's alarms, with the alarm ARNs admitted: the statement is
# added once per resource and lists every alarm that notifies through it when the template is written.
# Keyed by stack and construct path: jsii may hand out a new Python object for the same key (``topic.master_key``).
_ADMITTED: weakref.WeakKeyDictionary[cdk.Stack, dict[str, list[str]]] = weakref.WeakKeyDictionary()
# Keys defined outside the app (their policy cannot be changed here), by stack and construct path.
_FOREIGN_KEYS: weakref.WeakKeyDictionary[cdk.Stack, set[str]] = weakref.WeakKeyDictionary()


@jsii.implements(cdk.IStableListProducer)
class _AdmittedAlarms:
    """The ARNs of the alarms admitted on one topic or key, when the template is written (alarms added later count)."""

    def __init__(self, arns: list[str]) -> None:
        self._arns = arns

    def produce(self) -> list[str]:
        return list(dict.fromkeys(self._arns))


def owned_alarm_name(alarm: cloudwatch.Alarm) -> str:
    """Give ``alarm`` a name the library owns (stack name, construct path and a hash of the path) and return it.

    The name is known at synth, so the topic and key policies can admit this alarm's exact ARN without a reference
    to the alarm (a key policy referring to an alarm that refers to the key's topic would be a cycle).
    """
    cfn = cast(cloudwatch.CfnAlarm, alarm.node.default_child)
    if isinstance(cfn.alarm_name, str) and not cdk.Token.is_unresolved(cfn.alarm_name):
        return cfn.alarm_name
    name = cdk.Names.unique_resource_name(alarm, separator="-", max_length=255)
    cfn.alarm_name = name
    return name


def own_ops_topic(scope: Construct, key: kms.Key | None) -> sns.Topic:
    """An operations topic of ``scope``'s own (``OpsTopic``): SSL only, no subscriber, encrypted with ``key`` (a key
    defined here, whose policy can admit CloudWatch) or, when None, a new key with rotation (``OpsTopicKey``).

    For constructs given no ``ops_topic``: their health alarms notify it instead of having no action, and an
    operator subscribes to it. The library's alarms are admitted on it (and on its key) by :class:`AlarmActions`."""
    if key is None:
        key = kms.Key(scope, "OpsTopicKey", enable_key_rotation=True,
                      description=f"Encrypts the operations notifications of {scope.node.path}")
    return sns.Topic(scope, "OpsTopic", master_key=key, enforce_ssl=True,
                     display_name="SageMaker rule alarm operations")


def _alarm_arn(alarm: cloudwatch.Alarm) -> str:
    return cdk.Stack.of(alarm).format_arn(service="cloudwatch", resource="alarm", resource_name=owned_alarm_name(alarm),
                                          arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)


@dataclass(frozen=True)
class AlarmActions:
    """What every alarm of a construct does: notify ``ops_topic`` on ALARM and on OK, and run ``extra`` on ALARM."""

    ops_topic: sns.ITopic | None = None
    extra: tuple[cloudwatch.IAlarmAction, ...] = ()

    @classmethod
    def checked(cls, ops_topic: object, extra: object = (), *, where: str) -> AlarmActions:
        """Validate the props (``ops_topic``, ``alarm_actions``) and return the actions they describe."""
        if ops_topic is not None and not (hasattr(ops_topic, "topic_arn") and hasattr(ops_topic, "grant_publish")):
            raise ConfigurationTypeError(
                f"expected an SNS topic (sns.ITopic, e.g. sns.Topic(...) or sns.Topic.from_topic_arn(...)), got "
                f"{type(ops_topic).__name__}.", where=where, field="ops_topic", value=ops_topic)
        if isinstance(extra, str) or not isinstance(extra, Sequence):
            raise ConfigurationTypeError(
                f"expected a list of alarm actions (cloudwatch.IAlarmAction), got {type(extra).__name__}.",
                where=where, field="alarm_actions", value=extra)
        for position, action in enumerate(extra):
            if not hasattr(action, "bind"):
                raise ConfigurationTypeError(
                    f"item {position} is {type(action).__name__}; expected an alarm action such as "
                    "cloudwatch_actions.SnsAction(topic) or cloudwatch_actions.LambdaAction(function).",
                    where=where, field="alarm_actions", value=action)
        return cls(ops_topic, tuple(extra))  # type: ignore[arg-type]

    def __bool__(self) -> bool:
        return self.ops_topic is not None or bool(self.extra)

    def apply(self, *alarms: cloudwatch.Alarm) -> None:
        """Add the actions to ``alarms``, and admit them (their exact ARNs) on ``ops_topic`` and its key: one call
        per construct holding some of them (so a warning names all of that construct's alarms at once)."""
        by_scope: dict[str, tuple[IConstruct, list[cloudwatch.Alarm]]] = {}
        for alarm in alarms:
            if self.ops_topic is not None:
                action = cloudwatch_actions.SnsAction(self.ops_topic)
                alarm.add_alarm_action(action)
                alarm.add_ok_action(action)
                scope = alarm.node.scope or alarm
                by_scope.setdefault(scope.node.path, (scope, []))[1].append(alarm)
            if self.extra:
                alarm.add_alarm_action(*self.extra)
        for scope, held in by_scope.values():
            allow_alarm_notifications(scope, self.ops_topic, alarms=held)  # type: ignore[arg-type]


def allow_alarm_notifications(scope: IConstruct, topic: sns.ITopic, key: kms.IKey | None = None, *,
                              alarms: Sequence[cloudwatch.Alarm]) -> None:
    """Let ``alarms`` (and no other CloudWatch alarm) publish to ``topic`` and use its KMS key.

    A topic with a resource policy (``enforce_ssl=True`` creates one) or a customer-managed key refuses CloudWatch
    until its policies allow ``cloudwatch.amazonaws.com``; the statements require ``aws:SourceAccount`` (this
    account) and ``aws:SourceArn`` equal to the ARN of one of the alarms admitted so far on that topic or key, so
    another alarm of the account (whose name and reason its author chooses) cannot publish. Each alarm gets a name the
    library owns (:func:`owned_alarm_name`). ``key`` defaults to the topic's ``master_key``. Topics and keys imported
    from elsewhere cannot be changed here: a key among them gets a synth warning naming the statement to add.
    """
    arns = [_alarm_arn(alarm) for alarm in alarms]
    stack = cdk.Stack.of(scope)
    admitted = _admitted(topic, arns)
    if admitted is not None:
        topic.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsPublish", principals=[iam.ServicePrincipal(_CLOUDWATCH)], actions=["sns:Publish"],
            resources=[topic.topic_arn], conditions=_conditions(stack, admitted)))
    key = key if key is not None else topic.master_key
    if key is None:
        return
    foreign = _FOREIGN_KEYS.setdefault(stack, set())
    admitted = None if key.node.path in foreign else _admitted(key, arns)
    if admitted is not None and not key.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsUseKey", principals=[iam.ServicePrincipal(_CLOUDWATCH)],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=["*"],
            conditions=_conditions(stack, admitted))).statement_added:
        foreign.add(key.node.path)
    if key.node.path in foreign:  # every construct whose alarms need the statement is told
        cdk.Annotations.of(scope).add_warning_v2(
            "cdk-sagemaker-debugger:opsTopicKey",
            f"The KMS key of the topic {topic.node.path} is not defined in this app, so its policy cannot be changed "
            "here. Alarm notifications reach an encrypted topic only when the key policy allows "
            f"{_CLOUDWATCH} kms:Decrypt and kms:GenerateDataKey* (conditions aws:SourceAccount = this account and "
            f"aws:SourceArn = the alarm's ARN: {', '.join(owned_alarm_name(a) for a in alarms)}).",
        )


def _admitted(resource: IConstruct, arns: list[str]) -> list[str] | None:
    """Record ``arns`` on ``resource``; returns the (live) list when the resource needs its statement, else None."""
    admitted = _ADMITTED.setdefault(cdk.Stack.of(resource), {})
    known = admitted.get(resource.node.path)
    if known is not None:
        known.extend(arns)
        return None
    admitted[resource.node.path] = known = list(arns)
    return known


def _conditions(stack: cdk.Stack, arns: list[str]) -> dict[str, object]:
    return {"StringEquals": {"aws:SourceAccount": stack.account},
            "ArnEquals": {"aws:SourceArn": cdk.Lazy.list(_AdmittedAlarms(arns))}}
