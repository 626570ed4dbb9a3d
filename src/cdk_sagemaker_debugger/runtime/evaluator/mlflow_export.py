"""Write the verdicts into the training job's MLflow run: a tag per rule outcome, metrics per rule, and the HTML report
and the summary as artifacts, with the real ``mlflow`` client.

``mlflow`` is imported only when an export is asked for, so the evaluator and the CLI start without it. For SageMaker's
managed tracking servers the tracking URI is the server's ARN and the ``sagemaker-mlflow`` plugin (installed beside
``mlflow``) signs every request with the caller's AWS credentials.

What the run gets, for each configured rule (``<rule>`` is its RuleConfigurationName; ``<check>`` one of the rules it
ran, the same name for a standalone rule):

- tag ``debugger/<rule>/outcome``: IssuesFound, NoIssuesFound, NotApplicable, InProgress or Error
- tag ``debugger/<rule>/<check>``: the check's verdict; ``debugger/<rule>/<check>/why``: the evaluator's reason
- metrics ``debugger/<check>/violations``, ``.../datapoints``, ``.../windows_met`` at step = analysis windows read
- artifacts under ``debugger/<rule>/``: ``profiler-report.html`` and ``evaluation-summary.json``
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import advice
from .engine import RuleResult
from .report import HTML_NAME, SUMMARY_NAME

PREFIX = "debugger"
MAX_TAG_VALUE_CHARS = 5000  # MLflow's limit for a tag value is 8000; reasons are far shorter
ARTIFACT_FOLDER = PREFIX


class MlflowExportError(Exception):
    """The run could not be written (no mlflow client installed, unknown run, tracking server refused)."""


@dataclass(frozen=True)
class MlflowTarget:
    """Which run, on which tracking server: ``tracking_uri`` is a URL or a SageMaker tracking server ARN."""

    run_id: str
    tracking_uri: str | None = None

    @classmethod
    def from_description(cls, description: Mapping[str, Any]) -> MlflowTarget | None:
        """The job's own run: ``MlflowDetails.MlflowRunId`` on ``MlflowConfig.MlflowResourceArn`` (None: no run)."""
        run_id = (description.get("MlflowDetails") or {}).get("MlflowRunId")
        arn = (description.get("MlflowConfig") or {}).get("MlflowResourceArn")
        if not isinstance(run_id, str) or not run_id:
            return None
        return cls(run_id, arn if isinstance(arn, str) and arn else None)


def _client(tracking_uri: str | None) -> Any:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        raise MlflowExportError("writing to MLflow needs the mlflow client: pip install 'cdk-sagemaker-debugger[mlflow]'"
                                " (mlflow, and sagemaker-mlflow for SageMaker's managed tracking servers)") from exc
    if tracking_uri and tracking_uri.startswith("arn:"):
        if not _has_sagemaker_plugin():
            raise MlflowExportError(f"{tracking_uri} is a SageMaker tracking server: pip install sagemaker-mlflow, the "
                                    "plugin that signs the requests with your AWS credentials")
        import mlflow

        mlflow.set_tracking_uri(tracking_uri)  # the plugin's routing header reads the global URI, not the client's
    elif _has_sagemaker_plugin():
        # the plugin's header provider assumes an ARN and warns on every request to any other server
        logging.getLogger("mlflow.tracking.request_header.registry").setLevel(logging.ERROR)
    return MlflowClient(tracking_uri=tracking_uri)


def _has_sagemaker_plugin() -> bool:
    try:
        import sagemaker_mlflow  # noqa: F401
    except ImportError:
        return False
    return True


def run_contents(results: list[RuleResult], windows: int) -> tuple[dict[str, str], dict[str, float]]:
    """(tags, metrics) for the run, from the verdicts."""
    tags: dict[str, str] = {}
    metrics: dict[str, float] = {}
    for result in results:
        base = f"{PREFIX}/{result.configuration_name}"
        tags[f"{base}/outcome"] = advice.outcome(result)
        for sub in result.rules:
            tags[f"{base}/{sub.name}"] = sub.verdict
            tags[f"{base}/{sub.name}/why"] = advice.reason(sub)[:MAX_TAG_VALUE_CHARS]
            for key, field in (("violations", "Violations"), ("datapoints", "Datapoints"),
                               ("windows_met", "RuleTriggered")):
                value = sub.report.get(field)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    metrics[f"{PREFIX}/{sub.name}/{key}"] = float(value)
    return tags, metrics


def export(target: MlflowTarget, results: list[RuleResult], windows: int, files: Mapping[str, Mapping[str, bytes]]
           ) -> str:
    """Write tags, metrics and ``files`` (``{folder: {file name: body}}``, folder "" for ``debugger/`` itself) into
    the run; returns where (for logs)."""
    client = _client(target.tracking_uri)
    from mlflow.entities import Metric, RunTag

    try:
        client.get_run(target.run_id)
    except Exception as exc:  # MlflowException: unknown run, refused, unreachable
        raise MlflowExportError(f"MLflow run {target.run_id} on {target.tracking_uri or 'the default tracking URI'}: "
                                f"{exc}") from exc
    tags, metrics = run_contents(results, windows)
    now = int(time.time() * 1000)
    client.log_batch(target.run_id, metrics=[Metric(k, v, now, windows) for k, v in metrics.items()],
                     tags=[RunTag(k, v) for k, v in tags.items()])
    with tempfile.TemporaryDirectory() as tmp:
        for n, (rule, bodies) in enumerate(files.items()):
            folder = os.path.join(tmp, str(n))
            os.makedirs(folder)
            for name, body in bodies.items():
                with open(os.path.join(folder, os.path.basename(name)), "wb") as handle:
                    handle.write(body)
            path = f"{ARTIFACT_FOLDER}/{rule}" if rule else ARTIFACT_FOLDER
            try:
                client.log_artifacts(target.run_id, folder, artifact_path=path)
            except Exception as exc:  # the artifact store (S3 for SageMaker's servers) refused or is unreachable
                raise MlflowExportError(f"MLflow run {target.run_id}: the artifacts could not be written: {exc}") from exc
    return f"MLflow run {target.run_id}"


def deliver(description: Mapping[str, Any], results: list[RuleResult], windows: int,
            reports: list[tuple[str, bytes, str]], allowed_arn: str | None) -> str | None:
    """The Lambda's export after the reports are written: into the job's own run, on the one tracking server the
    function may write (``allowed_arn``). Returns why nothing was written (None: written); never raises, so a
    tracking server that is down never costs the job its verdicts (the next run writes them again)."""
    if not allowed_arn:
        return "no MLflow export configured"
    target = MlflowTarget.from_description(description)
    if target is None:
        return "the job has no MLflow run (no MlflowConfig, or SageMaker has not created the run yet)"
    if target.tracking_uri != allowed_arn:
        return f"the job's tracking server {target.tracking_uri} is not the one this evaluator may write"
    os.environ.setdefault("SAGEMAKER_PRESIGNED_URL_UPLOAD_ENABLED", "false")
    files: dict[str, dict[str, bytes]] = {}
    for key, body, _content_type in reports:
        parts = key.split("/")
        if len(parts) >= 3 and parts[-1] in (HTML_NAME, SUMMARY_NAME):
            files.setdefault(parts[-3], {})[parts[-1]] = body
    try:
        export(target, results, windows, files)
    except Exception as exc:  # noqa: BLE001 - logged by the caller; the verdicts are in S3 and on the bus already
        return f"{type(exc).__name__}: {exc}"
    return None
