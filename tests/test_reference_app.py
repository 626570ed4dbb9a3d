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

from cdk_sagemaker_debugger import ProfiledTrainingJob, RuleAlarm, RuleEvaluator, TrainingDashboard, TrainingPipeline
from cdk_sagemaker_debugger.constructs._cdk.compliance import ACKNOWLEDGED
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


#: The cdk-nag packs the reference app passes (docs/compliance.md).
NAG_PACKS = ("AwsSolutions", "HIPAA.Security", "NIST.800.53.R5")
COMPLIANCE_DOC = ROOT / "docs" / "compliance.md"
#: The library constructs that own resources, by the class name docs/compliance.md names resources with.
LIBRARY_CONSTRUCTS = (ProfiledTrainingJob, RuleEvaluator, RuleAlarm, TrainingDashboard, TrainingPipeline)


CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"


def test_every_lambda_function_reserves_concurrency(cli_synth):
    """What checkov's CKV_AWS_115 asks (a function-level concurrent execution limit), on every function of the
    reference templates: the library's defaults deploy with a reservation (the new-account path removes them)."""
    functions = {(stack, logical_id): resource["Properties"] for stack, template in _templates(cli_synth).items()
                 for logical_id, resource in template["Resources"].items() if resource["Type"] == "AWS::Lambda::Function"}
    assert functions
    unlimited = sorted(key for key, props in functions.items()
                       if not isinstance(props.get("ReservedConcurrentExecutions"), int))
    assert unlimited == []


@pytest.fixture(scope="session")
def checkov_report(cli_synth) -> list[dict[str, Any]]:
    """checkov (its own venv, ``make side-venvs``; it pins older boto3 and packaging than the dev venv) on the
    reference templates, offline."""
    if not CHECKOV.exists():
        if os.environ.get("CI"):
            pytest.fail(".venv-checkov is missing: run `make side-venvs` (make test does it).")
        pytest.skip(".venv-checkov is missing: `make test` (or `make side-venvs`) creates it")
    result = subprocess.run(
        [str(CHECKOV), "--directory", str(cli_synth), "--framework", "cloudformation", "--output", "json", "--compact",
         "--skip-download"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
    )
    assert result.returncode in (0, 1), result.stderr[-4000:]  # 1: some check failed
    report = json.loads(result.stdout)
    return report if isinstance(report, list) else [report]


def _checkov_failures(report: list[dict[str, Any]]) -> dict[str, list[str]]:
    failed: dict[str, list[str]] = {}
    for framework in report:
        for check in framework["results"]["failed_checks"]:
            stack = Path(check["file_path"]).name.removesuffix(".template.json")
            failed.setdefault(check["check_id"], []).append(f"{stack}:{check['resource']}")
    return failed


def test_checkov_finds_every_function_with_a_concurrency_limit(checkov_report):
    passed = [c for framework in checkov_report for c in framework["results"]["passed_checks"]
              if c["check_id"] == "CKV_AWS_115"]
    assert passed, "checkov did not run CKV_AWS_115 on the reference templates"
    assert _checkov_failures(checkov_report).get("CKV_AWS_115", []) == []


def test_checkov_findings_are_the_documented_ones(checkov_report):
    """Every check checkov fails on the reference templates is one docs/compliance.md explains."""
    documented = set(re.findall(r"`(CKV_AWS_\d+)`", COMPLIANCE_DOC.read_text())) - {"CKV_AWS_115"}
    assert sorted(set(_checkov_failures(checkov_report)) - documented) == []


@pytest.fixture(scope="session")
def nag_synth(tmp_path_factory) -> tuple[cdk.App, dict[str, Any]]:
    from cdk_nag import AwsSolutionsChecks, HIPAASecurityChecks, NIST80053R5Checks

    out = tmp_path_factory.mktemp("nag")
    app = build_app(cdk.App(outdir=str(out)), nag=False)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), HIPAASecurityChecks(app), NIST80053R5Checks(app))
    app.synth()  # raises when any finding of the three packs is not acknowledged
    return app, json.loads((out / "validation-report.json").read_text())


@pytest.fixture(scope="session")
def nag_report(nag_synth) -> dict[str, Any]:
    return nag_synth[1]


