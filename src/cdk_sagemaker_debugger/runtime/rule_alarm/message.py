"""What a person reads: the SNS subject, the e-mail body, the SMS text, and the facts they are made of."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from .contract_shared import machine_reported, reported_text
from .ledger import Transition
from .reports import MAX_TEXT_CHARS as MAX_FINDING_CHARS
from .reports import Findings

MAX_SUBJECT_CHARS = 99  # SNS: "less than 100 characters", ASCII, no line breaks
MAX_SMS_CHARS = 160  # one SMS segment; longer texts are split and cost more
_CONSOLE_DOMAINS = {
    "aws": "https://{region}.console.aws.amazon.com",
    "aws-cn": "https://{region}.console.amazonaws.cn",
    "aws-us-gov": "https://console.amazonaws-us-gov.com",
}
_STATUS_WORDS = {
    "IssuesFound": "found issues",
    "Error": "could not evaluate",
    "NoIssuesFound": "found no issues",
    "InProgress": "is evaluating",
    "Stopping": "is stopping",
    "Stopped": "was stopped",
}
STOP_OUTCOME_TEXT = {
    "requested": "StopTrainingJob was called; the job is stopping.",
    "already-ending": "The job was already stopping or finished; nothing to stop.",
    "not-running": "The job was no longer running; nothing to stop.",
    "outside-prefix": "Not stopped: the job name is outside the prefix this alarm may stop.",
}


@dataclass(frozen=True)
class JobView:
    """The parts of a DescribeTrainingJob response the alarm needs."""

    name: str
    arn: str
    status: str
    secondary_status: str | None
    output_s3_uri: str | None
    rule_output_paths: Mapping[str, str]

    @classmethod
    def from_description(cls, description: Mapping[str, Any]) -> JobView:
        rule_paths: dict[str, str] = {}
        for key in ("ProfilerRuleConfigurations", "DebugRuleConfigurations"):
            for config in description.get(key) or ():
                name, path = config.get("RuleConfigurationName"), config.get("S3OutputPath")
                if isinstance(name, str) and isinstance(path, str) and path:
                    rule_paths[name] = path
        output = (description.get("OutputDataConfig") or {}).get("S3OutputPath")
        return cls(
            name=description["TrainingJobName"],
            arn=description["TrainingJobArn"],
            status=description["TrainingJobStatus"],
            secondary_status=description.get("SecondaryStatus"),
            output_s3_uri=output if isinstance(output, str) and output else None,
            rule_output_paths=rule_paths,
        )

    @property
    def region(self) -> str:
        return self.arn.split(":")[3]

    @property
    def partition(self) -> str:
        return self.arn.split(":")[1]


@dataclass(frozen=True)
class Notification:
    subject: str
    email: str
    sms: str
    attributes: Mapping[str, str]
    console_url: str
    report_location: str | None

    def publish_request(self, topic_arn: str) -> dict[str, Any]:
        """Keyword arguments for ``sns.publish``: one message per protocol, attributes for subscription filters."""
        return {
            "TopicArn": topic_arn,
            "Subject": self.subject,
            "MessageStructure": "json",
            "Message": json.dumps({"default": self.email, "email": self.email, "sms": self.sms}),
            "MessageAttributes": {
                name: {"DataType": "String", "StringValue": value} for name, value in self.attributes.items() if value
            },
        }


def console_url(job: JobView) -> str:
    domain = _CONSOLE_DOMAINS.get(job.partition, _CONSOLE_DOMAINS["aws"]).format(region=job.region)
    return f"{domain}/sagemaker/home?region={job.region}#/jobs/{job.name}"


def s3_console_url(job: JobView, bucket: str, key: str) -> str:
    """The S3 console's page for one object (open it, then Open or Download)."""
    domain = _CONSOLE_DOMAINS.get(job.partition, _CONSOLE_DOMAINS["aws"]).format(region=job.region)
    return f"{domain}/s3/object/{quote(bucket, safe='')}?region={job.region}&prefix={quote(key, safe='/')}"


