"""Fixtures of the construct tests: a small stack of its own (``stack``), a ProfiledTrainingJob factory on it
(``job``), and a synthesis with cdk-nag's AwsSolutions pack that returns the pack's report (``synth_with_nag``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from helpers import make_stack

from cdk_sagemaker_debugger import ProfiledTrainingJob

#: The training image of the construct tests (a Deep Learning Container in us-east-1).
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"


@pytest.fixture
def stack() -> cdk.Stack:
    """A stack named Training in us-east-1, in an app of its own."""
    return make_stack()


@pytest.fixture
def job(stack: cdk.Stack) -> Callable[..., ProfiledTrainingJob]:
    """``job(**props)``: a ProfiledTrainingJob "Job" in :func:`stack` (prefix ``resnet``, :data:`IMAGE`,
    ml.g5.2xlarge) with ``props`` on top."""

    def create(**props: Any) -> ProfiledTrainingJob:
        given: dict[str, Any] = {"job_name_prefix": "resnet", "training_image": IMAGE, "instance_type": "ml.g5.2xlarge"}
        given.update(props)
        return ProfiledTrainingJob(stack, "Job", **given)

    return create


def nag_report(app: cdk.App, out: Path) -> dict[str, Any]:
    """Synthesize ``app`` (whose outdir is ``out``) with the AwsSolutions pack; its report (violations and
    acknowledged findings). Synthesis fails on an unacknowledged finding; the report says which."""
    from cdk_nag import AwsSolutionsChecks

    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    try:
        app.synth()
    except Exception:  # noqa: BLE001 - synth fails on unacknowledged findings; the report says which
        pass
    (report,) = [r for r in json.loads((out / "validation-report.json").read_text())["pluginReports"]
                 if r["pluginName"] == "AwsSolutions"]
    return report


@pytest.fixture
def synth_with_nag(tmp_path: Path) -> Callable[[Callable[[cdk.App], Any]], dict[str, Any]]:
    """``synth_with_nag(build)``: a new app in a temporary outdir, ``build(app)`` adds the stacks, then
    :func:`nag_report` of it."""

    def synthesize(build: Callable[[cdk.App], Any]) -> dict[str, Any]:
        app = cdk.App(outdir=str(tmp_path))
        build(app)
        return nag_report(app, tmp_path)

    return synthesize