def test_cdk_nag_has_no_unacknowledged_findings(nag_report):
    reports = {r["pluginName"]: r for r in nag_report["pluginReports"]}
    assert sorted(reports) == sorted(NAG_PACKS)
    for pack in NAG_PACKS:
        assert reports[pack]["conclusion"] == "success", pack
        assert reports[pack]["violations"] == [], pack


def _documented() -> dict[tuple[str, str], str]:
    """(rule id, resource) -> reason, from the table of docs/compliance.md ("Acknowledged findings")."""
    text = COMPLIANCE_DOC.read_text()
    table = text[text.index("| Rule ids | Resources | Reason |"):].split("\n\n", 1)[0].splitlines()[2:]
    documented = {}
    for row in table:
        rule_ids, resources, reason = (cell.strip() for cell in row.strip().strip("|").split(" | "))
        for rule_id in re.findall(r"`([^`]+)`", rule_ids):
            for resource in re.findall(r"`([^`]+)`", resources):
                assert (rule_id, resource) not in documented, f"{rule_id} on {resource} is documented twice"
                documented[rule_id, resource] = reason
    assert documented, "docs/compliance.md has no table of acknowledged findings"
    return documented


def _owners(app: cdk.App) -> dict[str, str]:
    """Path of every library construct of the app -> its class name."""
    return {node.node.path: type(node).__name__ for node in app.node.find_all()
            if isinstance(node, LIBRARY_CONSTRUCTS)}


def _named(path: str, owners: dict[str, str]) -> str:
    """``Stack/Job/Evaluator/Function/Resource`` -> ``RuleEvaluator/Function`` (the nearest library construct)."""
    parts = path.split("/")
    if parts[-1] == "Resource":
        parts = parts[:-1]
    for end in range(len(parts) - 1, 0, -1):
        owner = owners.get("/".join(parts[:end]))
        if owner is not None:
            return "/".join([owner, *parts[end:]])
    return path  # not below a library construct: never documented, so the comparison shows it


def test_acknowledged_findings_are_the_documented_ones(nag_synth):
    """Every acknowledgement of the three packs on the reference app is in the docs table (rule id and resource), and
    every row of the table is used; the HIPAA and NIST reasons are the table's, word for word."""
    app, report = nag_synth
    owners, documented = _owners(app), _documented()
    acknowledged: dict[tuple[str, str], set[str]] = {}
    for pack in report["pluginReports"]:
        for violation in pack.get("suppressedViolations", []):
            rule_id = violation["ruleName"].split("[")[0]
            for construct in violation["violatingConstructs"]:
                key = (rule_id, _named(construct["constructPath"], owners))
                acknowledged.setdefault(key, set()).add(violation["reason"])
    assert sorted(set(acknowledged) - set(documented)) == [], "acknowledged but not in docs/compliance.md"
    assert sorted(set(documented) - set(acknowledged)) == [], "in docs/compliance.md but not acknowledged"
    for (rule_id, resource), reasons in acknowledged.items():
        if not rule_id.startswith("AwsSolutions-"):  # AwsSolutions reasons are per finding (the table summarises)
            assert reasons == {documented[rule_id, resource]}, (rule_id, resource)


def test_the_docs_table_is_the_librarys_list():
    """The HIPAA and NIST rows of docs/compliance.md are exactly what the constructs acknowledge from."""
    listed = {(rule_id, resource): entry.reason for entry in ACKNOWLEDGED for rule_id in entry.rule_ids
              for resource in entry.resources}
    documented = {key: reason for key, reason in _documented().items() if not key[0].startswith("AwsSolutions-")}
    assert documented == listed


@pytest.mark.parametrize("name", sorted(REFERENCE_STACKS))
def test_snapshot(nag_synth, snapshot, name):
    """The templates of the one in-process synth that the three cdk-nag packs checked."""
    path = Path(nag_synth[0].outdir) / f"{name}.template.json"
    assert path.exists(), f"the reference app's synth wrote no template for {name}"
    template = scrub(json.loads(path.read_text()))
    assert template == snapshot.use_extension(JSONSnapshotExtension)
