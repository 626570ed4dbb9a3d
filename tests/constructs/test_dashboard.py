"""TrainingDashboard: the dashboard body checked offline against CloudWatch's structure and documented metrics, the
low-GPU alarm and its watch, alarm actions on every alarm the library creates (cdk-nag's alarm-action rule), the
ops topic's policies, the variants and the errors."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Annotations, Match, Template
from dashboard_schema import problems
from helpers import make_stack

from cdk_sagemaker_debugger import (
    Email,
    ProfiledTrainingJob,
    ProfilerRuleSet,
    RuleAlarm,
    RuleEngine,
    TrainingDashboard,
    TrainingJobs,
    rules,
)
from cdk_sagemaker_debugger.constructs.dashboard import rule_thresholds
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError
from cdk_sagemaker_debugger.runtime.gpu_watch import watch
from stacks.dashboard_stack import DashboardStack

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
US_EAST_1 = cdk.Environment(region="us-east-1")
ACCOUNT = "123456789012"


# -- rendering the synthesized body with concrete values --------------------------------------------------------------
def concrete(value: Any, resources: dict[str, Any]) -> str:
    """A deployed stand-in for an intrinsic: ARNs where CloudWatch expects ARNs, names elsewhere."""
    if isinstance(value, str):
        return value
    ((function, argument),) = value.items()
    if function == "Fn::Join":
        separator, parts = argument
        return separator.join(concrete(part, resources) for part in parts)
    if function == "Ref":
        pseudo = {"AWS::Region": "us-east-1", "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws",
                  "AWS::URLSuffix": "amazonaws.com"}
        if argument in pseudo:
            return pseudo[argument]
        if resources[argument]["Type"] == "AWS::StepFunctions::StateMachine":
            return f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:{argument}"
        return f"{argument.lower()}-name"
    if function == "Fn::GetAtt":
        logical_id, attribute = argument
        if attribute == "Arn" and resources[logical_id]["Type"] == "AWS::CloudWatch::Alarm":
            return f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:{logical_id}"
        return f"{logical_id.lower()}-{attribute.lower()}"
    raise AssertionError(f"unexpected intrinsic {value!r} in the dashboard body")


def dashboard_body(template: Template) -> dict[str, Any]:
    resources = template.to_json()["Resources"]
    (dashboard,) = [r for r in resources.values() if r["Type"] == "AWS::CloudWatch::Dashboard"]
    return json.loads(concrete(dashboard["Properties"]["DashboardBody"], resources))


def widget(body: dict[str, Any], title: str) -> dict[str, Any]:
    (found,) = [w for w in body["widgets"] if w["properties"].get("title") == title]
    return found


def expressions(found: dict[str, Any]) -> list[str]:
    return [item[0]["expression"] for item in found["properties"]["metrics"] if isinstance(item[0], dict)]


def horizontal(found: dict[str, Any]) -> dict[str, float]:
    return {a["label"]: a["value"] for a in found["properties"].get("annotations", {}).get("horizontal", [])}


# -- the reference stack ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from cdk_nag import AwsSolutionsChecks

    out = tmp_path_factory.mktemp("dashboard-cdk-out")
    app = cdk.App(outdir=str(out))
    stack = DashboardStack(app, "Dashboard")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()  # raises on any unacknowledged AwsSolutions finding
    template = Template.from_stack(stack)
    return {"stack": stack, "template": template, "out": out, "body": dashboard_body(template),
            "report": json.loads((out / "validation-report.json").read_text())}


@pytest.fixture(scope="module")
def body(synthesized: dict[str, Any]) -> dict[str, Any]:
    return synthesized["body"]


def test_dashboard_body_is_valid_for_cloudwatch_and_names_only_documented_metrics(body: dict[str, Any]) -> None:
    assert problems(body) == []
    assert [w["type"] for w in body["widgets"]].count("metric") == 10


def test_the_offline_check_catches_what_cloudwatch_would_refuse(body: dict[str, Any]) -> None:
    broken = json.loads(json.dumps(body))
    gpu = widget(broken, "GPU utilisation per GPU")
    gpu["width"] = 20  # x=0 + 20 overlaps the GPU memory widget at x=12
    gpu["properties"]["metrics"][1][0]["expression"] = gpu["properties"]["metrics"][1][0]["expression"].replace(
        "GPUUtilization", "GpuUtilisation")
    gpu["properties"]["metrics"][0][0]["expression"] = "gpuutilization / 4 + missing"
    memory = widget(broken, "Host memory")
    memory["properties"]["region"] = None
    memory["properties"]["yAxis"]["left"]["min"] = 100
    executions = widget(broken, "Training runs (state machine executions)")
    executions["properties"]["metrics"][0][1] = "ExecutionsBegun"
    executions["properties"]["period"] = 90
    found = "\n".join(problems(broken))
    for expected in ("/aws/sagemaker/TrainingJobs has no documented metric 'GpuUtilisation'",
                     "uses 'missing', which no metric of the widget declares",
                     "widget 2 (GPU utilisation per GPU)", "overlap",
                     "region None is missing or invalid", "min 100 is not below max 100",
                     "AWS/States has no documented metric 'ExecutionsBegun'", "period 90 must be"):
        assert expected in found, expected


def test_gpu_and_cpu_lines_are_per_device_one_per_host_with_percent_axes(body: dict[str, Any]) -> None:
    gpu = widget(body, "GPU utilisation per GPU")
    assert expressions(gpu) == [
        "gpuutilization / 4",  # ml.g5.12xlarge: 4 GPUs, 48 vCPUs
        "SEARCH('{/aws/sagemaker/TrainingJobs,Host} MetricName=\"GPUUtilization\" Host=vision-train', 'Average', 60)"]
    raw = gpu["properties"]["metrics"][1][0]
    assert raw == {"expression": raw["expression"], "id": "gpuutilization", "visible": False, "period": 60,
                   "label": "${PROP('Dim.Host')}"}
    assert "label" not in gpu["properties"]["metrics"][0][0]  # each result keeps its host's label
    assert expressions(widget(body, "GPU memory per GPU"))[0] == "gpumemoryutilization / 4"
    assert expressions(widget(body, "CPU utilisation per vCPU"))[0] == "cpuutilization / 48"
    for title in ("GPU utilisation per GPU", "GPU memory per GPU", "CPU utilisation per vCPU", "Host memory",
                  "Disk (training volume)"):
        properties = widget(body, title)["properties"]
        assert properties["yAxis"]["left"] == {"min": 0, "max": 100, "label": "%", "showUnits": False}, title
        assert properties["period"] == 60 and properties["region"] == "us-east-1", title


def test_rule_thresholds_and_the_alarm_are_drawn_on_the_charts(body: dict[str, Any]) -> None:
    assert horizontal(widget(body, "GPU utilisation per GPU")) == {
        "LowGPUUtilization threshold_p95 (ProfilerReport)": 70,
        "LowGPUUtilization threshold_p95 (LowGPU-strict)": 80,
        "LowGPUUtilization threshold_p5 (ProfilerReport, LowGPU-strict)": 10,
        "low-GPU alarm: below 10 % for 30 min": 10,
    }
    assert horizontal(widget(body, "CPU utilisation per vCPU")) == {
        "CPUBottleneck cpu_threshold (ProfilerReport)": 90, "BatchSize cpu_threshold_p95 (ProfilerReport)": 70}
    gpu_lines = widget(body, "GPU utilisation per GPU")["properties"]["metrics"]
    assert gpu_lines[2] == ["CdkSageMakerDebugger", "LowestGPUUtilization", "JobNamePrefix", "vision-train-",
                            {"color": "#d62728", "label": "lowest, all training hosts (alarm input)", "period": 60,
                             "stat": "Minimum"}]


def test_verdicts_executions_and_pipeline_health(body: dict[str, Any]) -> None:
    assert expressions(widget(body, "Rule verdicts (1 = issues found)")) == [
        "SEARCH('{CdkSageMakerDebugger,Rule,TrainingJobName} MetricName=\"RuleIssuesFound\" "
        "TrainingJobName=vision-train', 'Maximum', 60)"]
    runs = widget(body, "Training runs (state machine executions)")["properties"]["metrics"]
    assert [(m[1], m[-1]["label"], m[-1]["stat"]) for m in runs] == [
        ("ExecutionsStarted", "started", "Sum"), ("ExecutionsSucceeded", "succeeded", "Sum"),
        ("ExecutionsFailed", "failed", "Sum"), ("ExecutionsTimedOut", "timed out", "Sum")]
    assert {m[3] for m in runs} == {f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:JobStateMachineE2E0FF72"}
    for title, timeout_ms in (("Rule evaluator", 300_000), ("RuleAlarm handler", 120_000), ("Low-GPU watch", 50_000)):
        health = widget(body, f"{title}: errors, throttles, dead letters, duration")["properties"]
        assert [m[1] for m in health["metrics"]] == ["Errors", "Throttles", "ApproximateNumberOfMessagesVisible",
                                                     "Duration"], title
        assert health["metrics"][3][-1]["yAxis"] == "right" and horizontal({"properties": health}) == {
            "timeout": timeout_ms}


def test_text_widgets_say_where_the_reports_are_and_how_to_read_them(body: dict[str, Any]) -> None:
    (header, report) = [w["properties"]["markdown"] for w in body["widgets"] if w["type"] == "text"]
    assert header.startswith("# Training jobs `vision-train-*`") and "(4 GPUs and 48 vCPUs per instance)" in header
    bucket = "joboutputbucket44705424-name"
    assert (f"`s3://{bucket}/training/<job>/rule-output/<Rule>/evaluator-output/profiler-report.html`" in report)
    assert "`ProfilerReport`, `LowGPU-strict`" in report
    assert f"https://console.aws.amazon.com/s3/buckets/{bucket}?prefix=training/&region=us-east-1" in report
    assert "How to read it:" in report
    (status,) = [w for w in body["widgets"] if w["type"] == "alarm"]
    assert len(status["properties"]["alarms"]) == 6 and status["y"] == 0


# -- alarms and their actions ----------------------------------------------------------------------------------------
def _ref(template: Template, resource_type: str, path_fragment: str) -> dict[str, str]:
    found = [k for k in template.find_resources(resource_type) if path_fragment in k]
    assert len(found) == 1, found
    return {"Ref": found[0]}


def test_low_gpu_alarm_watches_the_family_metric_for_consecutive_minutes(synthesized: dict[str, Any]) -> None:
    template = synthesized["template"]
    topic = _ref(template, "AWS::SNS::Topic", "OpsTopic")
    template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "Namespace": "CdkSageMakerDebugger", "MetricName": "LowestGPUUtilization",
        "Dimensions": [{"Name": "JobNamePrefix", "Value": "vision-train-"}], "Statistic": "Minimum", "Period": 60,
        "Threshold": 10, "ComparisonOperator": "LessThanThreshold", "EvaluationPeriods": 30, "DatapointsToAlarm": 30,
        "TreatMissingData": "notBreaching", "AlarmActions": [topic], "OKActions": [topic]})


def test_every_alarm_the_library_created_notifies_the_ops_topic(synthesized: dict[str, Any]) -> None:
    template, stack = synthesized["template"], synthesized["stack"]
    topic = _ref(template, "AWS::SNS::Topic", "OpsTopic")
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    assert len(alarms) == 6
    for logical_id, alarm in alarms.items():
        assert alarm["Properties"]["AlarmActions"] == [topic], logical_id
        assert alarm["Properties"]["OKActions"] == [topic], logical_id
    dash = stack.dashboard
    assert [a.node.id for a in dash.alarms] == ["LowGpuAlarm", "GpuWatchErrorsAlarm", "EvaluatorErrorsAlarm",
                                                "EvaluatorDeadLetterAlarm"]
    assert (dash.alarms[0], dash.alarms[2], dash.alarms[3]) == (
        dash.low_gpu_alarm, dash.evaluator_errors_alarm, dash.evaluator_dead_letter_alarm)


def test_cloudwatch_may_publish_to_the_encrypted_ops_topic(synthesized: dict[str, Any]) -> None:
    template = synthesized["template"]
    names = sorted(a["Properties"]["AlarmName"] for a in template.find_resources("AWS::CloudWatch::Alarm").values())
    conditions = {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                  "ArnEquals": {"aws:SourceArn": Match.any_value()}}
    template.has_resource_properties("AWS::SNS::TopicPolicy", {"PolicyDocument": {"Statement": Match.array_with([
        {"Sid": "CloudWatchAlarmsPublish", "Effect": "Allow", "Action": "sns:Publish",
         "Principal": {"Service": "cloudwatch.amazonaws.com"}, "Resource": _ref(template, "AWS::SNS::Topic", "OpsTopic"),
         "Condition": conditions}])}})
    template.has_resource_properties("AWS::KMS::Key", {"KeyPolicy": {"Statement": Match.array_with([
        {"Sid": "CloudWatchAlarmsUseKey", "Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
         "Principal": {"Service": "cloudwatch.amazonaws.com"}, "Resource": "*", "Condition": conditions}])}})
    admitted = [s["Condition"]["ArnEquals"]["aws:SourceArn"] for r in template.to_json()["Resources"].values()
                for s in (r["Properties"].get("PolicyDocument") or r["Properties"].get("KeyPolicy") or {}).get(
                    "Statement", []) if s.get("Sid") in ("CloudWatchAlarmsPublish", "CloudWatchAlarmsUseKey")]
    expected = [{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":cloudwatch:us-east-1:",
                                         {"Ref": "AWS::AccountId"}, f":alarm:{name}"]]} for name in names]
    assert len(admitted) == 2 and all(sorted(arns, key=str) == sorted(expected, key=str) for arns in admitted)
    policies = template.find_resources("AWS::SNS::TopicPolicy")
    statements = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]
                  if s.get("Sid") == "CloudWatchAlarmsPublish"]
    assert len(statements) == 1  # RuleAlarm and the dashboard share the topic: one statement


def test_cdk_nag_alarm_action_rule_passes_only_with_actions(tmp_path: Path) -> None:
    """AwsSolutions has no alarm-action rule; cdk-nag's CloudWatchAlarmAction is in the HIPAA and NIST packs."""
    def alarm_action_findings(with_topic: bool) -> list[str]:
        from cdk_nag import HIPAASecurityChecks

        out = tmp_path / str(with_topic)
        app = cdk.App(outdir=str(out))
        stack = cdk.Stack(app, "Nag", env=US_EAST_1)
        job = _job(stack)
        alarm = RuleAlarm(stack, "Alarm", training_jobs=job.training_jobs, actions=[Email("team@example.com")])
        TrainingDashboard(stack, "Dashboard", training_jobs=job.training_jobs, alarm=alarm,
                          ops_topic=sns.Topic(stack, "Ops") if with_topic else None)
        cdk.Validations.of(app).add_plugins(HIPAASecurityChecks(app))
        try:
            app.synth()
        except RuntimeError as error:
            assert "ValidationFailed" in str(error)
        report = json.loads((out / "validation-report.json").read_text())
        return sorted(c["constructPath"] for r in report["pluginReports"] for v in r["violations"]
                      if v["ruleName"].endswith("CloudWatchAlarmAction") for c in v["violatingConstructs"])

    assert alarm_action_findings(with_topic=True) == []
    # without ops_topic the dashboard's own four alarms have no action; the RuleAlarm's two notify its own ops topic
    assert alarm_action_findings(with_topic=False) == [
        f"Nag/Dashboard/{name}/Resource" for name in
        ("EvaluatorDeadLetterAlarm", "EvaluatorErrorsAlarm", "GpuWatchErrorsAlarm", "LowGpuAlarm")]


