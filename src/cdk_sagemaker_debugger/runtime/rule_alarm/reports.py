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
from typing import Any

from botocore.exceptions import ClientError

from .events import MalformedEvent, RuleStatus, rule_status_from_entry

# The evaluator's layout (runtime/evaluator/lambda_handler.py and report.py; a test checks they agree).
REPORT_FOLDER = "evaluator-output"
SUMMARY_NAME = "evaluation-summary.json"
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


def reported_status(s3: Any, description: Mapping[str, Any], rule: str) -> tuple[RuleStatus | None, str]:
    """The evaluator's status of ``rule`` (status, details, and as time when its summary was written), and where it
    was read (or why it could not be).

    A missing or unreadable summary gives None: there is nothing to act on. Other S3 errors (throttling, a network
    problem) are raised, so the event is retried."""
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
            try:
                status = rule_status_from_entry({**entry, "LastModifiedTime": response.get("LastModified")},
                                                reported_by="RuleEvaluator")
            except MalformedEvent as error:
                return None, f"{where}: {error}"
            return status, where
    return None, f"{where}: no entry for the rule"
