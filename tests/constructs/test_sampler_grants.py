"""A role you pass gets what the sampler needs with one call: the bundle object and the profiler-output prefix of the
job's runs, and nothing of the rest of the assets bucket; cdk-nag 3 passes on it."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from cdk_sagemaker_debugger import ProfiledTrainingJob, ProfilerRuleSet, rules
from cdk_sagemaker_debugger.model.errors import ConfigurationError

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"


def _job(sampler: Any = "default") -> tuple[cdk.App, cdk.Stack, ProfiledTrainingJob, iam.Role]:
    app = cdk.App()
    stack = cdk.Stack(app, "S", env=cdk.Environment(account="123456789012", region="us-east-1"))
    role = iam.Role(stack, "MyRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    bucket = s3.Bucket(stack, "Out", enforce_ssl=True, server_access_logs_prefix="logs/")
    extra = {} if sampler == "default" else {"sampler": sampler}
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="resnet", training_image=IMAGE,
                              instance_type="ml.g5.2xlarge", role=role, output_bucket=bucket,
                              rule_set=ProfilerRuleSet(stack, "Rules", rules=[rules.ProfilerReport()]), **extra)
    return app, stack, job, role


def test_the_grant_is_the_one_object_and_the_one_prefix():
    _app, stack, job, role = _job()
    grant = job.grant_sampler(role)
    assert grant.success
    policies = Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    mine = [p for p in policies.values() if "MyRoleDefaultPolicy" in json.dumps(p) or
            any("MyRole" in json.dumps(r) for r in p["Properties"].get("Roles", []))]
    statements = [s for p in mine for s in p["Properties"]["PolicyDocument"]["Statement"]]
    by_action = {s["Action"]: json.dumps(stack.resolve(s["Resource"])) for s in statements}
    assert set(by_action) == {"s3:GetObject", "s3:PutObject"}
    assert ".zip" in by_action["s3:GetObject"] and "/*" not in by_action["s3:GetObject"]  # one object
    assert "resnet-*/profiler-output/*" in by_action["s3:PutObject"]  # the uploads of this job's runs only


def test_cdk_nag_passes_on_a_role_given_the_sampler_grant(tmp_path):
    from cdk_nag import AwsSolutionsChecks

    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "S", env=cdk.Environment(account="123456789012", region="us-east-1"))
    role = iam.Role(stack, "MyRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    bucket = s3.Bucket(stack, "Out", enforce_ssl=True, server_access_logs_prefix="logs/")
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="resnet", training_image=IMAGE,
                              instance_type="ml.g5.2xlarge", role=role, output_bucket=bucket,
                              rule_set=ProfilerRuleSet(stack, "Rules", rules=[rules.ProfilerReport()]))
    job.grant_sampler(role)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    try:
        app.synth()
    except Exception as exc:  # noqa: BLE001 - show the findings
        report = (tmp_path / "validation-report.json").read_text()
        findings = [v for p in json.loads(report).get("pluginReports", []) for v in p.get("violations", [])]
        pytest.fail(f"{exc}: {json.dumps(findings)[:3000]}")


def test_no_sampler_is_a_clear_error():
    _app, _stack, job, role = _job(sampler=None)
    with pytest.raises(ConfigurationError, match=r"S/Job.*sampler.*nothing to grant"):
        job.grant_sampler(role)
