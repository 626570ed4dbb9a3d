"""An offline check of a CloudWatch dashboard body: what PutDashboard would accept, and metrics that exist.

Structure from the CloudWatch API Reference, "Dashboard Body Structure and Syntax"
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html): 0-500
widgets; ``type``, ``x`` (0-23), ``y``, ``width`` (1-24), ``height`` (1-1000); a metric widget has ``metrics`` (1-100
arrays: ``[namespace, metric name, dimension name, value, ..., {rendering properties}]`` or ``[{expression, id, ...}]``),
``region``, ``period`` (seconds: 1, 5, 10, 30 or a multiple of 60), ``stat``, ``view``, ``yAxis``, ``annotations``,
``legend``; a text widget has ``markdown``; an alarm widget has ``alarms`` (1-100 alarm ARNs).
SEARCH syntax and limits from the CloudWatch User Guide, "CloudWatch search expression syntax"
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/search-expression-syntax.html): ``SEARCH('{Namespace,
DimensionName,...} SearchTerm', 'Statistic', Period)``, at most 1024 characters, at most 100 per graph.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from cdk_sagemaker_debugger.model.contract import (
    GPU_WATCH_DIMENSION,
    LOWEST_GPU_UTILIZATION_METRIC,
    TRAINING_HOSTS_METRIC,
)
from cdk_sagemaker_debugger.runtime.evaluator.publish import METRIC_NAME as RULE_METRIC

#: Metric names and dimensions per namespace, as documented by each service (and, for this project's own namespace,
#: by the code that publishes them).
DOCUMENTED_METRICS: Mapping[str, frozenset[str]] = {
    # Amazon SageMaker AI Developer Guide, "Amazon SageMaker AI metrics in Amazon CloudWatch", training job instance
    # metrics (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html): dimension Host.
    "/aws/sagemaker/TrainingJobs": frozenset(
        {"CPUUtilization", "MemoryUtilization", "GPUUtilization", "GPUMemoryUtilization", "DiskUtilization"}),
    # AWS Lambda Developer Guide, "Types of metrics for Lambda functions"
    # (https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html).
    "AWS/Lambda": frozenset({
        "Invocations", "Errors", "DeadLetterErrors", "DestinationDeliveryFailures", "Throttles",
        "OversizedRecordCount", "ProvisionedConcurrencyInvocations", "ProvisionedConcurrencySpilloverInvocations",
        "RecursiveInvocationsDropped", "Duration", "PostRuntimeExtensionsDuration", "IteratorAge", "OffsetLag",
        "ConcurrentExecutions", "ProvisionedConcurrentExecutions", "ProvisionedConcurrencyUtilization",
        "UnreservedConcurrentExecutions", "AsyncEventsReceived", "AsyncEventAge", "AsyncEventsDropped"}),
    # Amazon SQS Developer Guide, "Available CloudWatch metrics for Amazon SQS"
    # (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-available-cloudwatch-metrics.html).
    "AWS/SQS": frozenset({
        "ApproximateAgeOfOldestMessage", "ApproximateNumberOfGroupsWithInflightMessages",
        "ApproximateNumberOfMessagesDelayed", "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesVisible", "NumberOfDeduplicatedSentMessages", "NumberOfEmptyReceives",
        "NumberOfMessagesDeleted", "NumberOfMessagesReceived", "NumberOfMessagesSent", "SentMessageSize"}),
    # AWS Step Functions Developer Guide, "Monitoring Step Functions metrics using Amazon CloudWatch", execution
    # metrics (https://docs.aws.amazon.com/step-functions/latest/dg/procedure-cw-metrics.html).
    "AWS/States": frozenset({
        "ExecutionTime", "ExecutionThrottled", "ExecutionsAborted", "ExecutionsFailed", "ExecutionsStarted",
        "ExecutionsSucceeded", "ExecutionsTimedOut", "ExecutionsRedriven", "RedrivenExecutionsAborted",
        "RedrivenExecutionsFailed", "RedrivenExecutionsSucceeded", "RedrivenExecutionsTimedOut"}),
    # This project: runtime/evaluator/publish.py (RuleIssuesFound, docs/evaluator.md) and model/contract.py (the GPU watch).
    "CdkSageMakerDebugger": frozenset({RULE_METRIC, LOWEST_GPU_UTILIZATION_METRIC, TRAINING_HOSTS_METRIC}),
}
DOCUMENTED_DIMENSIONS: Mapping[str, frozenset[str]] = {
    "/aws/sagemaker/TrainingJobs": frozenset({"Host"}),
    "AWS/Lambda": frozenset({"FunctionName", "Resource", "ExecutedVersion"}),
    "AWS/SQS": frozenset({"QueueName"}),
    "AWS/States": frozenset({"StateMachineArn"}),
    "CdkSageMakerDebugger": frozenset({"Rule", "TrainingJobName", GPU_WATCH_DIMENSION}),
}

WIDGET_TYPES = {"metric", "text", "log", "alarm", "explorer", "custom"}
VIEWS = {"timeSeries", "singleValue", "gauge", "bar", "pie", "table"}
STATISTIC = re.compile(r"^(SampleCount|Average|Sum|Minimum|Maximum|IQM|(p|tm|wm|tc|ts|pr)\d{1,2}(\.\d+)?)$")
RENDERING_KEYS = {"color", "label", "period", "stat", "visible", "yAxis", "id", "accountId", "region"}
EXPRESSION_KEYS = {"expression", "label", "id", "period", "visible", "yAxis", "color", "accountId", "region"}
WIDGET_KEYS = {"type", "x", "y", "width", "height", "properties"}
METRIC_PROPERTY_KEYS = {"metrics", "accountId", "annotations", "liveData", "legend", "period", "region", "stat",
                        "title", "view", "stacked", "yAxis", "setPeriodToTimeRange", "sparkline", "trend", "labels",
                        "table", "singleValueFullPrecision", "timezone", "start", "end"}
SEARCH = re.compile(r"^SEARCH\('\s*(?:\{(?P<schema>[^}]*)\})?(?P<term>[^']*)',\s*'(?P<stat>[^']+)',\s*(?P<period>\d+)\)$")
ID = re.compile(r"^[a-z][a-zA-Z0-9_]*$")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
COLOR = re.compile(r"^#[0-9a-fA-F]{6}$")
ISO_RELATIVE = re.compile(r"^-P(?:\d+[WD])*(?:T(?:\d+[HMS])+)?$")
ALARM_ARN = re.compile(r"^arn:aws[a-z-]*:cloudwatch:[a-z0-9-]+:\d{12}:alarm:.+$")


def problems(body: Mapping[str, Any]) -> list[str]:
    """Everything in ``body`` that CloudWatch would refuse or that names an undocumented metric ([] when none)."""
    found = [f"unknown top-level key {k!r}" for k in body if k not in {"start", "end", "periodOverride", "widgets",
                                                                          "variables"}]
    if "start" in body and not ISO_RELATIVE.match(str(body["start"])):
        found.append(f"start {body['start']!r} is not a relative ISO 8601 duration")
    widgets = body.get("widgets")
    if not isinstance(widgets, list) or not 0 <= len(widgets) <= 500:
        return [*found, "widgets must be a list of 0-500 widgets"]
    for index, widget in enumerate(widgets):
        found += [f"widget {index} ({_title(widget)}): {p}" for p in _widget(widget)]
    found += _overlaps(widgets)
    return found


def _title(widget: Mapping[str, Any]) -> str:
    return str(widget.get("properties", {}).get("title") or widget.get("type"))


def _widget(widget: Mapping[str, Any]) -> Iterator[str]:
    yield from (f"unknown key {k!r}" for k in widget if k not in WIDGET_KEYS)
    if widget.get("type") not in WIDGET_TYPES:
        yield f"type {widget.get('type')!r} is not one of {sorted(WIDGET_TYPES)}"
    x, y, width, height = (widget.get(k) for k in ("x", "y", "width", "height"))
    if not all(isinstance(v, int) for v in (x, y, width, height)):
        yield "x, y, width and height must be integers"
        return
    if not (0 <= x <= 23 and y >= 0 and 1 <= width <= 24 and 1 <= height <= 1000 and x + width <= 24):
        yield f"position x={x} y={y} width={width} height={height} is outside the 24-column grid"
    properties = widget.get("properties")
    if not isinstance(properties, dict):
        yield "properties must be an object"
        return
    kind = widget["type"]
    if kind == "metric":
        yield from _metric_widget(properties)
    elif kind == "text":
        if not isinstance(properties.get("markdown"), str) or not properties["markdown"].strip():
            yield "a text widget needs markdown"
    elif kind == "alarm":
        alarms = properties.get("alarms")
        if not isinstance(alarms, list) or not 1 <= len(alarms) <= 100:
            yield "an alarm widget needs 1-100 alarm ARNs"
        else:
            yield from (f"{a!r} is not an alarm ARN" for a in alarms if not ALARM_ARN.match(str(a)))


def _metric_widget(properties: Mapping[str, Any]) -> Iterator[str]:
    yield from (f"unknown property {k!r}" for k in properties if k not in METRIC_PROPERTY_KEYS)
    if not REGION.match(str(properties.get("region"))):
        yield f"region {properties.get('region')!r} is missing or invalid"
    if "period" in properties:
        yield from _period(properties["period"], "period")
    if "stat" in properties and not STATISTIC.match(str(properties["stat"])):
        yield f"stat {properties['stat']!r} is not a CloudWatch statistic"
    if properties.get("view", "timeSeries") not in VIEWS:
        yield f"view {properties.get('view')!r} is not one of {sorted(VIEWS)}"
    metrics = properties.get("metrics")
    if not isinstance(metrics, list) or not 1 <= len(metrics) <= 100:
        yield "metrics must be a list of 1-100 metric arrays"
        return
    ids = [item[0].get("id") for item in metrics if isinstance(item, list) and item and isinstance(item[0], dict)]
    ids += [item[-1].get("id") for item in metrics if isinstance(item, list) and item and isinstance(item[-1], dict)
            and not isinstance(item[0], dict)]
    declared = [i for i in ids if i is not None]
    if len(declared) != len(set(declared)):
        yield f"metric ids are not unique: {declared}"
    searches = 0
    for position, item in enumerate(metrics):
        for problem in _metric_item(item, set(declared)):
            yield f"metrics[{position}]: {problem}"
        searches += isinstance(item, list) and bool(item) and isinstance(item[0], dict) and "SEARCH(" in str(
            item[0].get("expression"))
    if searches > 100:
        yield f"{searches} SEARCH expressions in one graph (at most 100)"
    yield from _y_axis(properties.get("yAxis", {}))
    yield from _annotations(properties.get("annotations", {}))
    if properties.get("legend", {}).get("position", "bottom") not in {"right", "bottom", "hidden"}:
        yield f"legend position {properties['legend']['position']!r} is invalid"


def _period(value: Any, where: str) -> Iterator[str]:
    if not isinstance(value, int) or not (value in (1, 5, 10, 30) or (value >= 60 and value % 60 == 0)):
        yield f"{where} {value!r} must be 1, 5, 10, 30 or a multiple of 60 seconds"


def _metric_item(item: Any, ids: set[str]) -> Iterator[str]:
    if not isinstance(item, list) or not item:
        yield "must be a non-empty array"
        return
    if isinstance(item[0], dict):
        if len(item) != 1:
            yield "an expression item holds exactly one object"
        yield from _expression(item[0], ids)
        return
    rendering = item[-1] if isinstance(item[-1], dict) else {}
    names = item[:-1] if rendering else item
    if len(names) < 2 or len(names) % 2 or not all(isinstance(n, str) and n for n in names):
        yield f"expected [namespace, metric name, (dimension name, value)*, {{options}}], got {item!r}"
        return
    yield from _known(names[0], names[1], names[2::2])
    yield from (f"unknown rendering key {k!r}" for k in rendering if k not in RENDERING_KEYS)
    yield from _rendering(rendering)


def _expression(item: Mapping[str, Any], ids: set[str]) -> Iterator[str]:
    yield from (f"unknown expression key {k!r}" for k in item if k not in EXPRESSION_KEYS)
    expression = item.get("expression")
    if not isinstance(expression, str) or not expression.strip():
        yield "expression must be a non-empty string"
        return
    if "id" in item and not ID.match(str(item["id"])):
        yield f"id {item['id']!r} must start with a lower-case letter and hold letters, digits and _"
    yield from _rendering(item)
    if "SEARCH(" in expression:
        yield from _search(expression)
        return
    for name in re.findall(r"\b([a-z][a-zA-Z0-9_]*)\b", expression):
        if name not in ids and name.upper() != name:
            yield f"expression {expression!r} uses {name!r}, which no metric of the widget declares as its id"


def _search(expression: str) -> Iterator[str]:
    if len(expression) > 1024:
        yield f"SEARCH is {len(expression)} characters (at most 1024)"
    match = SEARCH.match(expression)
    if match is None:
        yield f"{expression!r} is not SEARCH('{{Namespace,Dimension,...}} term', 'Statistic', period)"
        return
    if not STATISTIC.match(match["stat"]):
        yield f"SEARCH statistic {match['stat']!r} is not a CloudWatch statistic"
    yield from _period(int(match["period"]), "SEARCH period")
    schema = [part.strip().strip('"') for part in (match["schema"] or "").split(",") if part.strip()]
    metric = re.search(r'MetricName="([^"]+)"', match["term"])
    if not schema or metric is None:
        yield f"{expression!r} should name its namespace schema and MetricName=\"...\""
        return
    yield from _known(schema[0], metric[1], schema[1:])
    for designator in re.findall(r'(\w+)=', match["term"]):
        if designator not in {"MetricName", "Namespace", *schema[1:]}:
            yield f"SEARCH filters on {designator!r}, which is not a dimension of its schema {schema}"


def _known(namespace: str, metric: str, dimensions: list[str]) -> Iterator[str]:
    if namespace not in DOCUMENTED_METRICS:
        yield f"namespace {namespace!r} has no documented metric list here"
        return
    if metric not in DOCUMENTED_METRICS[namespace]:
        yield f"{namespace} has no documented metric {metric!r}"
    for dimension in dimensions:
        if dimension not in DOCUMENTED_DIMENSIONS[namespace]:
            yield f"{namespace} has no documented dimension {dimension!r}"


def _rendering(options: Mapping[str, Any]) -> Iterator[str]:
    if "period" in options:
        yield from _period(options["period"], "period")
    if "stat" in options and not STATISTIC.match(str(options["stat"])):
        yield f"stat {options['stat']!r} is not a CloudWatch statistic"
    if "color" in options and not COLOR.match(str(options["color"])):
        yield f"color {options['color']!r} is not #rrggbb"
    if options.get("yAxis", "left") not in {"left", "right"}:
        yield f"yAxis {options['yAxis']!r} must be left or right"


def _y_axis(axes: Mapping[str, Any]) -> Iterator[str]:
    for side, axis in axes.items():
        if side not in {"left", "right"} or not isinstance(axis, dict):
            yield f"yAxis.{side} is invalid"
            continue
        yield from (f"yAxis.{side} has unknown key {k!r}" for k in axis if k not in {"min", "max", "label", "showUnits"})
        low, high = axis.get("min"), axis.get("max")
        if low is not None and high is not None and not low < high:
            yield f"yAxis.{side} min {low} is not below max {high}"


def _annotations(annotations: Mapping[str, Any]) -> Iterator[str]:
    for annotation in annotations.get("horizontal", []):
        if not isinstance(annotation.get("value"), (int, float)):
            yield f"horizontal annotation {annotation!r} needs a numeric value"
        yield from (f"annotation key {k!r} is unknown" for k in annotation
                    if k not in {"value", "label", "color", "fill", "visible", "yAxis"})
        yield from _rendering({k: v for k, v in annotation.items() if k in {"color", "yAxis"}})


def _overlaps(widgets: list[Mapping[str, Any]]) -> list[str]:
    cells: dict[tuple[int, int], int] = {}
    found = []
    for index, widget in enumerate(widgets):
        x, y, w, h = (widget.get(k, 0) for k in ("x", "y", "width", "height"))
        if not all(isinstance(v, int) for v in (x, y, w, h)):
            continue
        for cell in ((cx, cy) for cx in range(x, x + w) for cy in range(y, y + h)):
            if cell in cells:
                found.append(f"widgets {cells[cell]} and {index} overlap at {cell}")
                break
            cells[cell] = index
    return found
