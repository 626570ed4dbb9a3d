"""What the evaluator tells the world: EventBridge status-change events and one EMF metric per rule."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from .contract_shared import CONTINUATION_DETAIL_TYPE as CONTINUATION
from .contract_shared import DEFAULT_NAMESPACE, EVENT_SOURCE
from .contract_shared import RULE_GAUGE_METRIC as GAUGE_NAME
from .contract_shared import RULE_ISSUES_FOUND_METRIC as METRIC_NAME
from .contract_shared import STATUS_CHANGE_DETAIL_TYPE as STATUS_CHANGE
from .engine import STATUS_ISSUES, RuleResult


def status_change_event(job_name: str, job_arn: str, statuses: list[dict[str, Any]], bus: str) -> dict[str, Any]:
    """A PutEvents entry whose detail mirrors DescribeTrainingJob: job name and ARN plus rule statuses."""
    detail = {"TrainingJobName": job_name, "TrainingJobArn": job_arn, "ProfilerRuleEvaluationStatuses": statuses}
    return {"Source": EVENT_SOURCE, "DetailType": STATUS_CHANGE, "Detail": json.dumps(detail), "Resources": [job_arn],
            "EventBusName": bus}


def continuation_event(job_name: str, bus: str) -> dict[str, Any]:
    return {"Source": EVENT_SOURCE, "DetailType": CONTINUATION, "Detail": json.dumps({"TrainingJobName": job_name}),
            "EventBusName": bus}


def put_events(events_client: Any, entries: list[dict[str, Any]]) -> None:
    """PutEvents in batches of 10; a partially failed batch raises so the run does not commit its state."""
    for offset in range(0, len(entries), 10):
        batch = entries[offset : offset + 10]
        response = events_client.put_events(Entries=batch)
        if response.get("FailedEntryCount"):
            codes = sorted({e.get("ErrorCode", "?") for e in response.get("Entries", []) if e.get("ErrorCode")})
            raise RuntimeError(f"EventBridge rejected {response['FailedEntryCount']} event(s): {', '.join(codes)}")


def emf_lines(job_name: str, results: list[RuleResult], namespace: str = DEFAULT_NAMESPACE,
              now_ms: int | None = None) -> list[str]:
    """CloudWatch embedded-metric-format log lines: ``RuleIssuesFound`` (1 or 0) per evaluated rule, and
    ``RuleGauge`` for the rules that measure one number against their threshold (the health rules)."""
    stamp = int(time.time() * 1000) if now_ms is None else now_ms
    lines = []
    for result in results:
        for sub in result.rules:
            if sub.verdict not in (STATUS_ISSUES, "NoIssuesFound"):
                continue  # not applicable: no data, no metric
            doc = {
                "_aws": {
                    "Timestamp": stamp,
                    "CloudWatchMetrics": [{
                        "Namespace": namespace,
                        "Dimensions": [["Rule"], ["TrainingJobName", "Rule"]],
                        "Metrics": [{"Name": METRIC_NAME, "Unit": "Count"}],
                    }],
                },
                "TrainingJobName": job_name,
                "Rule": sub.name,
                "RuleConfigurationName": result.configuration_name,
                METRIC_NAME: 1 if sub.verdict == STATUS_ISSUES else 0,
                "Violations": sub.report.get("Violations", 0),
            }
            gauge = sub.report.get("Gauge")
            if isinstance(gauge, (int, float)) and not isinstance(gauge, bool):
                doc["_aws"]["CloudWatchMetrics"][0]["Metrics"].append({"Name": GAUGE_NAME, "Unit": "None"})
                doc[GAUGE_NAME] = gauge
            lines.append(json.dumps(doc))
    return lines


def emit_emf(lines: list[str], write: Callable[[str], Any] = print) -> None:
    for line in lines:
        write(line)
