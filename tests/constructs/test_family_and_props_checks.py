"""Props that synthesized but could never work: an empty tag value lost on the way to the functions, descriptions
too long for CloudFormation, tags CreateTrainingJob refuses, tag values no job can carry, a GPU count that contradicts
the instance type, an Overfit rule comparing a metric with itself, and one SNS subscriber given twice."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from cdk_sagemaker_debugger import (
    SMS,
    Email,
    ProfiledTrainingJob,
    RuleAlarm,
    RuleEvaluator,
    StopTraining,
    TrainingDashboard,
    TrainingJobs,
    rules,
)
from cdk_sagemaker_debugger.model.contract import JOB_FAMILY_ENV, JobFamily
from cdk_sagemaker_debugger.model.errors import ConfigurationError

US_EAST_1 = cdk.Environment(region="us-east-1")
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-sagemaker"


def _stack(name: str = "Checks") -> cdk.Stack:
    return cdk.Stack(cdk.App(), name, env=US_EAST_1)


def _role(stack: cdk.Stack) -> iam.IRole:
    return iam.Role.from_role_arn(stack, "JobRole", "arn:aws:iam::123456789012:role/team-jobs")


def _families(template: Template) -> list[str]:
    return [f["Properties"]["Environment"]["Variables"][JOB_FAMILY_ENV]
            for f in template.find_resources("AWS::Lambda::Function").values()
            if JOB_FAMILY_ENV in f["Properties"].get("Environment", {}).get("Variables", {})]


def test_an_empty_tag_value_reaches_the_functions_and_selects_only_jobs_tagged_empty() -> None:
    stack = _stack()
    jobs = TrainingJobs.from_tag("team", "", output_bucket=s3.Bucket(stack, "Out"), execution_role=_role(stack))
    RuleEvaluator(stack, "Evaluator", training_jobs=jobs)
    RuleAlarm(stack, "Alarm", training_jobs=jobs, actions=[Email("a@example.com")])
    families = _families(Template.from_stack(stack))
    assert families and set(families) == {'{"execution_role_arns": ["arn:aws:iam::123456789012:role/team-jobs"], "tag_key": "team", "tag_value": ""}'}
    family = JobFamily.from_json(families[0])  # what each function does at start; it raised before
    assert family.refusal("any-job", {"team": ""}, role_arn="arn:aws:iam::123456789012:role/team-jobs") is None
    assert family.refusal("any-job", {"team": "vision"}, role_arn="arn:aws:iam::123456789012:role/team-jobs") == "the job is not tagged team="


@pytest.mark.parametrize("factory", [
    lambda bucket: TrainingJobs.from_pipeline("p" * 256, output_bucket=bucket, execution_role=_role(bucket.stack)),
    lambda bucket: TrainingJobs.from_tag("k" * 128, "v" * 256, output_bucket=bucket, execution_role=_role(bucket.stack)),
], ids=["256-character-pipeline", "128-character-key-256-character-value"])
def test_a_valid_long_family_fits_every_description(factory) -> None:
    stack = _stack()
    jobs = factory(s3.Bucket(stack, "Out"))
    RuleEvaluator(stack, "Evaluator", training_jobs=jobs)
    RuleAlarm(stack, "Alarm", training_jobs=jobs, actions=[Email("a@example.com"), StopTraining()])
    template = Template.from_stack(stack)  # CDK raised "Function description can not be longer than 256 characters"
    limits = {"AWS::Lambda::Function": 256, "AWS::Events::Rule": 512, "AWS::IAM::Role": 1000}
    seen = 0
    for kind, limit in limits.items():
        for resource in template.find_resources(kind).values():
            description = resource["Properties"].get("Description")
            if isinstance(description, str):
                seen += 1
                assert len(description) <= limit, (kind, description)
    assert seen >= 4
    assert len(jobs.label) <= 200 and jobs.label.startswith("training jobs ") and "..." in jobs.label


def _job(stack: cdk.Stack, **kwargs) -> ProfiledTrainingJob:
    return ProfiledTrainingJob(stack, "Job", job_name_prefix="resnet", training_image=IMAGE,
                               instance_type="ml.g5.2xlarge", **kwargs)


@pytest.mark.parametrize(("tags", "field", "message"), [
    ({"aws:team": "vision"}, "tags key", "'aws:team' is reserved for AWS"),
    ({"AWS:cost-center": "1"}, "tags key", "reserved for AWS"),
    ({"team": "vision\tnlp"}, "tags['team']", "no tab or newline"),
    ({f"k{i}": "v" for i in range(51)}, "tags", "at most 50"),
], ids=["aws-prefix", "aws-prefix-upper-case", "tab-in-value", "51-tags"])
def test_job_tags_create_training_job_refuses_fail_synth(tags, field, message) -> None:
    with pytest.raises(ConfigurationError, match=message) as caught:
        _job(_stack(), tags=tags)
    assert f"Checks/Job: {field}" in str(caught.value)


def test_valid_job_tags_are_kept() -> None:
    job = _job(_stack(), tags={"team": "vision", "cost center": "ml/1", "owner": ""})
    assert job.tags == {"team": "vision", "cost center": "ml/1", "owner": ""}


@pytest.mark.parametrize("value", ["vision\n", "a\tb", "x\r"], ids=["newline", "tab", "carriage-return"])
def test_a_tag_family_with_a_tab_or_newline_is_refused(value: str) -> None:
    stack = _stack()
    with pytest.raises(ConfigurationError, match="no tab or newline"):
        TrainingJobs.from_tag("team", value, output_bucket=s3.Bucket(stack, "Out"))


def test_a_tag_family_accepts_what_sagemaker_accepts() -> None:
    stack = _stack()
    jobs = TrainingJobs.from_tag("équipe", "vision 2\u00a0nlp_1.0:/=+-@", output_bucket=s3.Bucket(stack, "Out"),
                                 execution_role=_role(stack))
    assert jobs.family.tag_value == "vision 2\u00a0nlp_1.0:/=+-@"


def test_gpus_per_host_contradicting_the_instance_type_is_refused() -> None:
    stack = _stack()
    jobs = TrainingJobs.from_job_name_prefix("legacy-", output_bucket=s3.Bucket(stack, "Out"))
    with pytest.raises(ConfigurationError, match=r"ml.g5.2xlarge has 1 GPU per instance, not 8") as caught:
        TrainingDashboard(stack, "Dashboard", training_jobs=jobs, instance_type="ml.g5.2xlarge", gpus_per_host=8)
    assert "Checks/Dashboard: gpus_per_host" in str(caught.value)


def test_gpus_per_host_agreeing_with_the_instance_type_is_accepted() -> None:
    stack = _stack()
    jobs = TrainingJobs.from_job_name_prefix("legacy-", output_bucket=s3.Bucket(stack, "Out"))
    dash = TrainingDashboard(stack, "Dashboard", training_jobs=jobs, instance_type="ml.g5.12xlarge", gpus_per_host=4)
    assert dash.devices[0] == 4


def test_overfit_on_one_metric_twice_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"names the same metric as train_metric= \('loss'\)") as caught:
        rules.Overfit(train_metric="loss", validation_metric="loss")
    assert "validation_metric" in str(caught.value)
    assert rules.Overfit(train_metric="train:loss", validation_metric="val:loss").metric_names == (
        "train:loss", "val:loss")


def _subscriptions(stack: cdk.Stack) -> list[str]:
    return sorted(s["Properties"]["Endpoint"]
                  for s in Template.from_stack(stack).find_resources("AWS::SNS::Subscription").values())


def test_an_email_whose_domain_differs_only_in_case_is_one_subscriber() -> None:
    stack = _stack()
    jobs = TrainingJobs.from_job_name_prefix("legacy-", output_bucket=s3.Bucket(stack, "Out"))
    with pytest.raises(ConfigurationError, match=r"'a@EXAMPLE.COM' is the same subscriber as 'a@example.com'"):
        RuleAlarm(stack, "Alarm", training_jobs=jobs, actions=[Email("a@example.com"), Email("a@EXAMPLE.COM")])
    alarm = RuleAlarm(stack, "Alarm2", training_jobs=jobs, actions=[Email("a@example.com"), SMS("+15555550100")])
    with pytest.raises(ConfigurationError, match="same subscriber"):
        alarm.add_email_subscriber("a@Example.Com")
    alarm.add_email_subscriber("A@example.com")  # the local part may be case-sensitive: another mailbox
    assert _subscriptions(stack) == ["+15555550100", "A@example.com", "a@example.com"]
    assert json.dumps(_subscriptions(stack)).count("example") == 2
