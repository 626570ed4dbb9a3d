"""Debugger (tensor) rules on RuleEngine.EVALUATOR: the evaluator receives them, the job's environment configures the
tensor collector, the role may upload to tensor-output/, and rules the evaluator cannot run fail synth naming the
alternative. Debugger's engine is unchanged."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from helpers import task_parameters

from cdk_sagemaker_debugger import ProfiledTrainingJob, ProfilerRuleSet, RuleEngine, debugger_rules, rules
from cdk_sagemaker_debugger.model import evaluator_tensor_rules
from cdk_sagemaker_debugger.model.debugger_rules import DEBUGGER_RULE_SPECS
from cdk_sagemaker_debugger.model.errors import ConfigurationError
from cdk_sagemaker_debugger.runtime.evaluator.tensor_evaluation import TENSOR_RULES
from cdk_sagemaker_debugger.runtime.tensors import contract

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"


def make_stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "Training", env=cdk.Environment(region="us-east-1"))


def job(stack: cdk.Stack, **kwargs: Any) -> ProfiledTrainingJob:
    props: dict[str, Any] = {"job_name_prefix": "resnet", "training_image": IMAGE, "instance_type": "ml.g5.2xlarge"}
    props.update(kwargs)
    return ProfiledTrainingJob(stack, "Job", **props)


def evaluator_rules(template: Template) -> list[dict[str, Any]]:
    [function] = template.find_resources("AWS::Lambda::Function", {
        "Properties": {"Handler": "evaluator.lambda_handler.handler"}}).values()
    return json.loads(function["Properties"]["Environment"]["Variables"]["RULES"])


def test_debugger_rules_run_in_the_evaluator_with_the_collector_configured():
    stack = make_stack()
    training = job(stack, debugger_rules=[debugger_rules.VanishingGradient(threshold=1e-6),
                                          debugger_rules.UnchangedTensor(rtol=1e-4), debugger_rules.DeadRelu()])
    training.add_debugger_rule(debugger_rules.ClassImbalance(samples=200))
    template = Template.from_stack(stack)
    assert training.evaluator is not None and training.rule_set is not None
    assert [r["rule_to_invoke"] for r in evaluator_rules(template)] == [
        "VanishingGradient", "UnchangedTensor", "DeadRelu", "ClassImbalance"]
    assert evaluator_rules(template)[0]["parameters"] == {"threshold": 1e-6}
    parameters = task_parameters(stack)
    config = contract.parse(parameters["Environment"][contract.CONFIG])
    assert config == {"version": 1, "save_interval": 500, "gradients": {}, "weights": {}, "unchanged": {"rtol": 1e-4},
                      "relu_output": {}, "labels": {"samples": 200}}
    assert "DebugHookConfig" not in parameters and "DebugRuleConfigurations" not in parameters
    policy = json.dumps(template.find_resources("AWS::IAM::Role"))
    assert "resnet-*/tensor-output/*" in policy


def test_a_rule_the_evaluator_cannot_run_names_the_alternative():
    with pytest.raises(ConfigurationError, match=r"SimilarAcrossRuns is not evaluated by RuleEngine.EVALUATOR.*"
                                                 r"RuleEngine.DEBUGGER"):
        job(make_stack(), debugger_rules=[debugger_rules.SimilarAcrossRuns(other_trials=["s3://b/o/j/debug-output"])])
    with pytest.raises(ConfigurationError, match=r"use rules.Overtraining\(train_metric"):
        job(make_stack(), debugger_rules=[debugger_rules.Overtraining()])
    with pytest.raises(ConfigurationError, match="XGBoost"):
        job(make_stack(), debugger_rules=[debugger_rules.TreeDepth()])
    with pytest.raises(ConfigurationError, match="sampler bundle"):
        job(make_stack(), sampler=None, debugger_rules=[debugger_rules.VanishingGradient()])


def test_the_debugger_engine_is_unchanged():
    stack = make_stack()
    job(stack, rule_engine=RuleEngine.DEBUGGER, debugger_rules=[debugger_rules.VanishingGradient()])
    parameters = task_parameters(stack)
    assert parameters["DebugRuleConfigurations"][0]["RuleParameters"] == {"rule_to_invoke": "VanishingGradient"}
    assert contract.CONFIG not in (parameters.get("Environment") or {})


def test_every_debugger_rule_has_an_engine_answer_and_the_runtime_runs_the_table():
    assert set(evaluator_tensor_rules.EVALUATOR_TENSOR_RULES) | set(evaluator_tensor_rules.NOT_ON_EVALUATOR) == set(
        DEBUGGER_RULE_SPECS)
    assert set(evaluator_tensor_rules.EVALUATOR_TENSOR_RULES) == set(TENSOR_RULES)
    assert evaluator_tensor_rules.TENSORS_ENV == contract.CONFIG
    for name, spec in DEBUGGER_RULE_SPECS.items():  # the evaluator takes Debugger's parameter names and defaults
        if name in TENSOR_RULES:
            ours = TENSOR_RULES[name].defaults
            assert {p.name: p.default for p in spec.parameters} == ours, name


def test_metric_rules_and_tensor_rules_share_the_job_rule_set():
    stack = make_stack()
    rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.Overtraining(train_metric="train:loss",
                                                                         validation_metric="val:loss")])
    job(stack, rule_set=rule_set, metric_definitions={"train:loss": "loss=(.*)", "val:loss": "val=(.*)"},
        debugger_rules=[debugger_rules.ExplodingTensor(only_nan=True)])
    assert [r["rule_to_invoke"] for r in evaluator_rules(Template.from_stack(stack))] == ["Overtraining",
                                                                                        "ExplodingTensor"]


def test_docs_engine_table_is_generated_from_the_model():
    import re

    from helpers import ROOT

    doc = (ROOT / "docs" / "debugger-rules.md").read_text()
    match = re.search(r"<!-- engine-table:start -->\n(.*?)\n<!-- engine-table:end -->", doc, re.DOTALL)
    assert match is not None and match.group(1) == evaluator_tensor_rules.rule_table_markdown()
