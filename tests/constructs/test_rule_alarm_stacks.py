"""A RuleAlarm in another stack than its family's evaluator: it listens on the evaluator's verdict bus, or the synth
fails. Before, it listened on its own stack's verdict bus, where nobody publishes, and never heard a verdict."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from cdk_sagemaker_debugger import (
    ProfiledTrainingJob,
    ProfilerRuleSet,
    RuleAlarm,
    RuleEvaluator,
    TrainingJobs,
    rules,
)
from cdk_sagemaker_debugger.model.contract import EvaluatorEnvironment

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
ENV = cdk.Environment(region="us-east-1")


def _resource(template: dict[str, Any], resource_type: str, fragment: str) -> tuple[str, dict[str, Any]]:
    (found,) = [(k, r) for k, r in template["Resources"].items() if r["Type"] == resource_type and fragment in k]
    return found


def test_an_alarm_in_a_monitoring_stack_listens_on_the_bus_its_evaluator_publishes_on() -> None:
    app = cdk.App()
    training, monitoring = cdk.Stack(app, "Training", env=ENV), cdk.Stack(app, "Monitoring", env=ENV)
    rule_set = ProfilerRuleSet(training, "Rules", rules=[rules.ProfilerReport()])
    job = ProfiledTrainingJob(training, "Job", job_name_prefix="vision", training_image=IMAGE, rule_set=rule_set)
    alarm = RuleAlarm(monitoring, "Alarm", training_jobs=job.training_jobs)
    assembly = app.synth()
    trained = assembly.get_stack_by_name("Training").template
    monitored = assembly.get_stack_by_name("Monitoring").template
    # the evaluator publishes on the Training stack's verdict bus ...
    _, function = _resource(trained, "AWS::Lambda::Function", "EvaluatorFunction")
    published_on = function["Properties"]["Environment"]["Variables"][EvaluatorEnvironment.EVENT_BUS_NAME]
    bus_id, _ = _resource(trained, "AWS::Events::EventBus", "VerdictBus")
    assert published_on == {"Ref": bus_id}
    # ... and the alarm's verdict rule is on that very bus (imported from the Training stack), targeting the handler
    _, rule = _resource(monitored, "AWS::Events::Rule", "AlarmVerdicts")
    export = rule["Properties"]["EventBusName"]["Fn::ImportValue"]
    exported = {o["Export"]["Name"]: o["Value"] for o in trained["Outputs"].values() if "Export" in o}
    assert exported[export] == {"Ref": bus_id}
    assert alarm.verdict_bus is job.evaluator.event_bus
    assert Template.from_stack(monitoring).find_resources("AWS::Events::Rule")  # synthesizes without error


def _prefix_family(stack: cdk.Stack, bucket: s3.IBucket) -> TrainingJobs:
    return TrainingJobs.from_job_name_prefix("vision-", output_bucket=bucket)


@pytest.mark.parametrize("evaluator_prefix", ["vision-", "vision-a", "vis"])
def test_an_alarm_that_would_never_hear_its_familys_evaluator_fails_the_synth(evaluator_prefix: str) -> None:
    app = cdk.App()
    training, monitoring = cdk.Stack(app, "Training", env=ENV), cdk.Stack(app, "Monitoring", env=ENV)
    bucket = s3.Bucket(training, "Output")
    RuleEvaluator(training, "Evaluator", training_jobs=TrainingJobs.from_job_name_prefix(
        evaluator_prefix, output_bucket=bucket))
    RuleAlarm(monitoring, "Alarm", training_jobs=_prefix_family(monitoring, bucket))
    with pytest.raises(Exception, match=r"Monitoring/Alarm: training_jobs: the RuleEvaluator Training/Evaluator "
                                        r"evaluates jobs of this alarm's family .* verdict bus of stack Training, but "
                                        r"the alarm listens on the verdict bus of stack Monitoring"):
        app.synth()


def test_evaluators_of_other_families_elsewhere_and_the_same_stack_layout_synthesize() -> None:
    app = cdk.App()
    training, monitoring = cdk.Stack(app, "Training", env=ENV), cdk.Stack(app, "Monitoring", env=ENV)
    bucket = s3.Bucket(training, "Output")
    RuleEvaluator(training, "Other", training_jobs=TrainingJobs.from_job_name_prefix("audio-", output_bucket=bucket))
    RuleEvaluator(monitoring, "Evaluator", training_jobs=_prefix_family(monitoring, bucket))
    alarm = RuleAlarm(monitoring, "Alarm", training_jobs=_prefix_family(monitoring, bucket))
    app.synth()
    assert alarm.verdict_bus.node.path == "Monitoring/CdkSageMakerDebuggerVerdictBus/Bus"