def test_cdk_nag_aws_solutions_is_clean_with_specific_reasons(synthesized: dict[str, Any]) -> None:
    (aws_solutions,) = [r for r in synthesized["report"]["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert aws_solutions["violations"] == []
    ours = [v for v in aws_solutions.get("suppressedViolations", []) if "Dashboard/Dashboard/" in json.dumps(v)]
    assert sorted(v["ruleName"] for v in ours) == [
        "AwsSolutions-IAM5[Resource::*]",
        "AwsSolutions-IAM5[Resource::arn:aws:sagemaker:us-east-1:<AWS::AccountId>:training-job/vision-train-*]",
    ]


# -- the watch function ----------------------------------------------------------------------------------------------
def _watch(template: Template) -> tuple[str, dict[str, Any]]:
    found = template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": "gpu_watch.handler.handler"}})
    ((logical_id, resource),) = found.items()
    return logical_id, resource["Properties"]


def test_watch_runs_every_minute_with_the_family_and_gpu_count(synthesized: dict[str, Any]) -> None:
    template = synthesized["template"]
    logical_id, function = _watch(template)
    environment = function["Environment"]["Variables"]
    role = {"Fn::GetAtt": [[k for k in template.find_resources("AWS::IAM::Role") if k.startswith("JobExecutionRole")][0],
                           "Arn"]}
    assert environment["EXECUTION_ROLE_ARNS"] == {"Fn::Join": ["", ['["', role, '"]']]}  # only the family's role counts
    deployed = {**environment, "EXECUTION_ROLE_ARNS": '["arn:aws:iam::1:role/vision"]'}
    assert watch.Settings.from_environment(deployed) == watch.Settings(
        "vision-train-", 4, "CdkSageMakerDebugger", ("arn:aws:iam::1:role/vision",))
    assert function["Architectures"] == ["arm64"] and function["Timeout"] == 50
    template.has_resource_properties("AWS::Events::Rule", {
        "ScheduleExpression": "rate(1 minute)", "Targets": [Match.object_like({
            "Arn": {"Fn::GetAtt": [logical_id, "Arn"]}, "RetryPolicy": {"MaximumRetryAttempts": 0}})]})


def test_watch_reads_only_what_it_needs(synthesized: dict[str, Any]) -> None:
    template = synthesized["template"]
    role = _watch(template)[1]["Role"]["Fn::GetAtt"][0]
    policies = template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role}]}}).values()
    assert len(policies) == 2  # the default policy, and the statements on "*" in a policy of their own
    by_action = {json.dumps(s["Action"]): s["Resource"] for policy in policies
                 for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    # the job's own ARN pattern (ARNs are lower case), as its state machine uses it
    assert by_action['"sagemaker:DescribeTrainingJob"'] == {"Fn::Join": ["", [
        "arn:aws:sagemaker:us-east-1:", {"Ref": "AWS::AccountId"}, ":training-job/vision-train-*"]]}
    assert by_action['["sagemaker:ListTrainingJobs", "cloudwatch:GetMetricData"]'] == "*"
    assert not any("PutMetricData" in key or "StopTrainingJob" in key for key in by_action)


def test_watch_asset_holds_only_its_package(synthesized: dict[str, Any]) -> None:
    code = _watch(synthesized["template"])[1]["Code"]
    asset = synthesized["out"] / f"asset.{code['S3Key'].split('.')[0]}"
    files = {p.relative_to(asset).as_posix() for p in asset.rglob("*") if p.is_file()}
    assert files == {"gpu_watch/__init__.py", "gpu_watch/contract_shared.py", "gpu_watch/handler.py", "gpu_watch/watch.py"}
    probe = ("import sys, gpu_watch.handler as h; assert callable(h.handler);"
             "assert not [m for m in sys.modules if m.startswith(('aws_cdk', 'jsii', 'cdk_sagemaker_debugger'))]")
    done = subprocess.run([sys.executable, "-S", "-c", probe], cwd=asset, capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ.get("PATH", ""),
                               "PYTHONPATH": os.pathsep.join([str(asset), *site.getsitepackages()])})
    assert done.returncode == 0, done.stderr


