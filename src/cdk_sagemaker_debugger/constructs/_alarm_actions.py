"""Actions for the CloudWatch alarms the library creates: an operations topic, and CloudWatch's right to publish to it."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import IConstruct

from ..model.errors import ConfigurationTypeError

__all__ = ["AlarmActions", "allow_alarm_notifications"]

_CLOUDWATCH = "cloudwatch.amazonaws.com"
# Topics (and keys) whose policy already lets this account's alarms publish: the statement is added once per resource.
_ALLOWED: weakref.WeakSet[object] = weakref.WeakSet()


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

    def apply(self, alarm: cloudwatch.Alarm) -> None:
        if self.ops_topic is not None:
            action = cloudwatch_actions.SnsAction(self.ops_topic)
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
        if self.extra:
            alarm.add_alarm_action(*self.extra)

    def allow_publishing(self, scope: IConstruct, key: kms.IKey | None = None) -> None:
        """Let this account's alarms publish to ``ops_topic`` (see :func:`allow_alarm_notifications`)."""
        if self.ops_topic is not None:
            allow_alarm_notifications(scope, self.ops_topic, key)


def allow_alarm_notifications(scope: IConstruct, topic: sns.ITopic, key: kms.IKey | None = None) -> None:
    """Let CloudWatch alarms of ``scope``'s account and region publish to ``topic`` and use its KMS key.

    A topic with a resource policy (``enforce_ssl=True`` creates one) or a customer-managed key refuses CloudWatch
    until its policies allow ``cloudwatch.amazonaws.com``; the statements are scoped with ``aws:SourceAccount`` and
    ``aws:SourceArn`` (this account's alarms) against the confused deputy. ``key`` defaults to the topic's
    ``master_key``. Topics and keys imported from elsewhere cannot be changed here: a key among them gets a synth
    warning naming the statement to add.
    """
    stack = cdk.Stack.of(scope)
    alarms = stack.format_arn(service="cloudwatch", resource="alarm", resource_name="*",
                              arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)
    conditions = {"StringEquals": {"aws:SourceAccount": stack.account}, "ArnLike": {"aws:SourceArn": alarms}}
    if topic not in _ALLOWED:
        _ALLOWED.add(topic)
        topic.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsPublish", principals=[iam.ServicePrincipal(_CLOUDWATCH)], actions=["sns:Publish"],
            resources=[topic.topic_arn], conditions=conditions))
    key = key if key is not None else topic.master_key
    if key is None or key in _ALLOWED:
        return
    _ALLOWED.add(key)
    added = key.add_to_resource_policy(iam.PolicyStatement(
        sid="CloudWatchAlarmsUseKey", principals=[iam.ServicePrincipal(_CLOUDWATCH)],
        actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=["*"], conditions=conditions))
    if not added.statement_added:
        cdk.Annotations.of(scope).add_warning_v2(
            "cdk-sagemaker-debugger:opsTopicKey",
            f"The KMS key of the topic {topic.node.path} is not defined in this app, so its policy cannot be changed "
            "here. Alarm notifications reach an encrypted topic only when the key policy allows "
            f"{_CLOUDWATCH} kms:Decrypt and kms:GenerateDataKey* (condition aws:SourceAccount = this account).",
        )
