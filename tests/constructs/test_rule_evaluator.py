"""RuleEvaluator: the Lambda, its schedule and event rules, least-privilege IAM, cdk-nag, the asset, the snapshot."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template

from cdk_sagemaker_debugger import MetricsSource, ProfiledTrainingJob, RuleEvaluator, TrainingJobs, rules
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
    assert props["ReservedConcurrentExecutions"] == 5
    env = props["Environment"]["Variables"]
    role = {"Fn::GetAtt": [next(k for k in template.find_resources("AWS::IAM::Role") if k.startswith("JobExecutionRole")),
                           "Arn"]}
    assert env["JOB_FAMILY"] == {"Fn::Join": ["", ['{"execution_role_arns": ["', role,
                                                   '"], "job_name_prefix": "llm-finetune-"}']]}  # only the job's role
    assert env["SOURCE"] == "AUTO"
    assert env["EVENT_BUS_NAME"] == {"Ref": _bus_id(template)} and env["METRIC_NAMESPACE"] == "CdkSageMakerDebugger"
    assert json.loads(env["RULES"]) == [
        {"configuration_name": "ProfilerReport", "rule_to_invoke": "ProfilerReport",
         "parameters": {"LowGPUUtilization_threshold_p95": 60}},
        {"configuration_name": "LowGPU-strict", "rule_to_invoke": "LowGPUUtilization",
         "parameters": {"threshold_p95": 80, "threshold_p5": 10, "window": 300, "patience": 1000,
                        "scan_interval_us": 60000000}},
    ]


def _bus_id(template: Template) -> str:
    (bus_id,) = template.find_resources("AWS::Events::EventBus")
    return bus_id


def test_only_the_evaluator_may_publish_on_the_verdict_bus(template: Template):
    """An explicit Deny for every other principal: an identity policy allowing events:PutEvents on * cannot override
    it, so nobody else can forge a verdict or a continuation event."""
    bus_id = _bus_id(template)
    role_id = _function(template)["Role"]["Fn::GetAtt"][0]
    template.has_resource_properties("AWS::Events::EventBusPolicy", {
        "EventBusName": {"Ref": bus_id},
        "Statement": {
            "Effect": "Deny", "Principal": "*", "Action": "events:PutEvents",
            "Resource": {"Fn::GetAtt": [bus_id, "Arn"]},
            "Condition": {"ArnNotEquals": {"aws:PrincipalArn": [{"Fn::GetAtt": [role_id, "Arn"]}]}},
        },
    })
    # the continuation rule listens there, not on the default bus where anyone could ask for another 1,769 MB run
    template.has_resource_properties("AWS::Events::Rule", {"EventBusName": {"Ref": bus_id}, "EventPattern": {
        "source": ["cdk-sagemaker-debugger"], "detail-type": ["Profiler Rule Evaluation Continuation"],
        "detail": {"TrainingJobName": [{"prefix": "llm-finetune-"}]}}})
    statements = _statements(template)
    put = [s for s in statements if s["Action"] == "events:PutEvents"]
    assert [s["Resource"] for s in put] == [{"Fn::GetAtt": [bus_id, "Arn"]}]


def test_every_evaluator_of_a_stack_joins_the_one_bus_even_after_the_alarm_created_it():
    from cdk_sagemaker_debugger import RuleAlarm
    from cdk_sagemaker_debugger.constructs.event_bus import VerdictBus, verdict_bus

    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    job = _job(stack)
    alarm = RuleAlarm(stack, "Alarm", training_jobs=job.training_jobs)  # creates the bus; nobody may publish yet
    first = RuleEvaluator(stack, "A", training_jobs=job.training_jobs)
    second = RuleEvaluator(stack, "B", training_jobs=TrainingJobs.from_job_name_prefix("team-b-", output_bucket=s3.Bucket(stack, "Out")))
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::Events::EventBus", 1)
    bus = verdict_bus(stack)
    assert first.event_bus is bus and second.event_bus is bus and alarm.verdict_rule is not None
    (policy,) = template.find_resources("AWS::Events::EventBusPolicy").values()
    # the alarm's handler publishes its "Rule Alarm Transition" events there too
    roles = [stack.resolve(r.role_arn) for r in (alarm.role, first.role, second.role)]
    assert policy["Properties"]["Statement"]["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": roles}}
    assert isinstance(stack.node.find_child("CdkSageMakerDebuggerVerdictBus"), VerdictBus)


def test_a_bus_without_evaluators_denies_everyone():
    from cdk_sagemaker_debugger.constructs.event_bus import verdict_bus

    stack = cdk.Stack(cdk.App(), "S")
    verdict_bus(stack)
    (policy,) = Template.from_stack(stack).find_resources("AWS::Events::EventBusPolicy").values()
    assert "Condition" not in policy["Properties"]["Statement"]
    assert policy["Properties"]["Statement"]["Effect"] == "Deny"


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
    # only the evaluator's own objects: its state and its report folders, not SageMaker's rule output beside them
    written = json.dumps(put[0]["Resource"])
    assert len(put) == 1 and len(put[0]["Resource"]) == 2
    assert "/training/llm-finetune-*/rule-output/evaluator-state/*" in written  # each evaluator's state and lease
    [tagging] = by_action["s3:PutObjectTagging"]  # the tag the state lifecycle rule filters on, on those keys only
    assert json.dumps(tagging["Resource"]).endswith('/training/llm-finetune-*/rule-output/evaluator-state/*"]]}')
    assert "/training/llm-finetune-*/rule-output/*/evaluator-output/*" in written
    reads = json.dumps(by_action["s3:GetObject"])
    assert "/training/llm-finetune-*/profiler-output/*" in reads
    assert by_action["s3:ListBucket"][0]["Condition"] == {"StringLike": {"s3:prefix": [
        "training/llm-finetune-*/profiler-output/*", "training/llm-finetune-*/rule-output/*"]}}
    assert "events:PutEvents" in by_action
    template.resource_properties_count_is("AWS::IAM::Role", {"ManagedPolicyArns": Match.any_value()}, 0)


def test_each_job_is_a_message_of_its_own_on_a_fifo_queue(template: Template):
    """The schedule, job-end and continuation invocations queue one message per job; the queue's event source hands
    the function one message per invocation and takes back only the messages that failed."""
    queues = template.find_resources("AWS::SQS::Queue", {"Properties": {"FifoQueue": True}})
    [(queue_id, queue)] = [(k, v) for k, v in queues.items() if "RedrivePolicy" in v["Properties"]]
    props = queue["Properties"]
    assert props["VisibilityTimeout"] == 6 * 300 and props["SqsManagedSseEnabled"] is True
    assert props["RedrivePolicy"]["maxReceiveCount"] == 3
    dlq_id = props["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
    assert queues[dlq_id]["Properties"]["FifoQueue"] is True  # a FIFO queue's dead-letter queue is FIFO too
    template.has_resource_properties("AWS::Lambda::EventSourceMapping", {
        "BatchSize": 1, "FunctionResponseTypes": ["ReportBatchItemFailures"],
        "EventSourceArn": {"Fn::GetAtt": [queue_id, "Arn"]}, "ScalingConfig": {"MaximumConcurrency": 4}})
    assert _function(template)["Environment"]["Variables"]["JOB_QUEUE_URL"] == {"Ref": queue_id}


def test_node_fan_out_uses_the_job_queue_and_the_state_folder_and_nothing_more(template: Template):
    """A large job's run sends its shard messages to the job queue (a group per shard) and keeps the plan, claims and
    digests beside its state (``<state key>.shards/``): the grants it already has cover them, and no other."""
    from cdk_sagemaker_debugger.runtime.evaluator.fanout import SHARDS_SUFFIX
    from cdk_sagemaker_debugger.runtime.evaluator.state import STATE_FOLDER

    queues = template.find_resources("AWS::SQS::Queue", {"Properties": {"FifoQueue": True,
                                                                         "RedrivePolicy": Match.any_value()}})
    [queue_id] = queues
    sent_to = {s["Resource"]["Fn::GetAtt"][0] for s in _statements(template) if "sqs:SendMessage" in s["Action"]}
    dead_letters = {k for k, v in template.find_resources("AWS::SQS::Queue").items()
                    if "RedrivePolicy" not in v["Properties"] and "FifoQueue" not in v["Properties"]}
    assert queue_id in sent_to and sent_to - {queue_id} <= dead_letters  # the job queue (and the function's DLQ)
    shard_key = f"training/llm-finetune-x/rule-output/{STATE_FOLDER}/0123abcd.json.gz{SHARDS_SUFFIX}/3.claim"
    for action in ("s3:GetObject", "s3:PutObject", "s3:PutObjectTagging"):
        patterns = [part for s in _statements(template) if action in s["Action"]
                    for part in re.findall(r'/(training/[^"]*)"', json.dumps(s["Resource"]))]
        # IAM's "*" matches any characters, "/" included, as fnmatch's does
        assert any(fnmatch.fnmatchcase(shard_key, p) for p in patterns), (action, patterns)


def test_superseded_state_versions_expire_after_a_day_in_the_output_bucket(template: Template):
    """State and lease objects are rewritten several times a minute in a versioned bucket: their old versions go,
    nothing else does (profiler data and reports keep the bucket's own retention)."""
    [bucket] = template.find_resources("AWS::S3::Bucket", {"Properties": {"VersioningConfiguration": {
        "Status": "Enabled"}}}).values()
    assert bucket["Properties"]["LifecycleConfiguration"] == {"Rules": [{
        "Id": "CdkSageMakerDebuggerEvaluatorState", "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
        "Status": "Enabled", "TagFilters": [{"Key": "cdk-sagemaker-debugger", "Value": "evaluator-state"}]}]}


def test_an_imported_output_bucket_gets_no_lifecycle_rule_but_the_rule_is_offered():
    app = cdk.App()
    stack = cdk.Stack(app, "S", env=cdk.Environment(region="eu-west-1"))
    bucket = s3.Bucket.from_bucket_name(stack, "Out", "team-training-output")
    evaluator = RuleEvaluator(stack, "Evaluator", training_jobs=TrainingJobs.from_job_name_prefix(
        "team-a-", output_bucket=bucket))
    assert evaluator.state_lifecycle is None
    rule = RuleEvaluator.state_lifecycle_rule()
    assert rule.tag_filters == {"cdk-sagemaker-debugger": "evaluator-state"}
    assert rule.noncurrent_version_expiration.to_days() == 1


def test_cdk_nag_is_clean_with_specific_reasons(synthesized: dict[str, Any]):
    (aws_solutions,) = [r for r in synthesized["report"]["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert aws_solutions["violations"] == []
    ours = [v for v in aws_solutions.get("suppressedViolations", []) if "Evaluator/Job/Evaluator/" in json.dumps(v)]
    assert {v["ruleName"].split("[")[0] for v in ours} == {"AwsSolutions-IAM5"}
    assert all(len(v["reason"]) > 60 for v in ours)
    # acknowledged on the function's own policy alone, not on the role: a statement added to the role is reported
    assert {v["acknowledgedAt"] for v in ours} == {"Evaluator/Job/Evaluator/Permissions/Resource"}


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


# -- props and errors ---------------------------------------------------------------------------------------------------
def _job(stack: cdk.Stack, **kwargs: Any) -> ProfiledTrainingJob:
    return ProfiledTrainingJob(stack, "Job", job_name_prefix="exp", training_image=IMAGE,
                               instance_type="ml.g5.2xlarge", **kwargs)


def test_prefix_and_bucket_without_a_job_and_cloudwatch_only():
    app = cdk.App()
    stack = cdk.Stack(app, "S", env=cdk.Environment(region="eu-west-1"))
    bucket = s3.Bucket.from_bucket_name(stack, "Out", "team-training-output")
    evaluator = RuleEvaluator(stack, "Evaluator", source=MetricsSource.CLOUDWATCH,
                              training_jobs=TrainingJobs.from_job_name_prefix("team-a-", output_bucket=bucket,
                                                                              output_prefix="jobs"))
    assert evaluator.rule_configurations == [
        {"configuration_name": "ProfilerReport", "rule_to_invoke": "ProfilerReport", "parameters": {}}]
    metric = evaluator.metric_rule_issues_found("LowGPUUtilization")
    assert metric.metric_name == "RuleIssuesFound" and metric.namespace == "CdkSageMakerDebugger"
    assert metric.dimensions == {"Rule": "LowGPUUtilization"}
    evaluator.on_status_change("Issues", statuses=["IssuesFound"])
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::Lambda::Function", {"Environment": {"Variables": Match.object_like(
        {"SOURCE": "CLOUDWATCH", "JOB_FAMILY": '{"job_name_prefix": "team-a-"}'})}})
    template.has_resource_properties("AWS::Events::Rule", {"EventPattern": {
        "source": ["cdk-sagemaker-debugger"], "detail-type": ["Profiler Rule Evaluation Status Change"],
        "detail": {"TrainingJobName": [{"prefix": "team-a-"}],
                   "ProfilerRuleEvaluationStatuses": {"RuleEvaluationStatus": ["IssuesFound"]}}}})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"memory_size": 64}, "between 128 and 10240 MB"),
        ({"memory_size": "2 GB"}, "expected a whole number of MB"),
        ({"source": "AUTO"}, "expected a MetricsSource"),
        ({"timeout": cdk.Duration.minutes(20)}, "timeout: must be between 60 and 900 seconds, got 20 minutes (1200 s)"),
        ({"timeout": cdk.Duration.millis(90_500)},
         "timeout: must be a whole number of seconds, got 90500 milliseconds. Use Duration.seconds(...)"),
        ({"reserved_concurrency": 0}, "reserved_concurrency: must be between 1 and 1000"),
        # objects of the wrong kind fail by name instead of deep inside CDK
        ({"training_jobs": "team-a-"}, "training_jobs: expected TrainingJobs, got str 'team-a-'. Pass job.training_jobs"),
        ({"event_bus": "default"},
         "event_bus: expected an events.IEventBus (or leave it unset for the stack's verdict bus), got str 'default'."),
        ({"log_retention": 90}, "log_retention: expected a RetentionDays such as logs.RetentionDays.THREE_MONTHS, got int 90."),
        ({"metric_namespace": "AWS/SageMaker"},
         "metric_namespace: must be a CloudWatch namespace of 1-255 characters, not starting with 'AWS/' or ':'"),
    ],
)
def test_bad_props_name_the_construct_and_the_fix(kwargs: dict[str, Any], message: str):
    app = cdk.App()
    stack = cdk.Stack(app, "S")
    kwargs.setdefault("training_jobs", TrainingJobs.from_job_name_prefix(
        "team-a-", output_bucket=s3.Bucket.from_bucket_name(stack, "B", "bucket-name")))
    with pytest.raises(ConfigurationError, match=re.escape(message)) as info:
        RuleEvaluator(stack, "Evaluator", **kwargs)
    assert str(info.value).startswith("S/Evaluator: ")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        # prefixes no training job name can have, or so short they match other teams' jobs
        ({"prefix": "exp_"}, "prefix: must be 1-63 letters, digits and hyphens"),
        ({"prefix": "exp-*"}, "got 'exp-*' with '*'"),
        ({"prefix": "-exp"}, "starting with a letter or digit"),
        ({"prefix": "ab"}, "'ab' is 2 characters, which matches every job"),
        ({"prefix": 7}, "prefix: expected a job-name prefix string such as 'resnet-exp-', got int 7."),
        ({"output_bucket": "team-a-output"},
         "output_bucket: expected an s3.IBucket such as s3.Bucket.from_bucket_name(stack, 'Out', 'my-bucket'), got str"),
        ({"output_bucket": None}, "output_bucket: needs output_bucket="),
        ({"output_prefix": 7}, "output_prefix: expected a key prefix string such as 'training', got int 7."),
        ({"execution_role": "arn:aws:iam::123456789012:role/x"},
         "execution_role: expected an iam.IRole such as iam.Role.from_role_arn("),
    ],
)
def test_bad_families_name_the_factory_the_field_and_the_fix(kwargs: dict[str, Any], message: str):
    stack = cdk.Stack(cdk.App(), "S")
    args = {"prefix": "team-a-", "output_bucket": s3.Bucket.from_bucket_name(stack, "B", "bucket-name"), **kwargs}
    with pytest.raises(ConfigurationError, match=re.escape(message)) as info:
        TrainingJobs.from_job_name_prefix(**args)
    assert str(info.value).startswith("TrainingJobs")