# -- variants ----------------------------------------------------------------------------------------------------------
def _job(stack: cdk.Stack, instance_type: str = "ml.g5.12xlarge", rule_set: bool = True) -> ProfiledTrainingJob:
    rules_ = ProfilerRuleSet(stack, "Rules", rules=[rules.ProfilerReport()]) if rule_set else None
    return ProfiledTrainingJob(stack, "Job", job_name_prefix="vision-train", training_image=IMAGE,
                               instance_type=instance_type, rule_set=rules_)


def test_the_rule_alarm_topic_as_ops_topic_admits_cloudwatch_in_its_own_key() -> None:
    stack = make_stack(name="Variant")
    job = _job(stack)
    alarm = RuleAlarm(stack, "Alarm", training_jobs=job.training_jobs, actions=[Email("team@example.com")])
    TrainingDashboard(stack, "Dashboard", training_jobs=job.training_jobs, alarm=alarm, ops_topic=alarm.topic)
    template = Template.from_stack(stack)
    key_id = [k for k in template.find_resources("AWS::KMS::Key") if k.startswith("AlarmTopicKey")][0]
    statements = template.to_json()["Resources"][key_id]["Properties"]["KeyPolicy"]["Statement"]
    (granted,) = [s for s in statements if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
    assert granted["Action"] == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert set(granted["Condition"]) == {"StringEquals", "ArnEquals"}
    topic = {"Ref": [k for k in template.find_resources("AWS::SNS::Topic") if k.startswith("AlarmTopic")][0]}
    own_ops = {"Ref": [k for k in template.find_resources("AWS::SNS::Topic") if k.startswith("AlarmOpsTopic")][0]}
    # the RuleAlarm was created without ops_topic: its two alarms notify its own ops topic, and the dashboard's too
    for logical_id, alarm_resource in template.find_resources("AWS::CloudWatch::Alarm").items():
        expected = [own_ops, topic] if logical_id.startswith("Alarm") else [topic]
        assert alarm_resource["Properties"]["AlarmActions"] == expected, logical_id


def test_rule_alarm_ops_topic_acts_on_its_two_alarms_and_its_own_topic_without_it() -> None:
    stack = make_stack(name="Variant")
    job = _job(stack)
    ops = sns.Topic(stack, "Ops")
    with_ops = RuleAlarm(stack, "WithOps", training_jobs=job.training_jobs, ops_topic=ops)
    without = RuleAlarm(stack, "Without", training_jobs=job.training_jobs)
    template = Template.from_stack(stack)
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    ops_ref = {"Ref": stack.get_logical_id(ops.node.default_child)}
    acting = {k for k, a in alarms.items() if a["Properties"].get("AlarmActions") == [ops_ref]}
    assert acting == {k for k in alarms if k.startswith("WithOps")} and len(acting) == 2
    own_ref = {"Ref": stack.get_logical_id(without.ops_topic.node.default_child)}
    assert {k for k, a in alarms.items() if a["Properties"].get("AlarmActions") == [own_ref]} == {
        k for k in alarms if k.startswith("Without")}
    assert with_ops.ops_topic is ops and not with_ops.ops_topic_created
    assert without.ops_topic_created and without.ops_topic.node.path == "Variant/Without/OpsTopic"
    template.has_resource_properties("AWS::SNS::TopicPolicy", {"PolicyDocument": {"Statement": [
        Match.object_like({"Sid": "CloudWatchAlarmsPublish", "Principal": {"Service": "cloudwatch.amazonaws.com"}})]}})


def test_more_actions_run_on_alarm_only() -> None:
    stack = make_stack(name="Variant")
    ops, pager = sns.Topic(stack, "Ops"), sns.Topic(stack, "Pager")
    dash = TrainingDashboard(stack, "Dashboard", training_jobs=_job(stack).training_jobs, ops_topic=ops,
                             alarm_actions=[cloudwatch_actions.SnsAction(pager)])
    resources = Template.from_stack(stack).to_json()["Resources"]
    ops_ref, pager_ref = ({"Ref": stack.get_logical_id(t.node.default_child)} for t in (ops, pager))
    assert len(dash.alarms) == 4
    for alarm in dash.alarms:
        properties = resources[stack.get_logical_id(alarm.node.default_child)]["Properties"]
        assert properties["AlarmActions"] == [ops_ref, pager_ref]
        assert properties["OKActions"] == [ops_ref]


def _legacy(stack: cdk.Stack, prefix: str = "legacy-") -> TrainingJobs:
    bucket = stack.node.try_find_child("LegacyOut") or s3.Bucket.from_bucket_name(stack, "LegacyOut", "legacy-output")
    return TrainingJobs.from_job_name_prefix(prefix, output_bucket=bucket)


def test_jobs_started_elsewhere_by_prefix_and_instance_type() -> None:
    stack = make_stack(name="Variant")
    dash = TrainingDashboard(stack, "Dashboard", training_jobs=_legacy(stack), instance_type="ml.p4d.24xlarge")
    body = dashboard_body(Template.from_stack(stack))
    assert problems(body) == []
    titles = [w["properties"].get("title") for w in body["widgets"]]
    assert "Training runs (state machine executions)" not in titles and "Rule verdicts (1 = issues found)" not in titles
    gpu = widget(body, "GPU utilisation per GPU")
    assert expressions(gpu) == ["gpuutilization / 8", "SEARCH('{/aws/sagemaker/TrainingJobs,Host} "
                                "MetricName=\"GPUUtilization\" Host=legacy', 'Average', 60)"]
    assert dash.alarms == [dash.low_gpu_alarm, dash.alarms[1]] and dash.evaluator is None
    assert "<OutputDataConfig.S3OutputPath>/<job>/rule-output" in body["widgets"][-1]["properties"]["markdown"]
    assert "Horizontal lines" not in body["widgets"][0]["properties"]["markdown"]  # no rule set, no threshold lines


def test_a_cpu_family_has_no_gpu_charts_no_watch_and_cpu_per_vcpu() -> None:
    stack = make_stack(name="Variant")
    dash = TrainingDashboard(stack, "Dashboard", training_jobs=_job(stack, "ml.m5.xlarge").training_jobs)
    body = dashboard_body(Template.from_stack(stack))
    assert problems(body) == []
    titles = [w["properties"].get("title") for w in body["widgets"]]
    assert not any(t and t.startswith("GPU") for t in titles)
    assert expressions(widget(body, "CPU utilisation per vCPU"))[0] == "cpuutilization / 4"
    assert dash.low_gpu_alarm is None and dash.watch_function is None
    assert [a.node.id for a in dash.alarms] == ["EvaluatorErrorsAlarm", "EvaluatorDeadLetterAlarm"]


def test_without_alarms_the_header_spans_the_row_and_nothing_is_created_but_the_dashboard() -> None:
    stack = make_stack(name="Variant")
    dash = TrainingDashboard(stack, "Dashboard", training_jobs=_job(stack, rule_set=False).training_jobs, low_gpu_minutes=None,
                             dashboard_name="vision")
    template = Template.from_stack(stack)
    body = dashboard_body(template)
    assert problems(body) == [] and dash.alarms == []
    assert body["widgets"][0]["width"] == 24 and "alarm" not in {w["type"] for w in body["widgets"]}
    template.resource_count_is("AWS::Lambda::Function", 0)
    template.has_resource_properties("AWS::CloudWatch::Dashboard", {"DashboardName": "vision"})


def test_gpus_per_host_for_an_instance_type_the_table_does_not_know() -> None:
    stack = make_stack(name="Variant")
    dash = TrainingDashboard(stack, "Dashboard", training_jobs=_legacy(stack, "big-"), instance_type="ml.p9-z900.metal",
                             gpus_per_host=8, low_gpu_threshold=25, low_gpu_minutes=15)
    assert dash.devices == (8, None)
    body = dashboard_body(Template.from_stack(stack))
    assert widget(body, "CPU utilisation (sum over the vCPUs)")["properties"]["yAxis"]["left"] == {
        "min": 0, "label": "%", "showUnits": False}
    Template.from_stack(stack).has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "LowestGPUUtilization", "Threshold": 25, "EvaluationPeriods": 15})