def report_location(job: JobView, rule: str) -> str | None:
    """Where the rule writes its report: its own S3OutputPath, else ``<output>/<job>/rule-output/<rule>/``."""
    if rule in job.rule_output_paths:
        return job.rule_output_paths[rule]
    if job.output_s3_uri is None:
        return None
    return f"{job.output_s3_uri.rstrip('/')}/{job.name}/rule-output/{rule}/"


def compose(job: JobView, transition: Transition, *, stop_outcome: str | None,
            findings: Findings | None = None) -> Notification:
    """Build the notification for one transition; ``findings`` (the evaluator's summary) adds why and what to try."""
    when = _readable_time(transition.modified_at)
    url = console_url(job)
    location = report_location(job, transition.rule)
    verb = _STATUS_WORDS.get(transition.status, transition.status)
    rule = reported_text(transition.rule, 256)
    lines = [f"Rule {rule} {verb} on SageMaker training job {job.name}.", ""]
    lines += _findings_lines(findings)
    lines += [
        f"Training job:  {job.name} ({job.status}{', ' + job.secondary_status if job.secondary_status else ''})",
        f"Rule:          {rule}",
        f"Status:        {transition.status}",
        f"When:          {when}",
        # text from data (the evaluator's or SageMaker's words): one line, short, and said to be machine-reported
        f"Details:       {machine_reported(transition.details) if transition.details else 'none given'}",
    ]
    if stop_outcome is not None:
        lines.append(f"Action:        {STOP_OUTCOME_TEXT.get(stop_outcome, stop_outcome)}")
    lines.append(f"Console:       {url}")
    if findings is not None and findings.html_report is not None:
        lines.append(f"HTML report:   {s3_console_url(job, *findings.html_report)}")
    lines += [
        f"Rule report:   {reported_text(location, 1024) if location else 'unknown (the job has no S3 output path)'}",
        f"Reported by:   {transition.reported_by}",
    ]
    stopped = " Training is being stopped." if stop_outcome == "requested" else ""
    why = f" {findings.reasons[0][0]}: {findings.reasons[0][1]}" if findings and findings.reasons else ""
    sms = reported_text(f"{transition.status}: rule {rule} on {job.name} at {when}.{stopped}{why}", 10 * MAX_SMS_CHARS)
    return Notification(
        subject=subject_line(transition.status, transition.rule, job.name),
        email="\n".join(lines) + "\n",
        sms=_truncate(sms, MAX_SMS_CHARS),
        attributes={"job": job.name, "rule": transition.rule, "status": transition.status},
        console_url=url,
        report_location=location,
    )


def _findings_lines(findings: Findings | None) -> list[str]:
    """Why (the evaluator's one-line reason per rule that found issues) and what to try, before the facts."""
    if findings is None:
        return []
    text = reported_text  # each as one line: the summary was read from S3 (reports.py cleans it too)
    lines = [text(findings.headline, MAX_FINDING_CHARS), ""] if findings.headline else []
    if findings.reasons:
        lines.append("Why (machine-reported by the evaluator):")
        lines += [f"  - {text(rule, 256)}: {text(reason, MAX_FINDING_CHARS)}" for rule, reason in findings.reasons]
        lines.append("")
    if findings.tips:
        lines.append("What to try:")
        lines += [f"  - {text(rule, 256)}: {text(tip, MAX_FINDING_CHARS)}" for rule, tip in findings.tips]
        lines.append("")
    return lines


def subject_line(status: str, rule: str, job_name: str) -> str:
    """``[IssuesFound] LowGPUUtilization on my-job``, ASCII only and never longer than SNS allows."""
    rule_text = _ascii(rule)
    fixed = f"[{status}]  on {job_name}"
    room = MAX_SUBJECT_CHARS - len(fixed)
    if len(rule_text) > room:
        rule_text = _truncate(rule_text, max(room, 4))
    return _truncate(f"[{status}] {rule_text} on {job_name}", MAX_SUBJECT_CHARS)


def _ascii(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    cleaned = "".join(ch if ch.isprintable() else " " for ch in folded).strip()
    return cleaned or "?"


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _readable_time(iso_text: str | None) -> str:
    if not iso_text:
        return "time not reported"
    try:
        return datetime.fromisoformat(iso_text).strftime("%Y-%m-%d %H:%M:%S UTC")
    except ValueError:
        return iso_text
