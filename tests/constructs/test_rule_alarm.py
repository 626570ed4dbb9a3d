"""RuleAlarm construct: detection rule, encrypted topic with subscriptions, prefix-scoped handler, ledger, dead-letter
queue and alarms; cdk-nag, cfn-lint, the Lambda asset, the snapshot, and clear errors for bad props."""

from __future__ import annotations

import json
import os
import re
import site
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Match, Template

from cdk_sagemaker_debugger import (
    SMS,
    Email,
    ProfiledTrainingJob,
    ProfilerRuleSet,
    RuleAlarm,
    StopTraining,
    TrainingJobs,
    rules,
)
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError
from stacks.alarm_stack import AlarmStack

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
US_EAST_1 = cdk.Environment(region="us-east-1")


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from cdk_nag import AwsSolutionsChecks

    out = tmp_path_factory.mktemp("alarm-cdk-out")
    app = cdk.App(outdir=str(out))
    stack = AlarmStack(app, "Alarm")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()  # raises on any unacknowledged AwsSolutions finding
    return {
        "stack": stack,
        "template": Template.from_stack(stack),
        "out": out,
        "report": json.loads((out / "validation-report.json").read_text()),
    }


@pytest.fixture(scope="module")
def template(synthesized: dict[str, Any]) -> Template:
    return synthesized["template"]


def _only(template: Template, resource_type: str, props: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    found = template.find_resources(resource_type, {"Properties": props} if props else None)
    found = {k: v for k, v in found.items() if not k.startswith("JobEvaluator")  # not the job's own evaluator
             and not k.startswith("AlarmSubscriptionDeadLetterQueue")  # the subscriptions' queue has its own test
             and not k.startswith("AlarmOpsTopic")}  # the default ops topic: tests/constructs/test_rule_alarm_ops_topic.py
    assert len(found) == 1, f"expected one {resource_type}, found {sorted(found)}"
    ((logical_id, resource),) = found.items()
    return logical_id, resource["Properties"]


def _handler(template: Template) -> tuple[str, dict[str, Any]]:
    return _only(template, "AWS::Lambda::Function", {"Handler": "rule_alarm.handler.handler"})


def _handler_statements(template: Template) -> list[dict[str, Any]]:
    role_id = _handler(template)[1]["Role"]["Fn::GetAtt"][0]
    policies = template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role_id}]}})
    return [s for policy in policies.values() for s in policy["Properties"]["PolicyDocument"]["Statement"]]


def _by_action(statements: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_action: dict[str, list[dict[str, Any]]] = {}
    for statement in statements:
        actions = statement["Action"]
        for action in [actions] if isinstance(actions, str) else actions:
            by_action.setdefault(action, []).append(statement)
    return by_action


def _own_job_arn(suffix: str) -> dict[str, Any]:
    """A ProfiledTrainingJob's ARN pattern (built with the partition literal of the stack's region)."""
    return {"Fn::Join": ["", ["arn:aws:sagemaker:us-east-1:", {"Ref": "AWS::AccountId"}, f":training-job/{suffix}"]]}


def _job_arn(suffix: str) -> dict[str, Any]:
    return {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":sagemaker:us-east-1:", {"Ref": "AWS::AccountId"},
                              f":training-job/{suffix}"]]}


# -- the reference stack -------------------------------------------------------------------------------------------


def test_sagemaker_events_from_the_default_bus_and_verdicts_from_the_verdict_bus(template: Template) -> None:
    handler_id, _ = _handler(template)
    (bus_id,) = template.find_resources("AWS::Events::EventBus")
    _, rule = _only(template, "AWS::Events::Rule", {"EventPattern": Match.object_like({"source": ["aws.sagemaker"]})})
    assert "EventBusName" not in rule  # SageMaker's own events arrive on the default bus
    assert rule["EventPattern"] == {
        "source": ["aws.sagemaker"],
        "detail-type": ["SageMaker Training Job State Change"],
        "account": [{"Ref": "AWS::AccountId"}],
        "detail": {"TrainingJobName": [{"prefix": "resnet-exp-"}]},
    }
    _, verdicts = _only(template, "AWS::Events::Rule", {"EventBusName": {"Ref": bus_id}})
    assert verdicts["EventPattern"] == {
        "source": ["cdk-sagemaker-debugger"],
        "detail-type": ["Profiler Rule Evaluation Status Change"],
        "account": [{"Ref": "AWS::AccountId"}],
        "detail": {"TrainingJobName": [{"prefix": "resnet-exp-"}]},
    }
    for target in (*rule["Targets"], *verdicts["Targets"]):
        assert target["Arn"] == {"Fn::GetAtt": [handler_id, "Arn"]}
        assert "DeadLetterConfig" in target
    # the job's own evaluator is the only publisher the verdict bus admits
    (policy,) = template.find_resources("AWS::Events::EventBusPolicy").values()
    statement = policy["Properties"]["Statement"]
    evaluator_role = _only_evaluator_role(template)
    assert statement["Effect"] == "Deny" and statement["Principal"] == "*"
    assert json.dumps(statement["Condition"]).count(evaluator_role) == 1