@pytest.mark.parametrize(
    ("factory", "args", "message"),
    [
        ("from_tag", ("", "vision"), "tag_key: must be 1-128 letters"),
        ("from_tag", ("aws:team", "vision"), "'aws:team' is reserved for AWS"),
        ("from_tag", ("team", "a" * 257), "tag_value: must be 0-256 letters"),
        ("from_pipeline", ("churn_pipeline",), "pipeline_name: must be 1-256 letters, digits and hyphens"),
    ],
)
def test_bad_tags_and_pipelines_are_refused(factory: str, args: tuple[str, ...], message: str):
    stack = cdk.Stack(cdk.App(), "S")
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        getattr(TrainingJobs, factory)(*args, output_bucket=s3.Bucket.from_bucket_name(stack, "B", "bucket-name"))


def test_key_prefixes_lose_their_slashes():
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    evaluator = RuleEvaluator(stack, "Evaluator", training_jobs=TrainingJobs.from_job_name_prefix(
        "team-a-", output_prefix="/jobs/", output_bucket=s3.Bucket.from_bucket_name(stack, "Out", "team-a-output")))
    written = json.dumps(stack.resolve(evaluator.policy.document.to_json()))
    assert "team-a-output/jobs/team-a-*/rule-output/evaluator-state/*" in written and "//" not in written.replace(
        "arn:", "").replace("s3:::", "")


