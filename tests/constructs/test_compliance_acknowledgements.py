"""The HIPAA / NIST acknowledgements of a training job reach each of its resources before anything reads them: a
default policy that a grant creates after the job, and an aspect of default priority that copies acknowledgements
into the template (cdk-nag's own WriteNagSuppressionsToCloudFormationAspect)."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from conftest import IMAGE

from cdk_sagemaker_debugger import ProfiledTrainingJob


def _suppressed(template: dict, resource_type: str, logical_prefix: str) -> set[str]:
    (resource,) = [r for key, r in template["Resources"].items()
                   if r["Type"] == resource_type and key.startswith(logical_prefix)]
    return {rule["id"] for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])}


def test_an_aspect_of_default_priority_sees_every_resources_compliance_acknowledgements(tmp_path: Path) -> None:
    from cdk_nag import WriteNagSuppressionsToCloudFormationAspect

    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Training", env=cdk.Environment(region="us-east-1"))
    ProfiledTrainingJob(stack, "Job", job_name_prefix="resnet", training_image=IMAGE, instance_type="ml.g5.2xlarge")
    cdk.Aspects.of(app).add(WriteNagSuppressionsToCloudFormationAspect())
    template = json.loads(Path(app.synth().get_stack_by_name("Training").template_full_path).read_text())

    bucket = _suppressed(template, "AWS::S3::Bucket", "JobOutputBucket")
    assert {"HIPAA.Security::HIPAA.Security-S3BucketLoggingEnabled",
            "NIST.800.53.R5::NIST.800.53.R5-S3BucketReplicationEnabled", "AwsSolutions::AwsSolutions-S1"} <= bucket
    assert "HIPAA.Security::HIPAA.Security-CloudWatchLogGroupEncrypted" in _suppressed(
        template, "AWS::Logs::LogGroup", "JobStateMachineLogs")
    assert "NIST.800.53.R5::NIST.800.53.R5-IAMNoInlinePolicy" in _suppressed(
        template, "AWS::IAM::Role", "JobStateMachineRole")


def test_a_default_policy_created_after_the_job_is_acknowledged_for_the_compliance_packs(tmp_path: Path) -> None:
    from cdk_nag import HIPAASecurityChecks

    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Training", env=cdk.Environment(region="us-east-1"))
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="resnet", training_image=IMAGE,
                              instance_type="ml.g5.2xlarge")
    job.role.add_to_principal_policy(iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[
        f"arn:aws:sqs:us-east-1:{stack.account}:resnet-notes"]))
    cdk.Validations.of(app).add_plugins(HIPAASecurityChecks(app))
    try:
        app.synth()
    except Exception:  # noqa: BLE001 - synth fails on unacknowledged findings; the report says which
        pass
    report = json.loads((tmp_path / "validation-report.json").read_text())
    inline = sorted(construct["constructPath"] for plugin in report["pluginReports"] for violation in plugin["violations"]
                    if violation["ruleName"].endswith("IAMNoInlinePolicy") for construct in violation["violatingConstructs"])
    assert inline == []
    metadata = json.loads((tmp_path / "Training.metadata.json").read_text())
    acknowledged = {rule for entry in metadata["/Training/Job/ExecutionRole/DefaultPolicy/Resource"]
                    if entry["type"] == "aws:cdk:acknowledged-rules" for rule in entry["data"]}
    assert "HIPAA.Security::HIPAA.Security-IAMNoInlinePolicy" in acknowledged