def _only_evaluator_role(template: Template) -> str:
    roles = [k for k in template.find_resources("AWS::IAM::Role") if k.startswith("JobEvaluator")]
    assert len(roles) == 1, roles
    return roles[0]


def test_sweep_runs_every_minute_into_the_same_handler(template: Template) -> None:
    handler_id, _ = _handler(template)
    _, sweep = _only(template, "AWS::Events::Rule", {"ScheduleExpression": "rate(1 minute)"})
    (target,) = sweep["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [handler_id, "Arn"]} and "DeadLetterConfig" in target
    template.resource_properties_count_is(
        "AWS::Lambda::Permission", {"Principal": "events.amazonaws.com", "FunctionName": {"Fn::GetAtt": [handler_id, "Arn"]}}, 3
    )


def test_topic_uses_a_rotating_customer_managed_key_only_the_publisher_uses(template: Template) -> None:
    key_id, key = _only(template, "AWS::KMS::Key", {"Description": Match.string_like_regexp("rule alarm")})
    assert key["EnableKeyRotation"] is True
    principals = json.dumps([statement.get("Principal") for statement in key["KeyPolicy"]["Statement"]])
    assert "events.amazonaws.com" not in principals  # nothing but the handler publishes
    topic_id, _ = _only(template, "AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]}})
    template.has_resource_properties("AWS::SNS::TopicPolicy", {
        "Topics": [{"Ref": topic_id}],
        "PolicyDocument": {"Statement": Match.array_with([Match.object_like({
            "Effect": "Deny", "Action": "sns:Publish", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})])},
    })
    by_action = _by_action(_handler_statements(template))
    assert by_action["kms:GenerateDataKey*"][0]["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert by_action["sns:Publish"][0]["Resource"] == {"Ref": topic_id}


def test_email_and_sms_subscriptions(template: Template) -> None:
    topic_id, _ = _only(template, "AWS::SNS::Topic")
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ml-team@example.com", "TopicArn": {"Ref": topic_id}}
    )
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "sms", "Endpoint": "+15555550100", "TopicArn": {"Ref": topic_id}}
    )
    template.resource_count_is("AWS::SNS::Subscription", 2)


def test_handler_is_arm64_python_with_its_configuration(template: Template) -> None:
    _, props = _handler(template)
    assert props["Runtime"] == "python3.14" and props["Architectures"] == ["arm64"]
    assert props["Timeout"] == 120 and props["MemorySize"] == 256 and props["ReservedConcurrentExecutions"] == 5
    table_id, _ = _only(template, "AWS::DynamoDB::Table")
    topic_id, _ = _only(template, "AWS::SNS::Topic")
    role_id = _only(template, "AWS::IAM::Role", {"AssumeRolePolicyDocument": Match.object_like({"Statement": [
        Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})]})})[0]
    assert props["Environment"]["Variables"] == {
        "TABLE_NAME": {"Ref": table_id},
        "TOPIC_ARN": {"Ref": topic_id},
        "JOB_FAMILY": {"Fn::Join": ["", ['{"execution_role_arns": ["', {"Fn::GetAtt": [role_id, "Arn"]},
                                         '"], "job_name_prefix": "resnet-exp-"}']]},
        "ALARM_ID": "Alarm/Alarm",
        "STATUSES": '["IssuesFound", "Error"]',
        "EVENT_BUS_NAME": {"Ref": _only(template, "AWS::Events::EventBus")[0]},  # transitions on the verdict bus
        "TRANSITION_TTL_DAYS": "90",
        "ACCOUNT_ID": {"Ref": "AWS::AccountId"},
        "MAX_MESSAGES_PER_JOB": "25",
        "KNOWN_RULES": '["LowGPUUtilization", "ProfilerReport"]',
        "STOP": "true",
        "STOP_PREFIX": "resnet-exp-",
    }