def test_custom_rules_are_refused():
    app = cdk.App()
    stack = cdk.Stack(app, "S", env=cdk.Environment(region="eu-west-1"))
    custom = rules.ProfilerRule.custom(name="Mine", rule_to_invoke="MyRule", image_uri="123.dkr.ecr.eu-west-1.amazonaws.com/r:1",
                                       instance_type="ml.m5.xlarge", volume_size_in_gb=30)
    job = _job(stack)
    with pytest.raises(ConfigurationError, match="not a built-in profiler rule.*RuleEngine.DEBUGGER"):
        RuleEvaluator(stack, "Evaluator", training_jobs=job.training_jobs, rules=[custom])


def test_a_custom_event_bus_warns_that_rule_alarm_will_not_hear_it():
    from aws_cdk import aws_events as events
    from aws_cdk.assertions import Annotations, Match

    stack = cdk.Stack(cdk.App(), "Stack", env=cdk.Environment(region="us-east-1"))
    bus = events.EventBus(stack, "Bus")
    RuleEvaluator(stack, "Evaluator", event_bus=bus,
                  training_jobs=TrainingJobs.from_job_name_prefix("team-a-", output_bucket=s3.Bucket(stack, "Out")))
    warnings = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp(
        "RuleAlarm listens on the stack's verdict bus.*whoever that bus's policy lets publish can forge"))
    assert len(warnings) == 1
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::Events::EventBusPolicy", 0)  # the evaluator joined no verdict bus
    template.has_resource_properties("AWS::Events::Rule", {"EventBusName": {"Ref": stack.get_logical_id(
        bus.node.default_child)}, "EventPattern": Match.object_like({"detail-type": ["Profiler Rule Evaluation Continuation"]})})


