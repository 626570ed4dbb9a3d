"""The health rules in the constructs: catalog classes, RuleEngine.EVALUATOR only, Sampler(on_hang=...), and one
dashboard widget per rule with its thresholds."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from test_dashboard import dashboard_body, horizontal, widget

from cdk_sagemaker_debugger import (
    HangAction,
    ProfiledTrainingJob,
    ProfilerRuleSet,
    RuleEngine,
    Sampler,
    TrainingDashboard,
    rules,
)
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError
from cdk_sagemaker_debugger.model.health_rules import HEALTH_RULE_SPECS
from cdk_sagemaker_debugger.runtime.evaluator.rules import RULE_CLASSES

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"


def test_the_catalog_and_the_evaluator_agree_on_names_and_defaults():
    for name, spec in HEALTH_RULE_SPECS.items():
        runtime = dict(RULE_CLASSES[name].PARAMETERS)
        assert {p.name: p.default for p in spec.parameters if p.name != "scan_interval_us"} == runtime, name


def job(stack: cdk.Stack, **options) -> ProfiledTrainingJob:
    rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.TrainingHang(minutes=15), rules.DataWait(threshold=30),
                                                      rules.Straggler(), rules.GPUHealth()])
    return ProfiledTrainingJob(stack, "Job", job_name_prefix="llm", training_image=IMAGE, instance_type="ml.p5.48xlarge",
                               rule_set=rule_set, **options)


def test_debugger_cannot_run_them():
    with pytest.raises(ConfigurationError, match="TrainingHang reads the per-rank phases"):
        job(cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1")), rule_engine=RuleEngine.DEBUGGER)


def request_environment(stack: cdk.Stack) -> dict:
    template = Template.from_stack(stack).to_json()
    [machine] = [r for r in template["Resources"].values() if r["Type"] == "AWS::StepFunctions::StateMachine"]
    return json.loads(json.dumps(machine["Properties"]["DefinitionString"]))


def test_fail_fast_goes_into_the_job_environment_only_when_asked():
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    job(stack, sampler=Sampler(on_hang=HangAction.EXIT, hang_minutes=20))
    text = json.dumps(request_environment(stack))
    assert '\\"CDK_SAGEMAKER_SAMPLER_ON_HANG\\":\\"exit\\"' in text and '\\"CDK_SAGEMAKER_SAMPLER_HANG_MINUTES\\":\\"20.0\\"' in text
    plain = cdk.Stack(cdk.App(), "P", env=cdk.Environment(region="us-east-1"))
    job(plain, sampler=Sampler())
    assert "CDK_SAGEMAKER_SAMPLER_ON_HANG" not in json.dumps(request_environment(plain))


@pytest.mark.parametrize(("options", "error", "message"), [
    ({"on_hang": "exit"}, ConfigurationTypeError, "expected HangAction.LOG or HangAction.EXIT"),
    ({"hang_minutes": 0}, ConfigurationError, "minutes above 0"),
    ({"hang_minutes": float("nan")}, ConfigurationError, "minutes above 0"),
])
def test_bad_sampler_hang_settings_are_refused(options, error, message):
    with pytest.raises(error, match=message):
        Sampler(**options)


def test_one_dashboard_widget_per_health_rule_with_its_threshold():
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    training = job(stack)
    TrainingDashboard(stack, "Dashboard", training_jobs=training.training_jobs)
    body = dashboard_body(Template.from_stack(stack))
    hang = widget(body, "TrainingHang: minutes since the most stalled rank progressed")
    assert horizontal(hang) == {"TrainingHang minutes (TrainingHang)": 15}
    assert "MetricName=\"RuleGauge\" Rule=\"TrainingHang\" TrainingJobName=llm" in \
        hang["properties"]["metrics"][0][0]["expression"]
    assert horizontal(widget(body, "DataWait: highest share of a rank's time waiting for data")) == {
        "DataWait threshold (DataWait)": 30}
    assert horizontal(widget(body, "GPUHealth: samples of the most throttled GPU")) == {
        "GPUHealth throttle_percent (GPUHealth)": 10}
    assert horizontal(widget(body, "Straggler: slowest rank's data wait + forward, times the fastest")) == {
        "Straggler threshold (Straggler)": 1.5}