def test_the_synthesized_environment_is_what_the_handler_reads(template: Template) -> None:
    """The construct writes the environment and the runtime reads it: the contract checked end to end."""
    from cdk_sagemaker_debugger.runtime.rule_alarm.settings import Settings

    variables = _handler(template)[1]["Environment"]["Variables"]
    def deploy(value: object) -> str:  # a role ARN's GetAtt inside a Join stands for a role ARN
        if isinstance(value, dict) and "Fn::Join" in value:
            return "".join(p if isinstance(p, str) else "arn:aws:iam::123456789012:role/r" for p in value["Fn::Join"][1])
        return value if isinstance(value, str) else f"<{json.dumps(value)}>"

    settings = Settings.from_environment({name: deploy(value) for name, value in variables.items()})
    assert settings.family.job_name_prefix == settings.stop_prefix == "resnet-exp-"
    assert settings.statuses == frozenset({"IssuesFound", "Error"}) and settings.rule_names is None
    assert settings.known_rules == frozenset({"LowGPUUtilization", "ProfilerReport"})
    assert settings.max_messages_per_job == 25 and settings.transition_ttl_days == 90
    assert settings.account_id is not None
    assert settings.family.execution_role_arns == ("arn:aws:iam::123456789012:role/r",)


def test_stop_is_scoped_to_the_prefix_without_pass_role_or_wildcards(template: Template) -> None:
    statements = _handler_statements(template)
    by_action = _by_action(statements)
    assert [s["Resource"] for s in by_action["sagemaker:StopTrainingJob"]] == [_own_job_arn("resnet-exp-*")]
    assert [s["Resource"] for s in by_action["sagemaker:DescribeTrainingJob"]] == [_own_job_arn("resnet-exp-*")]
    assert not any(action.startswith("iam:") for action in by_action)
    assert all(s["Resource"] != "*" for s in statements)
    assert not any("*" in action.split(":")[1] for action in by_action if not action.startswith("kms:"))
    assert sorted(a for a in by_action if a.startswith("dynamodb:")) == [
        "dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"]
    assert by_action["events:PutEvents"][0]["Resource"] == {
        "Fn::GetAtt": [_only(template, "AWS::Events::EventBus")[0], "Arn"]}  # the verdict bus, not the default bus
    role_id = _handler(template)[1]["Role"]["Fn::GetAtt"][0]
    assert "ManagedPolicyArns" not in template.to_json()["Resources"][role_id]["Properties"]


