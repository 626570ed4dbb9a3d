""""Rule Alarm Transition" events travel on the stack's verdict bus, where only the library's functions may publish:
the training code (or anyone with events:PutEvents on *) can no longer send look-alikes to on_transition targets.
The bus policy is decided offline by a small local evaluator (tests/policy_decisions.py)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template
from policy_decisions import decide, resolve

from cdk_sagemaker_debugger import ProfiledTrainingJob, ProfilerRuleSet, RuleAlarm, rules
from cdk_sagemaker_debugger.model.contract import AlarmEnvironment

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"


def _synth() -> tuple[dict[str, Any], RuleAlarm, ProfiledTrainingJob]:
    stack = cdk.Stack(cdk.App(), "Vision", env=cdk.Environment(region="us-east-1"))
    rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.ProfilerReport()])
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="vision", training_image=IMAGE, rule_set=rule_set)
    alarm = RuleAlarm(stack, "Alarm", training_jobs=job.training_jobs)
    alarm.on_transition("Chat")
    return Template.from_stack(stack).to_json(), alarm, job


def _logical_id(template: dict[str, Any], resource_type: str, fragment: str) -> str:
    (found,) = [k for k, r in template["Resources"].items() if r["Type"] == resource_type and fragment in k]
    return found


def test_transitions_are_published_and_routed_on_the_verdict_bus() -> None:
    template, _alarm, _job = _synth()
    bus = {"Ref": _logical_id(template, "AWS::Events::EventBus", "VerdictBus")}
    handler = template["Resources"][_logical_id(template, "AWS::Lambda::Function", "AlarmHandler")]
    assert handler["Properties"]["Environment"]["Variables"][AlarmEnvironment.EVENT_BUS_NAME] == bus
    chat = template["Resources"][_logical_id(template, "AWS::Events::Rule", "AlarmChat")]
    assert chat["Properties"]["EventBusName"] == bus


def test_only_the_librarys_functions_may_put_transition_look_alikes_on_that_bus() -> None:
    template, _alarm, _job = _synth()
    (policy,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::Events::EventBusPolicy"]
    statement = resolve(policy["Properties"]["Statement"], template)
    bus_arn = statement["Resource"]

    def put_events(role_fragment: str) -> str:
        role = resolve({"Fn::GetAtt": [_logical_id(template, "AWS::IAM::Role", role_fragment), "Arn"]}, template)
        return decide([statement], principal={"AWS": role}, action="events:PutEvents", resource=bus_arn,
                      context={"aws:PrincipalArn": role})

    assert put_events("JobExecutionRole") == "Deny"  # the training code's role, even with events:PutEvents on *
    assert put_events("AlarmRole") != "Deny"       # the alarm's handler publishes its transitions
    assert put_events("JobEvaluatorRole") != "Deny"  # the evaluator publishes its verdicts