def test_rule_thresholds_read_standalone_rules_profiler_report_overrides_and_defaults() -> None:
    configurations = [
        {"configuration_name": "ProfilerReport", "rule_to_invoke": "ProfilerReport",
         "parameters": {"LowGPUUtilization_threshold_p95": "60"}},
        {"configuration_name": "strict", "rule_to_invoke": "LowGPUUtilization", "parameters": {"threshold_p95": 80}},
        {"configuration_name": "plain", "rule_to_invoke": "LowGPUUtilization", "parameters": {}},
        {"configuration_name": "mine", "rule_to_invoke": "MyRule", "parameters": {"threshold_p95": 1}},
        {"configuration_name": "deploy-time", "rule_to_invoke": "LowGPUUtilization",
         "parameters": {"threshold_p95": "${Token[TOKEN.12]}"}},
    ]
    assert rule_thresholds(configurations, "LowGPUUtilization", "threshold_p95") == {
        60.0: ["ProfilerReport"], 80.0: ["strict"], 70.0: ["plain"]}


BAD_PROPS = [
    ({"training_jobs": "vision-train"}, ConfigurationTypeError,
     "training_jobs: expected TrainingJobs, got str 'vision-train'. Pass job.training_jobs"),
    ({"tag": ("team", "vision")}, ConfigurationError,
     "training_jobs: cannot show the training jobs tagged team=vision: SageMaker's /aws/sagemaker/TrainingJobs "
     "metrics carry only the host name"),
    ({"job_name_prefix": "team-x-"}, ConfigurationError,
     "instance_type: the instance type None is not given, so GPU utilisation cannot be shown per GPU. Pass "
     "instance_type="),
    ({"job_name_prefix": "team-x-", "instance_type": "ml.p9-z900.metal"}, ConfigurationError,
     "gpus_per_host: the instance type 'ml.p9-z900.metal' is not known to the library's GPU table"),
    ({"job_name_prefix": "team-x-", "gpus_per_host": 2.5}, ConfigurationError,
     "gpus_per_host: must be a whole number of GPUs per instance from 0 to 64, got 2.5."),
    ({"job_name_prefix": "team-x-", "gpus_per_host": 1, "low_gpu_threshold": 0}, ConfigurationError,
     "low_gpu_threshold: must be a percentage per GPU above 0 and at most 100, got 0."),
    ({"job_name_prefix": "team-x-", "gpus_per_host": 1, "low_gpu_minutes": 2000}, ConfigurationError,
     "low_gpu_minutes: must be whole minutes from 1 to 1440"),
    ({"job_name_prefix": "team-x-", "gpus_per_host": 1, "dashboard_name": "my dashboard"}, ConfigurationError,
     "dashboard_name: dashboard names are 1-255 letters, digits, '-' and '_', got 'my dashboard'. Try 'my-dashboard'."),
    ({"job_name_prefix": "team-x-", "gpus_per_host": 1, "ops_topic": "arn:aws:sns:us-east-1:1:ops"}, ConfigurationTypeError,
     "ops_topic: expected an SNS topic (sns.ITopic"),
    ({"job_name_prefix": "team-x-", "gpus_per_host": 1, "alarm_actions": ["arn:aws:sns:us-east-1:1:ops"]},
     ConfigurationTypeError, "alarm_actions: item 0 is str; expected an alarm action such as"),
    ({"job_name_prefix": "team-x-", "gpus_per_host": 1, "evaluator": "evaluator"}, ConfigurationTypeError,
     "evaluator: expected a RuleEvaluator (for example job.evaluator), got str."),
    ({"job_name_prefix": "team-x-", "gpus_per_host": 1, "alarm": "alarm"}, ConfigurationTypeError,
     "alarm: expected a RuleAlarm, got str."),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD_PROPS)
