"""Metric rules (issue 13.3) on ProfiledTrainingJob: the contract synthesizes, the evaluator receives the rules, and a
rule naming a metric no MetricDefinition produces, or a metric rule on Debugger, fails synth."""

from __future__ import annotations

import json
import re
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from helpers import ROOT, make_stack, task_parameters

from cdk_sagemaker_debugger import ProfiledTrainingJob, ProfilerRuleSet, RuleEngine, RuleEvaluator, TrainingJobs, rules
from cdk_sagemaker_debugger.model.errors import ConfigurationError
from cdk_sagemaker_debugger.model.metric_rules import comparison_markdown

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
METRICS = {"train:loss": r"loss=([0-9.]+)", "val:loss": r"val_loss=([0-9.]+)"}


def contract_rules(stack: cdk.Stack) -> ProfilerRuleSet:
    return ProfilerRuleSet(stack, "Rules", rules=[
        rules.LossNotDecreasing(metric="train:loss", num_steps=10, diff_percent=0.1),
        rules.Overfit(train_metric="train:loss", validation_metric="val:loss", ratio_threshold=0.1),
        rules.StalledTraining(metric="train:loss", threshold_minutes=30),
    ])


def job(stack: cdk.Stack, rule_set: ProfilerRuleSet, **kwargs: Any) -> ProfiledTrainingJob:
    props: dict[str, Any] = {"job_name_prefix": "resnet", "training_image": IMAGE, "instance_type": "ml.g5.2xlarge",
                             "metric_definitions": METRICS}
    props.update(kwargs)
    return ProfiledTrainingJob(stack, "Job", rule_set=rule_set, **props)


def test_contract_synthesizes_and_the_evaluator_gets_the_metric_rules():
    stack = make_stack()
    training = job(stack, contract_rules(stack))
    template = Template.from_stack(stack)
    assert training.evaluator is not None
    [function] = template.find_resources("AWS::Lambda::Function", {
        "Properties": {"Handler": "evaluator.lambda_handler.handler"}}).values()
    configs = json.loads(function["Properties"]["Environment"]["Variables"]["RULES"])
    assert configs == [
        {"configuration_name": "LossNotDecreasing", "rule_to_invoke": "LossNotDecreasing",
         "parameters": {"metric": "train:loss", "num_steps": 10, "diff_percent": 0.1, "increase_threshold_percent": 5}},
        {"configuration_name": "Overfit", "rule_to_invoke": "Overfit",
         "parameters": {"train_metric": "train:loss", "validation_metric": "val:loss", "start_step": 0, "patience": 1,
                        "ratio_threshold": 0.1}},
        {"configuration_name": "StalledTraining", "rule_to_invoke": "StalledTraining",
         "parameters": {"metric": "train:loss", "threshold": 1800}},
    ]
    parameters = task_parameters(stack)
    assert parameters["AlgorithmSpecification"]["MetricDefinitions"] == [
        {"Name": "train:loss", "Regex": "loss=([0-9.]+)"}, {"Name": "val:loss", "Regex": "val_loss=([0-9.]+)"}]
    assert "ProfilerRuleConfigurations" not in parameters and "DebugRuleConfigurations" not in parameters


def test_a_metric_no_metric_definition_produces_fails_with_where_field_value_and_fix():
    stack = make_stack()
    rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.LossNotDecreasing(metric="train:los")])
    with pytest.raises(ConfigurationError) as caught:
        job(stack, rule_set)
    assert str(caught.value) == (
        "Training/Job: rule_set > LossNotDecreasing.metric: rule 'LossNotDecreasing' reads metric 'train:los', which "
        "no MetricDefinition of this job produces (defined: 'train:loss', 'val:loss'). Did you mean 'train:loss'? Add "
        "it to metric_definitions= (e.g. {'train:los': r'los=([0-9.eE+-]+)'}) or fix metric=.")
    assert caught.value.value == "train:los"


