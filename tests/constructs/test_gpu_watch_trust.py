"""The low-GPU watch's trust: one run at a time, only jobs of the family's execution role, and its statements on "*"
in a policy of their own whose acknowledgement cannot hide a statement added to the role later (cdk-nag v3)."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from cdk_sagemaker_debugger import ProfiledTrainingJob, TrainingDashboard
from cdk_sagemaker_debugger.model.contract import GpuWatchEnvironment
from cdk_sagemaker_debugger.runtime.gpu_watch import watch

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"


def _dashboard(app: cdk.App, **props: object) -> tuple[cdk.Stack, TrainingDashboard, ProfiledTrainingJob]:
    stack = cdk.Stack(app, "Vision", env=cdk.Environment(region="us-east-1"))
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="vision", training_image=IMAGE,
                              instance_type="ml.g5.12xlarge")
    return stack, TrainingDashboard(stack, "Dashboard", training_jobs=job.training_jobs, **props), job


def test_the_watch_runs_once_at_a_time_and_counts_only_the_familys_role() -> None:
    stack, dash, job = _dashboard(cdk.App())
    template = Template.from_stack(stack).to_json()
    (function,) = [r["Properties"] for r in template["Resources"].values()
                   if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") == "gpu_watch.handler.handler"]
    assert function["ReservedConcurrentExecutions"] == 1
    role = stack.resolve(job.role.role_arn)
    assert function["Environment"]["Variables"][GpuWatchEnvironment.EXECUTION_ROLE_ARNS] == {
        "Fn::Join": ["", ['["', role, '"]']]}
    settings = watch.Settings.from_environment({**function["Environment"]["Variables"], "EXECUTION_ROLE_ARNS": '["r"]'})
    assert settings.execution_role_arns == ("r",)
    (unscoped,) = [r["Properties"] for k, r in template["Resources"].items()
                   if r["Type"] == "AWS::IAM::Policy" and "UnscopedActions" in k]
    assert unscoped["PolicyDocument"]["Statement"] == [{"Action": ["sagemaker:ListTrainingJobs",
                                                                   "cloudwatch:GetMetricData"],
                                                        "Effect": "Allow", "Resource": "*"}]
    defaults = [r["Properties"] for k, r in template["Resources"].items()
                if r["Type"] == "AWS::IAM::Policy" and "GpuWatchRoleDefaultPolicy" in k]
    assert all(s["Resource"] != "*" for p in defaults for s in p["PolicyDocument"]["Statement"])
    assert dash.watch_wildcard_policy is not None
    assert TrainingDashboard(stack, "NoReservation", training_jobs=job.training_jobs,
                             reserved_concurrency=None).watch_function is not None


def test_a_wildcard_statement_added_to_the_watch_role_later_is_reported(tmp_path: Path) -> None:
    from cdk_nag import AwsSolutionsChecks

    app = cdk.App(outdir=str(tmp_path))
    _stack, dash, _job = _dashboard(app)
    assert dash.watch_function is not None
    dash.watch_function.role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"]))
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    found = [(v["ruleName"], c["constructPath"]) for r in report["pluginReports"] for v in r["violations"]
             for c in v["violatingConstructs"]]
    assert [("AwsSolutions-IAM5[Resource::*]", "Vision/Dashboard/GpuWatch/Role/DefaultPolicy/Resource")] == found
