"""The job family every function applies before it acts: by name prefix, by tag, and by SageMaker Pipeline.

Tags are read with ListTags (botocore Stubber: every request checked against the SageMaker model)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
from cdk_sagemaker_debugger.runtime.rule_alarm.contract_shared import JobFamily, job_tags

REGION = "us-east-1"
ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-job/"
EXECUTION = "arn:aws:sagemaker:us-east-1:123456789012:pipeline/churn-pipeline/execution/p4jn9xou8a8s"
PIPELINE_JOB = "pipelines-p4jn9xou8a8s-Train-Ab12Cd34Ef"
TAGGED = JobFamily(tag_key="team", tag_value="vision")
PIPELINE = JobFamily(job_name_prefix="pipelines-", pipeline_name="churn-pipeline")
PREFIX_AND_TAG = JobFamily(job_name_prefix="vision-", tag_key="team", tag_value="vision")


def stubbed(tags_by_job: dict[str, list[dict[str, str]]]) -> tuple[Any, Stubber]:
    client = boto3.client("sagemaker", region_name=REGION)
    stub = Stubber(client)
    for job, tags in tags_by_job.items():
        stub.add_response("list_tags", {"Tags": tags}, {"ResourceArn": ARN + job.lower(), "MaxResults": 100})
    stub.activate()
    return client, stub


def decide(family: JobFamily, job: str, tags: list[dict[str, str]]) -> str | None:
    """What the evaluator decides for a described job (DescribeTrainingJob's response, then ListTags)."""
    client, stub = stubbed({job: tags} if family.needs_tags else {})
    settings = lh.Settings(family=family)
    description = {"TrainingJobName": job, "TrainingJobArn": ARN + job.lower()}
    refusal = lh.family_refusal(job, description, settings, lh.Clients(sagemaker=client))
    stub.assert_no_pending_responses()
    return refusal


def test_a_tagged_job_started_anywhere_is_acted_on() -> None:
    assert decide(TAGGED, "notebook-run-17", [{"Key": "team", "Value": "vision"}]) is None


def test_a_job_with_another_tag_value_or_no_tag_is_not() -> None:
    assert decide(TAGGED, "notebook-run-17", [{"Key": "team", "Value": "speech"}]) == (
        "the job is not tagged team=vision")
    assert decide(TAGGED, "notebook-run-18", []) == "the job is not tagged team=vision"


def test_a_job_sharing_the_prefix_but_not_the_tag_is_not_acted_on() -> None:
    assert decide(PREFIX_AND_TAG, "vision-resnet-1", [{"Key": "team", "Value": "vision"}]) is None
    assert decide(PREFIX_AND_TAG, "vision-resnet-2", [{"Key": "team", "Value": "ads"}]) == (
        "the job is not tagged team=vision")
    assert decide(PREFIX_AND_TAG, "speech-resnet-1", []) == "job outside the family's name prefix"


def test_a_pipeline_job_is_acted_on_by_its_execution_tag() -> None:
    tags = [{"Key": "sagemaker:pipeline-execution-arn", "Value": EXECUTION}]
    assert decide(PIPELINE, PIPELINE_JOB, tags) is None


def test_a_job_of_another_pipeline_or_a_lookalike_name_is_not() -> None:
    other = [{"Key": "sagemaker:pipeline-execution-arn", "Value": EXECUTION.replace("churn-pipeline", "churn")}]
    assert decide(PIPELINE, PIPELINE_JOB, other) == (
        "the job was not started by the SageMaker Pipeline churn-pipeline of its own account")
    # named like a pipeline job, but not tagged by SageMaker Pipelines
    assert decide(PIPELINE, PIPELINE_JOB, [{"Key": "team", "Value": "churn-pipeline"}]) == (
        "the job was not started by the SageMaker Pipeline churn-pipeline of its own account")
    assert decide(PIPELINE, "churn-pipeline-train-1", []) == "job outside the family's name prefix"


def test_listing_narrows_by_name_and_the_event_check_drops_other_names() -> None:
    settings = lh.Settings(family=PIPELINE)
    assert lh.jobs_for_event({"detail": {"TrainingJobName": "resnet-1"}}, settings, lh.Clients()) == []
    assert lh.jobs_for_event({"detail": {"TrainingJobName": PIPELINE_JOB}}, settings, lh.Clients()) == [PIPELINE_JOB]
    client = boto3.client("sagemaker", region_name=REGION)
    with Stubber(client) as stub:
        stub.add_response("list_training_jobs", {"TrainingJobSummaries": []},
                          {"StatusEquals": "InProgress", "MaxResults": 100})
        assert lh.jobs_for_event({}, lh.Settings(family=TAGGED), lh.Clients(sagemaker=client)) == []


def test_tags_are_read_across_pages() -> None:
    client = boto3.client("sagemaker", region_name=REGION)
    with Stubber(client) as stub:
        stub.add_response("list_tags", {"Tags": [{"Key": "a", "Value": "1"}], "NextToken": "n"},
                          {"ResourceArn": ARN + "x", "MaxResults": 100})
        stub.add_response("list_tags", {"Tags": [{"Key": "team", "Value": "vision"}]},
                          {"ResourceArn": ARN + "x", "MaxResults": 100, "NextToken": "n"})
        assert job_tags(client, ARN + "x") == {"a": "1", "team": "vision"}


@pytest.mark.parametrize("text", ["{}", "[]", "not json", '{"tag_key": "team"}', '{"job_name_prefix": "a", "x": 1}'])
def test_a_family_that_would_select_everything_or_is_damaged_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="JOB_FAMILY"):
        JobFamily.from_json(text)


def test_the_family_round_trips_through_the_environment() -> None:
    for family in (TAGGED, PIPELINE, PREFIX_AND_TAG, JobFamily(job_name_prefix="exp-")):
        assert JobFamily.from_json(family.to_json()) == family
