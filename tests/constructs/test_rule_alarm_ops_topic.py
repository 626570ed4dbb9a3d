"""A RuleAlarm given no ``ops_topic`` gives its two health alarms an operations topic of its own, and the key and topic
policies are what docs/rule-alarm.md ("Security") says they are."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Annotations, Match, Template
from helpers import make_stack

from cdk_sagemaker_debugger import Email, ProfiledTrainingJob, ProfilerRuleSet, RuleAlarm, rules

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
ROOT = {"AWS": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":root"]]}}


def _alarm(**props: Any) -> tuple[cdk.Stack, RuleAlarm]:
    return _alarm_in(make_stack(name="Ops"), **props)


def _alarm_in(stack: cdk.Stack, **props: Any) -> tuple[cdk.Stack, RuleAlarm]:
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="resnet", training_image=IMAGE,
                              instance_type="ml.g5.2xlarge",
                              rule_set=ProfilerRuleSet(stack, "Rules", rules=[rules.ProfilerReport()]))
    return stack, RuleAlarm(stack, "Alarm", training_jobs=job.training_jobs, actions=[Email("ml@example.com")],
                            **props)


def _resource(template: dict[str, Any], construct: Any) -> dict[str, Any]:
    return template["Resources"][cdk.Stack.of(construct).get_logical_id(construct.node.default_child)]


def _alarm_arn(name: str) -> dict[str, Any]:
    return {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":cloudwatch:us-east-1:", {"Ref": "AWS::AccountId"},
                              f":alarm:{name}"]]}


def test_without_ops_topic_the_health_alarms_notify_the_alarms_own_topic() -> None:
    stack, alarm = _alarm()
    template = Template.from_stack(stack).to_json()
    assert alarm.ops_topic_created and alarm.ops_topic.node.path == "Ops/Alarm/OpsTopic"
    own = {"Ref": stack.get_logical_id(alarm.ops_topic.node.default_child)}
    for health in (alarm.dead_letter_alarm, alarm.errors_alarm):
        properties = _resource(template, health)["Properties"]
        assert properties["AlarmActions"] == [own] and properties["OKActions"] == [own]
    topic = _resource(template, alarm.ops_topic)["Properties"]
    assert topic["KmsMasterKeyId"] == {"Fn::GetAtt": [stack.get_logical_id(alarm.topic_key.node.default_child), "Arn"]}
    # nobody is subscribed by the library: the operator subscribes (the team's e-mail goes to alarm.topic only)
    subscriptions = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SNS::Subscription"]
    assert [s["TopicArn"] for s in subscriptions] == [{"Ref": stack.get_logical_id(alarm.topic.node.default_child)}]


def test_the_topic_key_policy_is_the_documented_one() -> None:
    stack, alarm = _alarm()
    template = Template.from_stack(stack).to_json()
    names = sorted(_resource(template, a)["Properties"]["AlarmName"] for a in (alarm.dead_letter_alarm,
                                                                                alarm.errors_alarm))
    statements = _resource(template, alarm.topic_key)["Properties"]["KeyPolicy"]["Statement"]
    root, cloudwatch = statements  # CDK's default statement and the one admitting the two health alarms, no other
    assert root == {"Action": "kms:*", "Effect": "Allow", "Principal": ROOT, "Resource": "*"}
    assert cloudwatch["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert cloudwatch["Action"] == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert cloudwatch["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert sorted(cloudwatch["Condition"]["ArnEquals"]["aws:SourceArn"], key=str) == sorted(
        (_alarm_arn(n) for n in names), key=str)
    # the notification topic's own policy only denies publishing without TLS: no service principal publishes there
    policies = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SNS::TopicPolicy"
                and r["Properties"]["Topics"] == [{"Ref": stack.get_logical_id(alarm.topic.node.default_child)}]]
    (only,) = [s for p in policies for s in p["PolicyDocument"]["Statement"]]
    assert (only["Effect"], only["Principal"], only["Condition"]) == (
        "Deny", "*", {"Bool": {"aws:SecureTransport": "false"}})


def test_a_topic_key_of_yours_gives_the_own_ops_topic_a_key_of_its_own_and_no_warning() -> None:
    stack = make_stack(name="Ops")
    key = kms.Key.from_key_arn(stack, "Key", "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab")
    _, alarm = _alarm_in(stack, topic_key=key)
    template = Template.from_stack(stack).to_json()
    own_key = alarm.ops_topic.master_key
    assert own_key is not None and own_key.node.path == "Ops/Alarm/OpsTopicKey"
    key_resource = _resource(template, own_key)["Properties"]
    assert key_resource["EnableKeyRotation"] is True
    assert any(s.get("Sid") == "CloudWatchAlarmsUseKey" for s in key_resource["KeyPolicy"]["Statement"])
    warnings = Annotations.from_stack(stack).find_warning("*", Match.any_value())
    assert not [w for w in warnings if "opsTopicKey" in str(w)]

