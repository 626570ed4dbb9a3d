"""RuleEvaluator: the Lambda, its schedule and event rules, least-privilege IAM, cdk-nag, the asset, the snapshot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template
from helpers import scrub
from syrupy.extensions.json import JSONSnapshotExtension

from cdk_sagemaker_debugger import MetricsSource, ProfiledTrainingJob, RuleEvaluator, rules
from cdk_sagemaker_debugger.model.errors import ConfigurationError
from stacks.evaluator_stack import EvaluatorStack

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from cdk_nag import AwsSolutionsChecks

    out = tmp_path_factory.mktemp("evaluator-cdk-out")
    app = cdk.App(outdir=str(out))
    stack = EvaluatorStack(app, "Evaluator")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()  # raises on any unacknowledged AwsSolutions finding
    return {"stack": stack, "template": Template.from_stack(stack), "out": out,
            "report": json.loads((out / "validation-report.json").read_text())}


@pytest.fixture(scope="module")
def template(synthesized: dict[str, Any]) -> Template:
    return synthesized["template"]


def _function(template: Template) -> dict[str, Any]:
    functions = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": "evaluator.lambda_handler.handler"}})
    assert len(functions) == 1
    return next(iter(functions.values()))["Properties"]


def test_function_is_arm64_python_with_the_benchmarked_size(template: Template):
    props = _function(template)
    assert props["Runtime"] == "python3.14" and props["Architectures"] == ["arm64"]
    assert props["MemorySize"] == 1769 and props["Timeout"] == 300
    env = props["Environment"]["Variables"]
    assert env["JOB_NAME_PREFIX"] == "llm-finetune-" and env["SOURCE"] == "AUTO"
    assert env["EVENT_BUS_NAME"] == "default" and env["METRIC_NAMESPACE"] == "CdkSageMakerDebugger"
    assert json.loads(env["RULES"]) == [
        {"configuration_name": "ProfilerReport", "rule_to_invoke": "ProfilerReport",
         "parameters": {"LowGPUUtilization_threshold_p95": 60}},
        {"configuration_name": "LowGPU-strict", "rule_to_invoke": "LowGPUUtilization",
         "parameters": {"threshold_p95": 80, "threshold_p5": 10, "window": 300, "patience": 1000,
                        "scan_interval_us": 60000000}},
    ]


def test_failed_invocations_land_in_an_encrypted_dead_letter_queue(template: Template):
    props = _function(template)
    assert "DeadLetterConfig" in props
    template.has_resource_properties("AWS::SQS::Queue", {"SqsManagedSseEnabled": True,
                                                         "MessageRetentionPeriod": 14 * 24 * 3600})
    template.has_resource_properties("AWS::SQS::QueuePolicy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})])}})
    template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {"MaximumRetryAttempts": 2})


def test_runs_every_minute_when_jobs_end_and_when_a_run_asks_for_more(template: Template):
    template.has_resource_properties("AWS::Events::Rule", {"ScheduleExpression": "rate(1 minute)"})
    template.has_resource_properties("AWS::Events::Rule", {"EventPattern": {
        "source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"],
        "detail": {"TrainingJobStatus": ["Completed", "Failed", "Stopped"],
                   "TrainingJobName": [{"prefix": "llm-finetune-"}]}}})
    template.has_resource_properties("AWS::Events::Rule", {"EventPattern": {
        "source": ["cdk-sagemaker-debugger"], "detail-type": ["Profiler Rule Evaluation Continuation"],
        "detail": {"TrainingJobName": [{"prefix": "llm-finetune-"}]}}})
    rules_with_dlq = template.find_resources("AWS::Events::Rule", {"Properties": {"Targets": Match.array_with([
        Match.object_like({"DeadLetterConfig": Match.any_value(), "RetryPolicy": {"MaximumRetryAttempts": 2}})])}})
    assert len(rules_with_dlq) == 3


def _statements(template: Template) -> list[dict[str, Any]]:
    policies = template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": Match.string_like_regexp(
        "EvaluatorRole.*")}]}})
    return [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]


def test_permissions_are_scoped_to_the_job_prefix(template: Template):
    statements = _statements(template)
    by_action: dict[str, list[dict[str, Any]]] = {}
    for s in statements:
        for action in [s["Action"]] if isinstance(s["Action"], str) else s["Action"]:
            by_action.setdefault(action, []).append(s)
    describe = by_action["sagemaker:DescribeTrainingJob"][0]
    assert json.dumps(describe["Resource"]).endswith(':training-job/llm-finetune-*"]]}')
    assert by_action["sagemaker:ListTrainingJobs"][0]["Resource"] == "*"
    assert "sagemaker:StopTrainingJob" not in by_action and "iam:PassRole" not in by_action
    put = by_action["s3:PutObject"]
    assert len(put) == 1 and "/training/llm-finetune-*/rule-output/*" in json.dumps(put[0]["Resource"])
    reads = json.dumps(by_action["s3:GetObject"])
    assert "/training/llm-finetune-*/profiler-output/*" in reads
    assert by_action["s3:ListBucket"][0]["Condition"] == {"StringLike": {"s3:prefix": [
        "training/llm-finetune-*/profiler-output/*", "training/llm-finetune-*/rule-output/*"]}}
    assert "events:PutEvents" in by_action
    template.resource_properties_count_is("AWS::IAM::Role", {"ManagedPolicyArns": Match.any_value()}, 0)


def test_cdk_nag_is_clean_with_specific_reasons(synthesized: dict[str, Any]):
    (aws_solutions,) = [r for r in synthesized["report"]["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert aws_solutions["violations"] == []
    ours = [v for v in aws_solutions.get("suppressedViolations", []) if "Evaluator/Job/Evaluator/" in json.dumps(v)]
    assert {v["ruleName"].split("[")[0] for v in ours} == {"AwsSolutions-IAM5"}
    assert all(len(v["reason"]) > 60 for v in ours)


def test_asset_holds_only_the_evaluator_package(synthesized: dict[str, Any]):
    code = _function(synthesized["template"])["Code"]
    asset = synthesized["out"] / f"asset.{code['S3Key'].split('.')[0]}"
    files = {p.relative_to(asset).as_posix() for p in asset.rglob("*") if p.is_file()}
    assert "evaluator/lambda_handler.py" in files and "evaluator/rules.py" in files
    assert not any(f.startswith("rule_alarm") for f in files)
    assert "evaluator/synthetic.py" not in files and not any("__pycache__" in f for f in files)
    # Lambda imports the handler as a top-level package, without this library or aws_cdk installed (-S: no site)
    probe = ("import sys, evaluator.lambda_handler as h; assert callable(h.handler);"
             "assert not [m for m in sys.modules if m.startswith(('aws_cdk', 'jsii', 'cdk_sagemaker_debugger'))]")
    done = subprocess.run([sys.executable, "-S", "-c", probe], cwd=asset, capture_output=True, text=True,
                          env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(asset)}, timeout=60)
    assert done.returncode == 0, done.stderr


def test_snapshot(template: Template, snapshot):
    assert scrub(template.to_json()) == snapshot.use_extension(JSONSnapshotExtension)


# -- props and errors ---------------------------------------------------------------------------------------------------
def _job(stack: cdk.Stack, **kwargs: Any) -> ProfiledTrainingJob:
    return ProfiledTrainingJob(stack, "Job", job_name_prefix="exp", training_image=IMAGE,
                               instance_type="ml.g5.2xlarge", **kwargs)


def test_prefix_and_bucket_without_a_job_and_cloudwatch_only():
    app = cdk.App()
    stack = cdk.Stack(app, "S", env=cdk.Environment(region="eu-west-1"))
    bucket = s3.Bucket.from_bucket_name(stack, "Out", "team-training-output")
    evaluator = RuleEvaluator(stack, "Evaluator", job_name_prefix="team-a-", output_bucket=bucket,
                              output_prefix="jobs", source=MetricsSource.CLOUDWATCH)
    assert evaluator.rule_configurations == [
        {"configuration_name": "ProfilerReport", "rule_to_invoke": "ProfilerReport", "parameters": {}}]
    metric = evaluator.metric_rule_issues_found("LowGPUUtilization")
    assert metric.metric_name == "RuleIssuesFound" and metric.namespace == "CdkSageMakerDebugger"
    assert metric.dimensions == {"Rule": "LowGPUUtilization"}
    evaluator.on_status_change("Issues", statuses=["IssuesFound"])
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::Lambda::Function", {"Environment": {"Variables": Match.object_like(
        {"SOURCE": "CLOUDWATCH", "JOB_NAME_PREFIX": "team-a-"})}})
    template.has_resource_properties("AWS::Events::Rule", {"EventPattern": {
        "source": ["cdk-sagemaker-debugger"], "detail-type": ["Profiler Rule Evaluation Status Change"],
        "detail": {"TrainingJobName": [{"prefix": "team-a-"}],
                   "ProfilerRuleEvaluationStatuses": {"RuleEvaluationStatus": ["IssuesFound"]}}}})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give exactly one of training_job= or job_name_prefix="),
        ({"job_name_prefix": "x"}, "job_name_prefix= needs output_bucket="),
        ({"job_name_prefix": "x", "with_job": True}, "give exactly one of"),
        ({"job_name_prefix": "x", "with_bucket": True, "memory_size": 64}, "between 128 and 10240 MB"),
        ({"job_name_prefix": "x", "with_bucket": True, "source": "AUTO"}, "expected a MetricsSource"),
    ],
)
def test_bad_props_name_the_construct_and_the_fix(kwargs: dict[str, Any], message: str):
    app = cdk.App()
    stack = cdk.Stack(app, "S")
    if kwargs.pop("with_job", False):
        kwargs["training_job"] = _job(stack)
    if kwargs.pop("with_bucket", False):
        kwargs["output_bucket"] = s3.Bucket.from_bucket_name(stack, "B", "bucket-name")
    with pytest.raises(ConfigurationError, match=message) as info:
        RuleEvaluator(stack, "Evaluator", **kwargs)
    assert "S/Evaluator" in str(info.value)


def test_custom_rules_are_refused():
    app = cdk.App()
    stack = cdk.Stack(app, "S", env=cdk.Environment(region="eu-west-1"))
    custom = rules.ProfilerRule.custom(name="Mine", rule_to_invoke="MyRule", image_uri="123.dkr.ecr.eu-west-1.amazonaws.com/r:1",
                                       instance_type="ml.m5.xlarge", volume_size_in_gb=30)
    job = _job(stack)
    with pytest.raises(ConfigurationError, match="not a built-in profiler rule.*RuleEngine.DEBUGGER"):
        RuleEvaluator(stack, "Evaluator", training_job=job, rules=[custom])


def test_a_custom_event_bus_warns_that_rule_alarm_will_not_hear_it():
    from aws_cdk import aws_events as events
    from aws_cdk.assertions import Annotations, Match

    stack = cdk.Stack(cdk.App(), "Stack", env=cdk.Environment(region="us-east-1"))
    bus = events.EventBus(stack, "Bus")
    RuleEvaluator(stack, "Evaluator", job_name_prefix="team-a-", output_bucket=s3.Bucket(stack, "Out"), event_bus=bus)
    warnings = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("RuleAlarm listens on the default"))
    assert len(warnings) == 1