def test_ledger_is_on_demand_encrypted_recoverable_and_expires_items(template: Template) -> None:
    table_id, table = _only(template, "AWS::DynamoDB::Table")
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["SSESpecification"] == {"SSEEnabled": True}
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert table["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
    assert template.to_json()["Resources"][table_id]["DeletionPolicy"] == "Retain"


def test_dead_letter_queue_is_encrypted_ssl_only_and_catches_every_path(template: Template) -> None:
    queue_id, queue = _only(template, "AWS::SQS::Queue")
    assert queue["SqsManagedSseEnabled"] is True and queue["MessageRetentionPeriod"] == 14 * 24 * 3600
    template.has_resource_properties("AWS::SQS::QueuePolicy", {
        "Queues": [{"Ref": queue_id}],
        "PolicyDocument": {"Statement": Match.array_with([Match.object_like({
            "Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})])},
    })
    handler_id, props = _handler(template)
    assert props["DeadLetterConfig"] == {"TargetArn": {"Fn::GetAtt": [queue_id, "Arn"]}}
    template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {
        "FunctionName": {"Ref": handler_id}, "MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 6 * 3600})
    rules_with_dlq = template.find_resources("AWS::Events::Rule", {"Properties": {"Targets": [
        {"DeadLetterConfig": {"Arn": {"Fn::GetAtt": [queue_id, "Arn"]}}}]}})
    assert len(rules_with_dlq) == 3


def test_alarms_on_dead_letters_and_handler_errors(template: Template) -> None:
    queue_id, _ = _only(template, "AWS::SQS::Queue")
    handler_id, _ = _handler(template)
    template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "ApproximateNumberOfMessagesVisible", "Namespace": "AWS/SQS", "Statistic": "Maximum",
        "Dimensions": [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}],
        "Threshold": 1, "ComparisonOperator": "GreaterThanOrEqualToThreshold", "TreatMissingData": "notBreaching"})
    template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "Errors", "Namespace": "AWS/Lambda", "Statistic": "Sum", "Period": 300,
        "Dimensions": [{"Name": "FunctionName", "Value": {"Ref": handler_id}}],
        "Threshold": 1, "ComparisonOperator": "GreaterThanOrEqualToThreshold"})


def test_every_created_resource_is_a_public_attribute(synthesized: dict[str, Any]) -> None:
    alarm: RuleAlarm = synthesized["stack"].alarm
    for name in ("topic", "topic_key", "rule", "verdict_rule", "sweep_rule", "handler", "role", "table",
                 "dead_letter_queue", "log_group", "dead_letter_alarm", "errors_alarm", "execution_role",
                 "output_bucket"):
        assert getattr(alarm, name) is not None, name
    assert alarm.job_name_prefix == "resnet-exp-" and alarm.stop_prefix == "resnet-exp-"


def test_cdk_nag_is_clean_with_specific_reasons(synthesized: dict[str, Any]) -> None:
    (aws_solutions,) = [r for r in synthesized["report"]["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert aws_solutions["violations"] == []
    ours = [v for v in aws_solutions.get("suppressedViolations", []) if "Alarm/Alarm/" in json.dumps(v)]
    assert sorted(v["ruleName"] for v in ours) == [
        "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]",
        "AwsSolutions-IAM5[Resource::<JobOutputBucket44705424.Arn>/training/resnet-exp-*/rule-output/*/"
        "evaluator-output/evaluation-summary.json]",
        "AwsSolutions-IAM5[Resource::arn:aws:sagemaker:us-east-1:<AWS::AccountId>:training-job/resnet-exp-*]",
        "AwsSolutions-SQS3",  # the subscriptions' dead-letter queue needs none of its own
    ]
    assert all(len(v["reason"]) > 60 for v in ours)
    # each on the handler role's default policy alone (SQS3 on the subscriptions' queue), never on the role or the
    # alarm as a whole
    assert {v["acknowledgedAt"] for v in ours} == {"Alarm/Alarm/Role/DefaultPolicy/Resource",
                                                   "Alarm/Alarm/SubscriptionDeadLetterQueue/Resource"}


def test_cfn_lint_finds_nothing_but_cdk_dependencies(synthesized: dict[str, Any]) -> None:
    template_path = synthesized["out"] / "Alarm.template.json"
    result = subprocess.run(
        [str(Path(sys.executable).with_name("cfn-lint")), "--format", "parseable", str(template_path)],
        capture_output=True, text=True, timeout=300,
    )
    findings = [line for line in result.stdout.splitlines() if line.strip()]
    assert [line for line in findings if not re.search(r":W3005:", line)] == [], result.stdout


def test_asset_holds_only_the_rule_alarm_package(synthesized: dict[str, Any]) -> None:
    code = _handler(synthesized["template"])[1]["Code"]
    asset = synthesized["out"] / f"asset.{code['S3Key'].split('.')[0]}"
    files = {p.relative_to(asset).as_posix() for p in asset.rglob("*") if p.is_file()}
    assert files == {f"rule_alarm/{name}" for name in (
        "__init__.py", "alarm.py", "contract_shared.py", "events.py", "handler.py", "ledger.py", "logs.py", "message.py",
        "reports.py", "settings.py")}
    # the shared contract is shipped as a file (the source tree links it to model/contract.py)
    assert not (asset / "rule_alarm" / "contract_shared.py").is_symlink()
    # Lambda imports the handler as a top-level package, with boto3 but without this library or aws_cdk loaded
    probe = (
        "import sys, rule_alarm.handler as h; assert callable(h.handler);"
        "assert not [m for m in sys.modules if m.startswith(('aws_cdk', 'jsii', 'cdk_sagemaker_debugger'))]"
    )
    paths = os.pathsep.join([str(asset), *site.getsitepackages()])
    done = subprocess.run([sys.executable, "-S", "-c", probe], cwd=asset, capture_output=True, text=True,
                          env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": paths}, timeout=60)
    assert done.returncode == 0, done.stderr


# -- variants ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def job_stack() -> tuple[cdk.Stack, ProfiledTrainingJob]:
    stack = cdk.Stack(cdk.App(), "Variants", env=US_EAST_1)
    rule_set = ProfilerRuleSet(stack, "Rules", rules=[rules.ProfilerReport(), rules.LowGPUUtilization()])
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="ResNet-Exp", training_image=IMAGE, rule_set=rule_set)
    return stack, job


def test_prefix_alarm_for_jobs_started_elsewhere_with_rule_names_and_a_narrower_stop() -> None:
    stack = cdk.Stack(cdk.App(), "Legacy", env=US_EAST_1)
    alarm = RuleAlarm(stack, "Alarm", training_jobs=TrainingJobs.from_job_name_prefix(
                          "Legacy-", output_bucket=s3.Bucket.from_bucket_name(stack, "Out", "legacy-output")),
                      actions=[StopTraining(training_job_prefix="Legacy-gpu")],
                      rule_names=["LowGPUUtilization", "LowGPUUtilization"])
    queue = sqs.Queue(stack, "Slack", enforce_ssl=True)
    transitions = alarm.on_transition("Slack", target=targets.SqsQueue(queue))
    template = Template.from_stack(stack)

    assert alarm.stop_prefix == "Legacy-gpu" and alarm.rule_names == ("LowGPUUtilization",)
    env = _handler(template)[1]["Environment"]["Variables"]
    assert env["JOB_FAMILY"] == '{"job_name_prefix": "Legacy-"}' and env["STOP_PREFIX"] == "Legacy-gpu"
    assert env["RULE_NAMES"] == '["LowGPUUtilization"]' and env["STATUSES"] == '["IssuesFound"]'
    by_action = _by_action(_handler_statements(template))
    # SageMaker writes job ARNs in lower case: the ARN pattern is lower case (model/job_family.py)
    assert [s["Resource"] for s in by_action["sagemaker:StopTrainingJob"]] == [_job_arn("legacy-gpu*")]
    template.resource_count_is("AWS::SNS::Subscription", 0)
    rule_id = stack.get_logical_id(transitions.node.default_child)
    assert template.to_json()["Resources"][rule_id]["Properties"]["EventPattern"] == {
        "source": ["cdk-sagemaker-debugger"],
        "detail-type": ["Rule Alarm Transition"],
        "detail": {
            "AlarmId": ["Legacy/Alarm"],
            "TrainingJobName": [{"prefix": "Legacy-"}],
            "RuleEvaluationStatus": ["IssuesFound"],
            "RuleConfigurationName": ["LowGPUUtilization"],
        },
    }


def test_alarm_without_stop_has_no_stop_permission_and_adds_subscribers(job_stack) -> None:
    stack, job = job_stack
    alarm = RuleAlarm(stack, "NotifyOnly", training_jobs=job.training_jobs, actions=[Email("a@example.com")],
                      rule_names=["LowGPUUtilization"])
    email = alarm.add_email_subscriber("b@example.com")
    sms = alarm.add_sms_subscriber("+442071838750")
    assert isinstance(email, sns.Subscription) and isinstance(sms, sns.Subscription)
    template = Template.from_stack(stack)
    assert alarm.job_name_prefix == "ResNet-Exp-" and alarm.stop_prefix is None
    statements = [s for s in _handler_statements_of(template, alarm) if "sagemaker:StopTrainingJob" in json.dumps(s)]
    assert statements == []
    endpoints = sorted(
        props["Properties"]["Endpoint"] for props in template.find_resources("AWS::SNS::Subscription").values()
        if props["Properties"]["TopicArn"] == {"Ref": stack.get_logical_id(alarm.topic.node.default_child)}
    )
    assert endpoints == ["+442071838750", "a@example.com", "b@example.com"]


def _handler_statements_of(template: Template, alarm: RuleAlarm) -> list[dict[str, Any]]:
    role_id = cdk.Stack.of(alarm).get_logical_id(alarm.role.node.default_child)
    policies = template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role_id}]}})
    return [s for policy in policies.values() for s in policy["Properties"]["PolicyDocument"]["Statement"]]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_messages_per_job": 0}, ConfigurationError,
         "max_messages_per_job: must be between 1 and 1000 messages per training job, got 0."),
        ({"reserved_concurrency": 2000}, ConfigurationError,
         "reserved_concurrency: must be between 1 and 1000 concurrent executions"),
        ({"transition_retention": cdk.Duration.millis(90_000_000_500)}, ConfigurationError,
         "transition_retention: must be a whole number of seconds, got 90000000500 milliseconds"),
        ({"topic_key": "alias/team-a"}, ConfigurationTypeError,
         "topic_key: expected a kms.IKey, got str 'alias/team-a'."),
        ({"log_retention": "3 months"}, ConfigurationTypeError,
         "log_retention: expected a RetentionDays such as logs.RetentionDays.THREE_MONTHS"),
        ({"statuses": ["IssueFound"]}, ConfigurationError,
         "'IssueFound' is not a rule verdict; use one of IssuesFound, Error, NoIssuesFound, Stopped. Did you mean "
         "'IssuesFound'?"),
        ({"statuses": []}, ConfigurationError, "must name at least one status"),
        ({"statuses": "IssuesFound"}, ConfigurationTypeError, "expected a list of statuses"),
        ({"rule_names": []}, ConfigurationError, "pass None for every rule"),
        ({"actions": ["ml-team@example.com"]}, ConfigurationTypeError,
         "item 0 is str 'ml-team@example.com'; expected Email(...), SMS(...) or StopTraining(...). Build it with "
         "Email('team@example.com')."),
        ({"actions": [Email("a@example.com"), Email("a@example.com")]}, ConfigurationError,
         "'a@example.com' is given twice."),
        ({"actions": [StopTraining(), StopTraining("exp-a")]}, ConfigurationError,
         "more than one StopTraining"),
        ({"actions": [StopTraining("prod-")]}, ConfigurationError,
         "StopTraining prefix 'prod-' and the watched prefix 'exp-' share no job"),
        ({"transition_retention": cdk.Duration.hours(1)}, ConfigurationError,
         "must be at least one day"),
    ],
)
def test_bad_props_name_the_construct_the_field_and_the_fix(kwargs: dict[str, Any], error: type, message: str) -> None:
    stack = cdk.Stack(cdk.App(), "Bad")
    jobs = TrainingJobs.from_job_name_prefix("exp-", output_bucket=s3.Bucket.from_bucket_name(stack, "Out", "out"))
    with pytest.raises(error) as caught:
        RuleAlarm(stack, "Alarm", training_jobs=jobs, **kwargs)
    assert str(caught.value).startswith("Bad/Alarm: ")
    assert message in str(caught.value)


