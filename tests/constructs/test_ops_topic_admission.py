"""The operations topic and its KMS key admit the library's own alarms by exact ARN, and no other alarm of the account.

The attack: any principal of the account may create a CloudWatch alarm whose name and reason it chooses and whose
action is the ops topic; with ``aws:SourceArn = ...:alarm:*`` CloudWatch then delivered that text to whoever reads the
topic (the team's e-mail and SMS when it was the RuleAlarm topic). The policies are decided offline by a small local
evaluator (tests/policy_decisions.py) for the resolved template.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Annotations, Match, Template
from policy_decisions import ACCOUNT, REGION, decide, resolve

from cdk_sagemaker_debugger import Email, ProfiledTrainingJob, RuleAlarm, TrainingDashboard

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
CLOUDWATCH = {"Service": "cloudwatch.amazonaws.com"}


def _app(*, ops_in_other_stack: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """(monitoring template, template holding the ops topic)."""
    app = cdk.App()
    env = cdk.Environment(region=REGION)
    stack = cdk.Stack(app, "Vision", env=env)
    topic_stack = cdk.Stack(app, "Ops", env=env) if ops_in_other_stack else stack
    key = kms.Key(topic_stack, "OpsKey", enable_key_rotation=True)
    ops = sns.Topic(topic_stack, "OpsTopic", master_key=key, enforce_ssl=True)
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="vision-train", training_image=IMAGE,
                              instance_type="ml.g5.2xlarge")
    alarm = RuleAlarm(stack, "Alarm", training_jobs=job.training_jobs, actions=[Email("team@example.com")],
                      ops_topic=ops)
    TrainingDashboard(stack, "Dashboard", training_jobs=job.training_jobs, alarm=alarm, ops_topic=ops)
    return Template.from_stack(stack).to_json(), Template.from_stack(topic_stack).to_json()


def _statements(template: dict[str, Any], resource_type: str, policy_property: str) -> list[dict[str, Any]]:
    found = [r for r in template["Resources"].values() if r["Type"] == resource_type]
    return [s for r in found for s in resolve(r["Properties"][policy_property], template)["Statement"]]


def _alarm_arns(template: dict[str, Any]) -> list[str]:
    names = [r["Properties"].get("AlarmName") for r in template["Resources"].values()
             if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert len(names) == 4 and all(isinstance(n, str) for n in names), names
    return [f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{name}" for name in names]


def _decisions(topic_template: dict[str, Any], alarm_arn: str, account: str = ACCOUNT) -> tuple[str, str]:
    topic_arn = next(resolve({"Ref": k}, topic_template) for k, r in topic_template["Resources"].items()
                     if r["Type"] == "AWS::SNS::Topic")
    context = {"aws:SourceArn": alarm_arn, "aws:SourceAccount": account, "aws:SecureTransport": "true"}
    publish = decide(_statements(topic_template, "AWS::SNS::TopicPolicy", "PolicyDocument"), principal=CLOUDWATCH,
                     action="sns:Publish", resource=topic_arn, context=context)
    data_key = decide(_statements(topic_template, "AWS::KMS::Key", "KeyPolicy"), principal=CLOUDWATCH,
                      action="kms:GenerateDataKey", resource="*", context=context)
    return publish, data_key


@pytest.mark.parametrize("ops_in_other_stack", [False, True], ids=["same-stack", "ops-stack"])
def test_only_the_librarys_own_alarms_may_publish_to_the_ops_topic(ops_in_other_stack: bool) -> None:
    template, topic_template = _app(ops_in_other_stack=ops_in_other_stack)
    own = _alarm_arns(template)
    for arn in own:  # the alarms the library made (RuleAlarm's two, the dashboard's two) still notify
        assert _decisions(topic_template, arn) == ("Allow", "Allow"), arn
    attacker = [f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:URGENT stop your job, see https://evil.example",
                own[0] + "-copy",                                   # an owned name with a suffix
                own[0].replace(ACCOUNT, "222222222222")]            # the same name in another account
    for arn in attacker:
        assert "Allow" not in _decisions(topic_template, arn), arn
    assert "Allow" not in _decisions(topic_template, own[0], account="222222222222")


def test_alarm_names_are_owned_and_stable() -> None:
    template, _ = _app()
    names = sorted(r["Properties"]["AlarmName"] for r in template["Resources"].values()
                   if r["Type"] == "AWS::CloudWatch::Alarm")
    assert all(name.startswith("Vision-") for name in names), names
    assert len(set(names)) == 4
    assert names == sorted(r["Properties"]["AlarmName"] for r in _app()[0]["Resources"].values()
                           if r["Type"] == "AWS::CloudWatch::Alarm")


def test_an_imported_key_gets_a_warning_naming_the_alarms() -> None:
    stack = cdk.Stack(cdk.App(), "Vision", env=cdk.Environment(region=REGION))
    key = kms.Key.from_key_arn(stack, "Key", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab")
    ops = sns.Topic(stack, "Ops", master_key=key)
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="vision-train", training_image=IMAGE,
                              instance_type="ml.g5.2xlarge")
    RuleAlarm(stack, "Alarm", training_jobs=job.training_jobs, ops_topic=ops)
    warnings = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("opsTopicKey"))
    texts = [str(w.entry.data) for w in warnings]
    assert len(texts) == 1 and "aws:SourceArn = the alarm's ARN" in texts[0] and "Vision-Alarm-" in texts[0], texts
