"""Every RuleAlarm subscription has a redrive policy: a notification SNS cannot deliver (a bouncing address, an SMS
failure) lands in an encrypted, SSL-only queue instead of being lost."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk.assertions import Template

from cdk_sagemaker_debugger import SMS, Email, ProfiledTrainingJob, RuleAlarm

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"


def test_every_subscription_redrives_to_an_encrypted_ssl_only_queue() -> None:
    stack = cdk.Stack(cdk.App(), "Vision", env=cdk.Environment(region="us-east-1"))
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="vision", training_image=IMAGE)
    alarm = RuleAlarm(stack, "Alarm", training_jobs=job.training_jobs,
                      actions=[Email("team@example.com"), SMS("+15555550100")])
    alarm.add_email_subscriber("oncall@example.com")
    template = Template.from_stack(stack).to_json()
    queue = alarm.subscription_dead_letter_queue
    queue_id = stack.get_logical_id(queue.node.default_child)
    subscriptions = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SNS::Subscription"]
    assert sorted(s["Protocol"] for s in subscriptions) == ["email", "email", "sms"]
    for subscription in subscriptions:
        assert subscription["RedrivePolicy"] == {"deadLetterTargetArn": {"Fn::GetAtt": [queue_id, "Arn"]}}
    assert template["Resources"][queue_id]["Properties"]["SqsManagedSseEnabled"] is True
    (policy,) = [r["Properties"]["PolicyDocument"]["Statement"] for r in template["Resources"].values()
                 if r["Type"] == "AWS::SQS::QueuePolicy" and r["Properties"]["Queues"] == [{"Ref": queue_id}]]
    assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in policy)
    assert any(s["Effect"] == "Allow" and s["Principal"] == {"Service": "sns.amazonaws.com"} for s in policy)