def test_rule_names_are_checked_against_the_job(job_stack) -> None:
    stack, job = job_stack
    with pytest.raises(ConfigurationError) as caught:
        RuleAlarm(stack, "Typo", training_jobs=job.training_jobs, rule_names=["LowGpuUtilization"])
    assert str(caught.value) == (
        "Variants/Typo: rule_names: 'LowGpuUtilization' is not a rule of the training job (its rules: "
        "LowGPUUtilization, ProfilerReport). Did you mean 'LowGPUUtilization'?"
    )


def test_stop_training_prefix_wider_than_the_job_narrows_to_the_job(job_stack) -> None:
    stack, job = job_stack
    alarm = RuleAlarm(stack, "Wide", training_jobs=job.training_jobs, actions=[StopTraining("ResNet")])
    assert alarm.stop_prefix == "ResNet-Exp-"


def test_invalid_subscriber_is_refused_before_anything_is_added(job_stack) -> None:
    stack, job = job_stack
    alarm = RuleAlarm(stack, "Subscribers", training_jobs=job.training_jobs, actions=[SMS("+15555550100")])
    children = len(alarm.topic.node.children)
    with pytest.raises(ConfigurationError):
        alarm.add_sms_subscriber("555-0100")
    with pytest.raises(ConfigurationError, match="'\\+15555550100' is given twice"):
        alarm.add_sms_subscriber("+15555550100")
    assert len(alarm.topic.node.children) == children