def test_bad_props_name_the_construct_the_field_and_the_fix(kwargs: dict[str, Any], error: type, message: str) -> None:
    stack = cdk.Stack(cdk.App(), "Stack", env=US_EAST_1)
    bucket = s3.Bucket.from_bucket_name(stack, "Out", "team-x-output")
    if "tag" in kwargs:
        kwargs["training_jobs"] = TrainingJobs.from_tag(*kwargs.pop("tag"), output_bucket=bucket, execution_role=(
            iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::123456789012:role/team-x")))
    if "job_name_prefix" in kwargs:
        kwargs["training_jobs"] = TrainingJobs.from_job_name_prefix(kwargs.pop("job_name_prefix"), output_bucket=bucket)
    with pytest.raises(error) as raised:
        TrainingDashboard(stack, "Dashboard", **kwargs)
    assert message in str(raised.value)
    assert str(raised.value).startswith("Stack/Dashboard: ")


def test_an_evaluator_of_another_family_is_refused() -> None:
    stack = make_stack(name="Variant")
    job = _job(stack)
    other = ProfiledTrainingJob(stack, "Other", job_name_prefix="other", training_image=IMAGE,
                                instance_type="ml.g5.xlarge", rule_set=ProfilerRuleSet(stack, "OtherRules"))
    with pytest.raises(ConfigurationError, match="cannot evaluate this job"):
        TrainingDashboard(stack, "Dashboard", training_jobs=job.training_jobs, evaluator=other.evaluator)


def test_rule_alarm_refuses_an_ops_topic_that_is_not_a_topic() -> None:
    stack = make_stack(name="Variant")
    with pytest.raises(ConfigurationTypeError, match=r"Variant/Alarm: ops_topic: expected an SNS topic"):
        RuleAlarm(stack, "Alarm", training_jobs=_legacy(stack), ops_topic="ops@example.com")


def test_debugger_jobs_point_at_debuggers_report_location() -> None:
    stack = make_stack(name="Variant")
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="vision-train", training_image=IMAGE,
                              instance_type="ml.g5.xlarge", rule_engine=RuleEngine.DEBUGGER,
                              rule_set=ProfilerRuleSet(stack, "Rules", rules=[rules.ProfilerReport()]))
    dash = TrainingDashboard(stack, "Dashboard", training_jobs=job.training_jobs)
    body = dashboard_body(Template.from_stack(stack))
    assert dash.evaluator is None and problems(body) == []
    report = body["widgets"][-1]["properties"]["markdown"]
    assert "/training/<job>/rule-output/<Rule>/profiler-output/profiler-report.html" in report
    assert "`ProfilerReport`" in report


def test_a_key_defined_elsewhere_gets_a_warning_naming_the_statement() -> None:
    stack = make_stack(name="Variant")
    key = kms.Key.from_key_arn(stack, "Key", f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab")
    alarm = RuleAlarm(stack, "Alarm", training_jobs=_legacy(stack), topic_key=key)
    TrainingDashboard(stack, "Dashboard", training_jobs=_legacy(stack), gpus_per_host=1, alarm=alarm,
                      ops_topic=alarm.topic)
    Annotations.from_stack(stack).has_warning(
        "/Variant/Dashboard", Match.string_like_regexp(r"kms:Decrypt and kms:GenerateDataKey\*"))
