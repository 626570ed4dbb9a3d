"""Report files: ``profiler-reports/<Rule>.json`` in the managed schema, a summary, and a plain-text verdict table."""

from __future__ import annotations

import json
import math
from typing import Any

from . import advice
from .engine import RuleResult, SubRuleResult

REPORTS_FOLDER = "profiler-reports"
HTML_NAME = "profiler-report.html"
SUMMARY_NAME = "evaluation-summary.json"


def _clean(value: Any) -> Any:
    """NaN and infinity are not JSON; the managed writer would emit them, readers choke on them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def report_json(sub: SubRuleResult) -> str:
    """One rule's report, key order and number formatting as the managed container writes it."""
    return json.dumps(_clean(sub.report))


def report_files(results: list[RuleResult]) -> dict[str, str]:
    """``{"profiler-reports/LowGPUUtilization.json": "..."}`` for every rule of every configured rule."""
    files: dict[str, str] = {}
    for result in results:
        for sub in result.rules:
            files[f"{REPORTS_FOLDER}/{sub.name}.json"] = report_json(sub)
    return files


def summary(results: list[RuleResult], diagnostics: dict[str, Any]) -> dict[str, Any]:
    """The evaluation summary: SageMaker's status per configured rule, the reader's outcome and headline, and per
    rule its verdict, the evaluator's reason and (for issues) what to try."""
    windows = int(diagnostics.get("windows", 0) or 0)
    return {
        "rules": [
            {
                "RuleConfigurationName": r.configuration_name,
                "RuleToInvoke": r.rule_to_invoke,
                "RuleEvaluationStatus": r.status,
                "Outcome": advice.outcome(r),
                "Headline": advice.headline(r, windows),
                "StatusDetails": r.status_details,
                "Verdicts": [{"Rule": s.name, "Verdict": s.verdict, "Reason": advice.reason(s),
                              "WhatToTry": advice.what_to_try(s)} for s in r.rules],
            }
            for r in results
        ],
        "Diagnostics": diagnostics,
    }


def verdict_table(results: list[RuleResult], windows: int | None = None) -> str:
    """The verdicts as a text table (the CLI prints it), each configured rule's outcome, and what to try."""
    rows = [("Rule", "Outcome", "Windows met", "Violations", "Datapoints", "Why")]
    for result in results:
        for sub in result.rules:
            r = sub.report
            rows.append((sub.name, advice.shown_verdict(sub), str(r["RuleTriggered"]), str(r["Violations"]), str(r["Datapoints"]),
                         advice.reason(sub)))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = []
    for n, row in enumerate(rows):
        cells = [row[i].ljust(widths[i]) if i < 2 else row[i].rjust(widths[i]) for i in range(5)]
        lines.append("  ".join(cells) + "  " + row[5])
        if n == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 6)
    for result in results:
        if windows is None:
            line = f"{result.configuration_name}: {advice.outcome(result)}"
            if result.status_details:
                line += f" ({result.status_details.strip()})"
        else:
            line = f"{result.configuration_name}: {advice.outcome(result)}. {advice.headline(result, windows)}"
        lines.append(line)
        for sub in result.rules:
            for tip in advice.what_to_try(sub):
                lines.append(f"  try ({sub.name}): {tip}")
    return "\n".join(lines)