def test_a_token_memory_size_and_no_reserved_concurrency_pass_through():
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    memory = cdk.CfnParameter(stack, "Memory", type="Number", default=2048).value_as_number
    RuleEvaluator(stack, "Evaluator", memory_size=memory, reserved_concurrency=None,
                  training_jobs=TrainingJobs.from_job_name_prefix("team-a-", output_bucket=s3.Bucket(stack, "Out")))
    props = _function(Template.from_stack(stack))
    assert props["MemorySize"] == {"Ref": "Memory"} and "ReservedConcurrentExecutions" not in props


def test_a_profiler_path_known_only_at_deploy_time_needs_its_bucket():
    """Reading the output bucket instead would be the wrong bucket: the evaluator must be told which one."""
    from cdk_sagemaker_debugger import ProfilerConfig, RuleEngine

    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    path = cdk.CfnParameter(stack, "ProfilerPath", default="s3://profiles/team-a").value_as_string
    job = _job(stack, profiler=ProfilerConfig(s3_output_path=path), rule_engine=RuleEngine.DEBUGGER)
    with pytest.raises(ConfigurationError) as caught:
        RuleEvaluator(stack, "Evaluator", training_jobs=job.training_jobs)
    assert str(caught.value).startswith("S/Job: profiler_s3_uri: the training job's profiler output path")
    assert "TrainingJobs.from_job_name_prefix(..., profiler_bucket=...)" in str(caught.value)
    profiles = s3.Bucket(stack, "Profiles")
    RuleEvaluator(stack, "Given", training_jobs=TrainingJobs.from_job_name_prefix(
        "exp-", output_bucket=job.output_bucket, profiler_bucket=profiles, profiler_prefix="team-a"))
    reads = json.dumps(Template.from_stack(stack).find_resources("AWS::IAM::Policy"))
    assert stack.get_logical_id(profiles.node.default_child) in reads