def test_a_rule_added_later_is_checked_when_it_is_added():
    stack = make_stack()
    rule_set = ProfilerRuleSet(stack, "Rules")
    job(stack, rule_set, metric_definitions={"train:loss": r"loss=([0-9.]+)"})
    rule_set.add_rule(rules.LossNotDecreasing(metric="train:loss"))
    with pytest.raises(ConfigurationError, match=r"validation_metric: rule 'Overfit' reads metric 'val:loss'.*"
                                                 r"\(defined: 'train:loss'\)"):
        rule_set.add_rule(rules.Overfit(train_metric="train:loss", validation_metric="val:loss"))


def test_without_metric_definitions_every_metric_rule_fails():
    stack = make_stack()
    with pytest.raises(ConfigurationError, match=r"reads metric 'train:loss', which no MetricDefinition of this job "
                                                 r"produces \(defined: none\)"):
        job(stack, ProfilerRuleSet(stack, "Rules", rules=[rules.StalledTraining(metric="train:loss")]),
            metric_definitions=None)


def test_metric_rules_on_debugger_point_to_debuggers_own_rules():
    stack = make_stack()
    rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.LossNotDecreasing(metric="train:loss")])
    with pytest.raises(ConfigurationError) as caught:
        job(stack, rule_set, rule_engine=RuleEngine.DEBUGGER, sampler=None)
    assert str(caught.value) == (
        "Training/Job: rules: LossNotDecreasing reads the job's algorithm metrics in the RuleEvaluator, which "
        "RuleEngine.DEBUGGER does not run. On Debugger use its tensor rule debugger_rules.LossNotDecreasing(...) in "
        "debugger_rules=[...], or use RuleEngine.EVALUATOR (the default) for this rule.")
    stalled = rules.StalledTraining(metric="train:loss")
    assert "debugger_rules.StalledTrainingRule(...)" in str(stalled.debugger_error())


def test_a_standalone_evaluator_accepts_metric_rules():
    stack = make_stack()
    jobs = TrainingJobs.from_job_name_prefix("resnet-", output_bucket=cdk.aws_s3.Bucket(stack, "Out"))
    evaluator = RuleEvaluator(stack, "Evaluator", training_jobs=jobs,
                              rules=[rules.StalledTraining(metric="train:loss", threshold=600)])
    assert evaluator.rule_configurations == [{"configuration_name": "StalledTraining",
                                              "rule_to_invoke": "StalledTraining",
                                              "parameters": {"metric": "train:loss", "threshold": 600}}]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"metric": "train:loss", "threshold": 60, "threshold_minutes": 1},
     "rule 'StalledTraining': threshold_minutes: give threshold= (seconds, Debugger's name) or threshold_minutes=, "
     "not both."),
    ({"metric": "train:loss", "threshold_minutes": 0.01},
     "rule 'StalledTraining': threshold_minutes: 0.01 minutes is not a whole number of seconds; pass threshold= in "
     "seconds instead."),
    ({"metric": ""}, "rule 'StalledTraining': metric: a metric name has 1 to 255 characters (MetricDefinition.Name), "
                     "got 0."),
    ({"metric": "train:loss", "stop_training_on_fire": True},
     "rule 'StalledTraining': stop_training_on_fire: unknown parameter 'stop_training_on_fire'. Accepted: threshold."),
])
def test_stalled_training_arguments(kwargs: dict[str, Any], message: str):
    with pytest.raises(ConfigurationError) as caught:
        rules.StalledTraining(**kwargs)
    assert str(caught.value) == message


def test_docs_comparison_table_is_generated_from_the_catalogs():
    doc = (ROOT / "docs" / "metric-rules.md").read_text()
    match = re.search(r"<!-- metric-rule-table:start -->\n(.*?)\n<!-- metric-rule-table:end -->", doc, re.DOTALL)
    assert match is not None and match.group(1) == comparison_markdown()
