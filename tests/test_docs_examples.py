"""Every Python block of README.md and docs/*.md runs as written, so the docs cannot drift from the code.

Each block runs in a fresh namespace that already holds what the prose around it assumes (``app``, ``stack``, a
``bucket``, a ``job`` and its ``rule_set``, ``targets``, ``lambda_``...), and the app is synthesized after it. A block
that is only a fragment (an expression list, output shown as a comment, code for inside a training container) is
marked with ``<!-- docs-test: fragment -->`` on the line before it and is only compiled."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import ROOT

FRAGMENT = "<!-- docs-test: fragment -->"
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
BASE = """
import aws_cdk as cdk
from aws_cdk import aws_events_targets as targets, aws_iam as iam, aws_lambda as lambda_, aws_s3 as s3
from aws_cdk import aws_sns as sns
from cdk_sagemaker_debugger import *
from cdk_sagemaker_debugger import rules
app = cdk.App()
stack = cdk.Stack(app, "Docs", env=cdk.Environment(account="123456789012", region="us-east-1"))
"""
#: What the prose assumes, added only to the blocks that use the name (a cdk-nag block then checks only its own app).
ASSUMED = (
    ("bucket", 'bucket = s3.Bucket(stack, "DocsBucket")'),
    ("IMAGE", f"IMAGE = {IMAGE!r}"),
    ("rule_set", 'rule_set = ProfilerRuleSet(stack, "DocsRules", rules=[rules.ProfilerReport()])'),
    ("job", f'job = ProfiledTrainingJob(stack, "DocsJob", job_name_prefix="docs-job", training_image={IMAGE!r}, '
            'instance_type="ml.g5.2xlarge", rule_set=ProfilerRuleSet(stack, "DocsJobRules", '
            "rules=[rules.ProfilerReport()]))"),
    ("grantee", 'grantee = iam.Role(stack, "DocsGrantee", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))'),
    ("my_target", 'my_target = targets.SnsTopic(sns.Topic(stack, "DocsTopic"))'),
    ("ops_topic", 'ops_topic = sns.Topic(stack, "DocsOps")'),
    ("rule_alarm", 'rule_alarm = RuleAlarm(stack, "DocsAlarm", training_jobs=job.training_jobs, '
                   'actions=[Email("ml@example.com")])'),
    ("training_pipeline", 'training_pipeline = TrainingPipeline(stack, "DocsPipeline", pipeline_name="churn-pipeline", '
                          'steps=[job.pipeline_step("Train")])'),
    ("slack_notifier", 'slack_notifier = lambda_.Function(stack, "Slack", runtime=lambda_.Runtime.PYTHON_3_12, '
                       'handler="index.handler", code=lambda_.Code.from_inline("def handler(e, c): pass"))'),
)


#: MlflowLayer installs the MLflow client from the package index at synth: its blocks synthesize with bundling skipped
#: (as docs/evaluator.md tells for unit tests), so the docs test needs no network. tests/constructs/test_mlflow_layer.py
#: builds layers.
NO_BUNDLING = 'app = cdk.App(context={"aws:cdk:bundling-stacks": []})'


def prelude(code: str) -> str:
    wanted = [line for name, line in ASSUMED if re.search(rf"\b{name}\b", code)]
    needs_job = any(line.startswith(("rule_alarm =", "training_pipeline =")) for line in wanted)
    if needs_job and not any(line.startswith("job =") for line in wanted):
        wanted.insert(0, next(line for name, line in ASSUMED if name == "job"))
    base = BASE.replace("app = cdk.App()", NO_BUNDLING) if "MlflowLayer" in code else BASE
    return base + "\n".join(wanted) + "\n"


def _blocks() -> list[tuple[str, int, str, bool]]:
    found = []
    for path in FILES:
        text = path.read_text()
        for match in re.finditer(r"(?m)^```python\n(.*?)^```", text, re.S):
            before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            line = text[:match.start()].count("\n") + 1
            found.append((path.relative_to(ROOT).as_posix(), line, match.group(1), before.strip() == FRAGMENT))
    return found


BLOCKS = _blocks()


@pytest.mark.parametrize(("where", "line", "code", "fragment"), BLOCKS, ids=[f"{b[0]}:{b[1]}" for b in BLOCKS])
def test_the_block_runs_as_written(where: str, line: int, code: str, fragment: bool, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch):
    compiled = compile(code, f"{where}:{line}", "exec")
    if fragment:
        return
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(prelude(code), "prelude", "exec"), namespace)  # noqa: S102 - our own documentation
    exec(compiled, namespace)  # noqa: S102
    namespace["app"].synth()