def test_deploy_time_prefix_is_used_as_given_in_the_policy() -> None:
    """A prefix from a CfnParameter cannot be lower-cased at synth: the policy uses the parameter itself."""
    stack = cdk.Stack(cdk.App(), "Stack", env=cdk.Environment(region="us-east-1"))
    prefix = cdk.CfnParameter(stack, "Prefix", default="team-a-").value_as_string
    RuleAlarm(stack, "Alarm", actions=[Email("a@example.com"), StopTraining()],
              training_jobs=TrainingJobs.from_job_name_prefix(prefix, output_bucket=s3.Bucket(stack, "Out")))
    policies = json.dumps(Template.from_stack(stack).find_resources("AWS::IAM::Policy"))
    assert "token" not in policies.lower()  # no lower-cased token text leaked into an ARN
    assert '":training-job/", {"Ref": "Prefix"}, "*"' in policies


# -- trust -----------------------------------------------------------------------------------------------------------


def test_an_alarm_in_another_region_than_its_job_fails() -> None:
    app = cdk.App()
    jobs = cdk.Stack(app, "Jobs", env=US_EAST_1)
    job = ProfiledTrainingJob(jobs, "Job", job_name_prefix="resnet-exp", training_image=IMAGE)
    elsewhere = cdk.Stack(app, "Elsewhere", env=cdk.Environment(region="eu-west-1"))
    with pytest.raises(ConfigurationError) as caught:
        RuleAlarm(elsewhere, "Alarm", training_jobs=job.training_jobs, actions=[Email("a@example.com")])
    assert str(caught.value) == (
        "Elsewhere/Alarm: training_jobs: The RuleAlarm is in eu-west-1, but the training job Jobs/Job runs in us-east-1; "
        "it would never hear of the job's runs (SageMaker's events and job listings stay in the job's region). Create "
        "it in a stack in us-east-1."
    )


