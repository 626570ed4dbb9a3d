"""The dashboard's widgets for the health rules: one per rule in the rule set, its gauge per job with the thresholds.

Each health rule publishes ``RuleGauge`` (model/contract.py) in the unit of its threshold; the widget searches it for
the family's jobs and draws every configured value of the threshold parameter as a horizontal line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch

from ..model.contract import RULE_GAUGE_METRIC
from ..model.health_rules import HEALTH_RULE_SPECS

#: rule -> (widget title, y-axis label, the parameter drawn as the threshold, scale from parameter to gauge units)
GAUGES: Mapping[str, tuple[str, str, str, float]] = {
    "TrainingHang": ("TrainingHang: minutes since the most stalled rank progressed", "minutes", "minutes", 1.0),
    "Straggler": ("Straggler: slowest rank's data wait + forward, times the fastest", "ratio", "threshold", 1.0),
    "GPUHealth": ("GPUHealth: samples of the most throttled GPU", "%", "throttle_percent", 1.0),
    "DataWait": ("DataWait: highest share of a rank's time waiting for data", "%", "threshold", 1.0),
}


def _configured(configurations: Sequence[Mapping[str, Any]]) -> list[str]:
    present = {c.get("rule_to_invoke") for c in configurations}
    return [rule for rule in HEALTH_RULE_SPECS if rule in present]


def gauge_search(namespace: str, rule: str, job_name_prefix: str, period: cdk.Duration) -> cloudwatch.IMetric:
    schema = namespace if re.fullmatch(r"[A-Za-z0-9_]+", namespace) else f'"{namespace}"'
    return cloudwatch.SearchExpression(
        expression=f"SEARCH('{{{schema},Rule,TrainingJobName}} MetricName=\"{RULE_GAUGE_METRIC}\" Rule=\"{rule}\" "
        f"TrainingJobName={job_name_prefix.rstrip('-')}', 'Maximum', {int(period.to_seconds())})",
        label="${PROP('Dim.TrainingJobName')}", period=period)


def health_rule_rows(configurations: Sequence[Mapping[str, Any]], namespace: str, job_name_prefix: str,
                     thresholds: Callable[..., dict[float, list[str]]], period: cdk.Duration
                     ) -> list[list[cloudwatch.IWidget]]:
    """Rows of up to four widgets, one per health rule of the rule set (none when the set has none)."""
    rules = _configured(configurations)
    widgets: list[cloudwatch.IWidget] = []
    for rule in rules:
        title, unit, parameter, scale = GAUGES[rule]
        annotations = [cloudwatch.HorizontalAnnotation(value=value * scale, color=cloudwatch.Color.ORANGE,
                                                       label=f"{rule} {parameter} ({', '.join(names)})")
                       for value, names in sorted(thresholds(configurations, rule, parameter).items())]
        widgets.append(cloudwatch.GraphWidget(
            title=title, left=[gauge_search(namespace, rule, job_name_prefix, period)], left_annotations=annotations,
            left_y_axis=cloudwatch.YAxisProps(min=0, label=unit, show_units=False), period=period,
            width=24 // len(rules), height=6, legend_position=cloudwatch.LegendPosition.BOTTOM))
    return [widgets] if widgets else []
