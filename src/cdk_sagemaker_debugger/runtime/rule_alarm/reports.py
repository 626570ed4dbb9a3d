"""Read a RuleEvaluator verdict from the report the evaluator wrote: an evaluator event only says "look again".

The evaluator writes ``<S3OutputPath>/<job>/rule-output/<RuleConfigurationName>/evaluator-output/evaluation-summary.json``
before it publishes a status change, and the training job's execution role may not write there (ProfiledTrainingJob
denies it). The status, its details and its time come from that summary (the time is when the evaluator wrote it),
never from the event, so an event delivered by anyone else (a direct ``lambda:InvokeFunction``, a replay) can only
make the alarm read what the evaluator wrote. A verdict whose summary gives another status than the event claims is
logged: the event was not the evaluator's, or it is out of date (the current status has its own event).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .contract_shared import reported_text
from .events import MalformedEvent, RuleStatus, rule_status_from_entry

# The evaluator's layout (runtime/evaluator/lambda_handler.py and report.py; a test checks they agree).
REPORT_FOLDER = "evaluator-output"
SUMMARY_NAME = "evaluation-summary.json"
HTML_NAME = "profiler-report.html"
MAX_TEXT_CHARS = 400  # one reason or tip, as printed in the message
MAX_VERDICTS = 32  # ProfilerReport has eleven
MAX_SUMMARY_BYTES = 1_000_000
_UNREADABLE = frozenset({"NoSuchKey", "NoSuchBucket", "AccessDenied", "403", "404"})


def summary_location(description: Mapping[str, Any], rule: str) -> tuple[str, str] | None:
    """(bucket, key) of the evaluator's summary for ``rule`` of the described job, or None without an output path."""
    uri = (description.get("OutputDataConfig") or {}).get("S3OutputPath")
    job = description.get("TrainingJobName")
    if not isinstance(uri, str) or not uri.startswith("s3://") or not isinstance(job, str):
        return None
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    base = f"{prefix.strip('/')}/{job}/rule-output".lstrip("/")
    return (bucket, f"{base}/{rule}/{REPORT_FOLDER}/{SUMMARY_NAME}") if bucket else None


def _summary_entry(s3: Any, description: Mapping[str, Any], rule: str) -> tuple[dict[str, Any] | None, str]:
    """The evaluator summary's entry for ``rule`` and where it was read (or why it could not be).

    A missing or unreadable summary gives None. Other S3 errors (throttling, a network problem) are raised."""
    location = summary_location(description, rule)
    if location is None:
        return None, "the job has no S3 output path"
    bucket, key = location
    where = f"s3://{bucket}/{key}"
    try:
        response = s3.get_object(Bucket=bucket, Key=key)
        body = response["Body"].read(MAX_SUMMARY_BYTES + 1)
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        if code in _UNREADABLE:
            return None, f"{where}: {code}"
        raise
    if len(body) > MAX_SUMMARY_BYTES:
        return None, f"{where}: larger than {MAX_SUMMARY_BYTES} bytes"
    try:
        summary = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None, f"{where}: not JSON"
    entries = summary.get("rules") if isinstance(summary, dict) else None
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, dict) and entry.get("RuleConfigurationName") == rule:
            return {**entry, "LastModifiedTime": response.get("LastModified")}, where
    return None, f"{where}: no entry for the rule"


def reported_status(s3: Any, description: Mapping[str, Any], rule: str) -> tuple[RuleStatus | None, str]:
    """The evaluator's status of ``rule`` (status, details, and as time when its summary was written), and where it
    was read (or why it could not be).

    A missing or unreadable summary gives None: there is nothing to act on. Other S3 errors (throttling, a network
    problem) are raised, so the event is retried."""
    entry, where = _summary_entry(s3, description, rule)
    if entry is None:
        return None, where
    try:
        return rule_status_from_entry(entry, reported_by="RuleEvaluator"), where
    except MalformedEvent as error:
        return None, f"{where}: {error}"


@dataclass(frozen=True)
class Findings:
    """What the evaluator's summary says about a rule, for the message: its outcome in plain words, the reason of each
    rule that found issues, what to try, and where the HTML report is (bucket, key)."""

    headline: str | None
    reasons: tuple[tuple[str, str], ...]
    tips: tuple[tuple[str, str], ...]
    html_report: tuple[str, str] | None


def _text(value: Any) -> str | None:
    """A string from the summary, safe to print: one line without control characters, at most MAX_TEXT_CHARS."""
    if not isinstance(value, str):
        return None
    return reported_text(value, MAX_TEXT_CHARS) or None


def findings(s3: Any, description: Mapping[str, Any], rule: str) -> Findings | None:
    """The evaluator's findings for ``rule`` (None without a readable summary: a SageMaker rule, or an old one).
    Never raises: a message without findings is better than no message."""
    try:
        entry, _where = _summary_entry(s3, description, rule)
    except Exception:  # noqa: BLE001 - the message goes out without the findings
        return None
    if entry is None:
        return None
    reasons, tips = [], []
    verdicts = entry.get("Verdicts")
    for verdict in (verdicts if isinstance(verdicts, list) else [])[:MAX_VERDICTS]:
        if not isinstance(verdict, dict) or verdict.get("Verdict") != "IssuesFound":
            continue
        name, why = _text(verdict.get("Rule")), _text(verdict.get("Reason"))
        if name and why:
            reasons.append((name, why))
        listed = verdict.get("WhatToTry")
        for tip in (listed if isinstance(listed, list) else [])[:2]:
            if name and _text(tip):
                tips.append((name, _text(tip) or ""))
    location = summary_location(description, rule)
    html = (location[0], location[1].rsplit("/", 1)[0] + "/" + HTML_NAME) if location else None
    return Findings(_text(entry.get("Headline")), tuple(reasons), tuple(tips), html)