def test_a_one_character_job_prefix_gives_a_watched_prefix_too_short_to_trust() -> None:
    stack = cdk.Stack(cdk.App(), "Short", env=US_EAST_1)
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="a", training_image=IMAGE)
    with pytest.raises(ConfigurationError) as caught:
        RuleAlarm(stack, "Alarm", training_jobs=job.training_jobs)
    assert str(caught.value).startswith(
        "Short/Job: job_name_prefix: the training job's prefix 'a' gives the watched prefix 'a-', which matches every "
        "job whose name starts with it")


def test_a_bare_prefix_alarm_says_what_it_trusts() -> None:
    from aws_cdk.assertions import Annotations

    stack = cdk.Stack(cdk.App(), "Legacy", env=US_EAST_1)
    alarm = RuleAlarm(stack, "Alarm", training_jobs=TrainingJobs.from_job_name_prefix(
        "legacy-", output_bucket=s3.Bucket.from_bucket_name(stack, "Out", "legacy-output")), actions=[StopTraining()])
    assert alarm.execution_role is None
    annotations = Annotations.from_stack(stack)
    (warning,) = annotations.find_warning("/Legacy/Alarm", Match.string_like_regexp("acts on every one of the"))
    assert "Pass execution_role=" in warning.entry.data
    env = _handler(Template.from_stack(stack))[1]["Environment"]["Variables"]
    assert "EXECUTION_ROLE_ARN" not in env and "KNOWN_RULES" not in env


def test_a_bare_prefix_alarm_with_the_family_role_and_bucket() -> None:
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_s3 as s3
    from aws_cdk.assertions import Annotations

    stack = cdk.Stack(cdk.App(), "Legacy", env=US_EAST_1)
    role = iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::123456789012:role/team-a-training")
    bucket = s3.Bucket.from_bucket_name(stack, "Out", "team-a-output")
    alarm = RuleAlarm(stack, "Alarm", training_jobs=TrainingJobs.from_job_name_prefix(
        "legacy-", execution_role=role, output_bucket=bucket), max_messages_per_job=3, reserved_concurrency=None)
    template = Template.from_stack(stack)
    props = _handler(template)[1]
    assert "ReservedConcurrentExecutions" not in props
    env = props["Environment"]["Variables"]
    assert json.loads(env["JOB_FAMILY"])["execution_role_arns"] == ["arn:aws:iam::123456789012:role/team-a-training"]
    assert env["MAX_MESSAGES_PER_JOB"] == "3"
    assert alarm.verdict_rule is not None
    reads = [s for s in _handler_statements(template) if s["Action"] == "s3:GetObject"]
    assert [s["Resource"] for s in reads] == [{"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"},
        ":s3:::team-a-output/legacy-*/rule-output/*/evaluator-output/evaluation-summary.json"]]}]
    assert Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("acts on every one")) == []


def test_training_jobs_is_required_and_typed(job_stack) -> None:
    stack, job = job_stack
    with pytest.raises(ConfigurationTypeError, match=r"^Variants/Str: training_jobs: expected TrainingJobs, got str "
                                                     r"'exp-'. Pass job.training_jobs for a ProfiledTrainingJob"):
        RuleAlarm(stack, "Str", training_jobs="exp-")
    with pytest.raises(TypeError):
        RuleAlarm(stack, "Old", training_job=job)  # the 0.x keywords are gone