def test_a_profiler_bucket_token_in_the_path_is_the_bucket_read():
    from cdk_sagemaker_debugger import ProfilerConfig, RuleEngine

    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    profiles = s3.Bucket(stack, "Profiles")
    job = _job(stack, profiler=ProfilerConfig(s3_output_path=f"s3://{profiles.bucket_name}/team-a"),
               rule_engine=RuleEngine.DEBUGGER)
    evaluator = RuleEvaluator(stack, "Evaluator", training_jobs=job.training_jobs)
    assert stack.resolve(evaluator.profiler_bucket.bucket_name) == {"Ref": stack.get_logical_id(
        profiles.node.default_child)}
    statements = json.dumps(evaluator.policy.document.to_json())
    assert "/team-a/exp-*/profiler-output/*" in json.dumps(stack.resolve(evaluator.policy.document.to_json()))
    assert statements


def test_an_evaluator_in_another_region_than_its_job_fails():
    app = cdk.App()
    job = _job(cdk.Stack(app, "Jobs", env=cdk.Environment(region="us-east-1")))
    elsewhere = cdk.Stack(app, "Elsewhere", env=cdk.Environment(region="eu-west-1"))
    with pytest.raises(ConfigurationError, match=r"^Elsewhere/Evaluator: training_jobs: The RuleEvaluator is in "
                                                 r"eu-west-1, but the training job Jobs/Job runs in us-east-1"):
        RuleEvaluator(elsewhere, "Evaluator", training_jobs=job.training_jobs)
