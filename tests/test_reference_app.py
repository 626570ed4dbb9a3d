"""The reference app as users deploy it: CLI synth, snapshots, cfn-lint and cdk-nag on every reference stack.

Two synths serve every check here: ``cdk synth`` with the CLI (cdk.json's context; cfn-lint reads its templates), and
one in this process with the AwsSolutions pack (its report, and the templates the snapshots hold)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from helpers import ROOT, scrub, training_tasks
from syrupy.extensions.json import JSONSnapshotExtension

from stacks.registry import REFERENCE_STACKS, build_app

NODE_MODULES_CDK = ROOT / "node_modules" / "aws-cdk" / "bin" / "cdk"


def _node() -> str:
    return os.environ.get("JSII_NODE", "node")


@pytest.fixture(scope="session")
def cli_synth(tmp_path_factory) -> Path:
    """``cdk synth`` with the pinned aws-cdk CLI, exactly what ``make synth`` runs, into a temporary folder."""
    if not NODE_MODULES_CDK.exists():
        if os.environ.get("CI"):
            pytest.fail("node_modules/aws-cdk is missing: run `make node` (make test does it).")
        pytest.skip("aws-cdk CLI not installed; run `make node`")
    out = tmp_path_factory.mktemp("cdk.out")
    result = subprocess.run(
        [_node(), str(NODE_MODULES_CDK), "synth", "--quiet", "--no-notices", "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "CDK_DISABLE_VERSION_CHECK": "1"},
        timeout=600,
    )
    assert result.returncode == 0, f"cdk synth failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return out


def _templates(out: Path) -> dict[str, dict[str, Any]]:
    return {p.name.removesuffix(".template.json"): json.loads(p.read_text()) for p in out.glob("*.template.json")}


def test_cli_synth_writes_every_reference_stack(cli_synth):
    assert set(_templates(cli_synth)) == set(REFERENCE_STACKS)


@pytest.mark.parametrize(
    ("stack", "image"),
    [
        ("TrainingOnDebugger", "/sagemaker-debugger-rules:latest"),
        ("TrainingCustomRule", "606966180310.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-debugger-rule-evaluator:latest"),
    ],
)
def test_debugger_state_machines_hold_the_request_with_the_right_rule_image(cli_synth, stack, image):
    tasks = training_tasks(_templates(cli_synth)[stack])
    assert tasks
    for task in tasks:
        assert task["Resource"].endswith(":states:::sagemaker:createTrainingJob.sync")
        parameters = task["Parameters"]
        assert "ProfilerConfig" in parameters and parameters["ProfilerRuleConfigurations"]
        images = [rule["RuleEvaluatorImage"] for rule in parameters["ProfilerRuleConfigurations"]]
        assert any(found.endswith(image) for found in images), images
        if stack == "TrainingOnDebugger":  # the rule account by region from a mapping, the domain by partition
            assert all(found.startswith("<FindInMap ") and "<Ref AWS::URLSuffix>" in found for found in images), images


@pytest.mark.parametrize("stack", ["Training", "TrainingUsEast1", "TrainingChina"])
def test_the_quick_start_needs_no_debugger_anywhere(cli_synth, stack):
    """The README quick start in an environment-agnostic stack, us-east-1 and China: no Debugger member, no rule
    image and no region mapping for one; the sampler channel and the job's own evaluator instead."""
    template = _templates(cli_synth)[stack]
    tasks = training_tasks(template)
    assert tasks
    for task in tasks:
        parameters = task["Parameters"]
        for member in ("ProfilerConfig", "ProfilerRuleConfigurations", "DebugHookConfig", "DebugRuleConfigurations"):
            assert member not in parameters
        assert "cdk-sagemaker-sampler" in [channel["ChannelName"] for channel in parameters["InputDataConfig"]]
        assert "CDK_SAGEMAKER_SAMPLER_S3_URI" in parameters["Environment"]
    assert "sagemaker-debugger-rule" not in json.dumps(template) and "Mappings" not in template  # no image anywhere
    handlers = [r["Properties"]["Handler"] for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert sorted(handlers) == ["evaluator.lambda_handler.handler", "rule_alarm.handler.handler"]


def test_cfn_lint_reports_no_errors(cli_synth):
    templates = sorted(str(p) for p in cli_synth.glob("*.template.json"))
    result = subprocess.run(
        [str(Path(os.sys.executable).with_name("cfn-lint")), "--format", "parseable", *templates],
        capture_output=True,
        text=True,
        timeout=600,
    )
    findings = [line for line in result.stdout.splitlines() if line.strip()]
    errors = [line for line in findings if re.search(r":E\d{4}:", line)]
    assert errors == [], "\n".join(errors)
    # Warnings allowed only for W3005 (a DependsOn CDK adds next to a GetAtt); anything else needs a look.
    other = [line for line in findings if not re.search(r":(W3005):", line)]
    assert other == [], "\n".join(other)


@pytest.fixture(scope="session")
def reference_synth(tmp_path_factory) -> tuple[Path, Exception | None]:
    """The reference app synthesized once in this process with the AwsSolutions pack: its folder, and the error of the
    synth (None when it passed). A finding fails the synth after the templates and the pack's report are written."""
    out = tmp_path_factory.mktemp("reference")
    app = build_app(cdk.App(outdir=str(out)), nag=True)
    try:
        app.synth()
    except Exception as error:  # noqa: BLE001 - the nag tests report it; the snapshots still compare the templates
        return out, error
    return out, None


@pytest.fixture(scope="session")
def nag_report(reference_synth) -> dict[str, Any]:
    out, error = reference_synth
    report = out / "validation-report.json"
    if not report.exists():
        raise AssertionError(f"the reference app's synth wrote no cdk-nag report: {error}") from error
    return json.loads(report.read_text())


def test_cdk_nag_has_no_unacknowledged_findings(nag_report, reference_synth):
    (aws_solutions,) = [r for r in nag_report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert aws_solutions["violations"] == []
    assert aws_solutions["conclusion"] == "success"
    assert reference_synth[1] is None  # the synth passed


def test_every_acknowledged_finding_has_a_specific_reason(nag_report):
    suppressed = [v for r in nag_report["pluginReports"] for v in r.get("suppressedViolations", [])]
    assert suppressed, "expected the documented acknowledgements (IAM5 wildcards, S1)"
    for violation in suppressed:
        reason = violation["reason"]
        assert len(reason) >= 40, f"{violation['ruleName']}: reason too short: {reason!r}"
        assert "[" not in violation["ruleName"] or violation["acknowledgedId"].endswith("]"), (
            f"{violation['ruleName']} acknowledged by rule, not by the specific finding"
        )


@pytest.mark.parametrize("name", sorted(REFERENCE_STACKS))
def test_snapshot(reference_synth, snapshot, name):
    out, error = reference_synth
    path = out / f"{name}.template.json"
    assert path.exists(), f"the reference app's synth wrote no template for {name}: {error}"
    template = scrub(json.loads(path.read_text()))
    assert template == snapshot.use_extension(JSONSnapshotExtension)
