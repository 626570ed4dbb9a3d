"""Training-health rules on the job's algorithm metrics, read from CloudWatch: no SageMaker Debugger needed.

SageMaker parses the metrics of a job's ``AlgorithmSpecification.MetricDefinitions`` from its logs and publishes them
in the namespace ``/aws/sagemaker/TrainingJobs``, named as defined, with the single dimension ``TrainingJobName``
(the SageMaker Python SDK's ``TrainingJobAnalytics`` reads them exactly so, at a 60 s period: aws/sagemaker-python-sdk,
src/sagemaker/analytics.py). A query must name every dimension of a metric, so ``Host`` (used by the instance metrics
``CPUUtilization`` etc.) would find nothing. Each run reads the minutes that completed since the last one, keeps the
series in the evaluator's state, and judges every rule on the whole series (metric_checks.py), so the verdicts,
reports, events and RuleAlarm handling are those of the profiler rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from .engine import (
    STATUS_ERROR,
    STATUS_IN_PROGRESS,
    STATUS_ISSUES,
    STATUS_NO_ISSUES,
    VERDICT_NOT_APPLICABLE,
    RuleConfig,
    RuleResult,
    SubRuleResult,
    condition_met_details,
)
from .html_report import CSS, _esc, _summary_table, line_chart
from .metric_checks import Outcome, Series, iso, loss_not_decreasing, overfit, overtraining, stalled
from .rules import RuleConfigError, coerce_parameter, epoch_seconds

NAMESPACE = "/aws/sagemaker/TrainingJobs"
DIMENSION = "TrainingJobName"
PERIOD_S = 60
STATISTIC = "Average"  # several log lines (or hosts) in one period: their mean is the period's value
DELAY_S = 120  # a minute's datapoints are complete in CloudWatch about two minutes later
MAX_QUERIES = 500  # GetMetricData limit per request

# Rule -> (metric arguments, numeric parameters with their defaults), as the model's catalog sends them.
RULES: dict[str, tuple[tuple[str, ...], dict[str, float]]] = {
    "LossNotDecreasing": (("metric",), {"num_steps": 10, "diff_percent": 0.1, "increase_threshold_percent": 5}),
    "Overfit": (("train_metric", "validation_metric"), {"start_step": 0, "patience": 1, "ratio_threshold": 0.1}),
    "StalledTraining": (("metric",), {"threshold": 1800}),
    "Overtraining": (("train_metric", "validation_metric"), {"patience_train": 5, "patience_validation": 10,
                                                             "delta": 0.01}),
}
_WHOLE = {"num_steps", "start_step", "patience", "threshold", "patience_train", "patience_validation"}
_MINIMUM = {"num_steps": 1, "patience": 1, "threshold": 1, "patience_train": 1, "patience_validation": 1}  # the model validates the same (positive integers)
_SUMMARIES = {
    "LossNotDecreasing": "The metric must keep decreasing: by diff_percent every num_steps datapoints, and never more "
                         "than increase_threshold_percent above its lowest value.",
    "Overfit": "The validation metric must stay within ratio_threshold of the training metric.",
    "StalledTraining": "The metric must get a new datapoint at least every threshold seconds while the job trains.",
    "Overtraining": "The validation metric must keep reaching new optima (by delta) while the training metric does.",
}


def is_metric_rule(config: RuleConfig) -> bool:
    return config.rule_to_invoke in RULES


def _parameters(config: RuleConfig) -> tuple[dict[str, str], dict[str, float]]:
    """The metric names and the numeric parameters of ``config``; RuleConfigError names what is wrong."""
    arguments, defaults = RULES[config.rule_to_invoke]
    given = dict(config.parameters)
    metrics = {}
    for argument in arguments:
        name = given.pop(argument, None)
        if not isinstance(name, str) or not name:
            raise RuleConfigError(f"{config.configuration_name}: {argument} must name a metric, got {name!r}")
        metrics[argument] = name
    given.pop("rule_to_invoke", None)
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise RuleConfigError(f"{config.configuration_name}: unknown parameter(s) {', '.join(unknown)}; accepted: "
                              f"{', '.join([*arguments, *defaults])}")
    numbers: dict[str, float] = {}
    for key, default in defaults.items():
        value = coerce_parameter(given.get(key, default))
        whole, minimum = key in _WHOLE, _MINIMUM.get(key, 0)
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= minimum
                or (whole and value != int(value))):
            raise RuleConfigError(f"{config.configuration_name}: {key}={value!r} is not a usable "
                                  f"{'whole number' if whole else 'number'} (at least {minimum})")
        numbers[key] = int(value) if whole else float(value)
    return metrics, numbers


@dataclass
class MetricRuleRun:
    config: RuleConfig
    metrics: dict[str, str]
    numbers: dict[str, float]
    failed: str | None = None

    @classmethod
    def of(cls, config: RuleConfig) -> MetricRuleRun:
        try:
            metrics, numbers = _parameters(config)
        except RuleConfigError as error:
            return cls(config, {}, {}, f"RuleConfigError: {error}")
        return cls(config, metrics, numbers)


def _rule_parameters(run: MetricRuleRun) -> str:
    return "\n".join(f"{key}:{value}" for key, value in {**run.metrics, **run.numbers}.items())


class MetricEvaluation:
    """The metric rules of one job: the series read so far and how far they were read."""

    def __init__(self, configs: list[RuleConfig]):
        self.runs = [MetricRuleRun.of(c) for c in configs]
        self.series: dict[str, Series] = {name: [] for name in self.metric_names()}
        self.through: int | None = None  # the last minute read (epoch seconds of its start)
        self.training_since: float | None = None
        self.reference: float | None = None  # the time up to which the data is complete
        self.defined: list[str] | None = None  # the job's MetricDefinitions names (None: it has none)
        self.ended = False
        self.read_new = False  # the last update() read minutes not read before (the reports are then rewritten)

    def metric_names(self) -> list[str]:
        return sorted({name for run in self.runs for name in run.metrics.values()})

    # ---- reading
    def update(self, description: dict[str, Any], cloudwatch: Any, *, terminal: bool, now: float) -> bool:
        """Read the minutes completed since the last run; True once the data through the job's end has been read."""
        job = description["TrainingJobName"]
        definitions = (description.get("AlgorithmSpecification") or {}).get("MetricDefinitions")
        self.defined = [d.get("Name") for d in definitions] if definitions else None
        self.training_since = _training_since(description)
        started = epoch_seconds(description.get("TrainingStartTime")) or epoch_seconds(description.get("CreationTime")) or now
        through = self.through if self.through is not None else int(started // PERIOD_S * PERIOD_S) - PERIOD_S
        ended_at = epoch_seconds(description.get("TrainingEndTime"))
        limit = ended_at + PERIOD_S if (terminal and ended_at) else now - PERIOD_S - DELAY_S
        last = int(limit // PERIOD_S * PERIOD_S)
        names = self.metric_names()
        self.read_new = last > through
        if last > through and names:
            for name, points in fetch(cloudwatch, job, names, through + PERIOD_S, last + PERIOD_S).items():
                self.series[name] = _merge(self.series.get(name, []), points)
        self.through = max(through, last)
        self.ended = terminal and (ended_at is None or self.through >= int(ended_at // PERIOD_S * PERIOD_S))
        self.reference = ended_at if (self.ended and ended_at) else self.through + PERIOD_S
        return self.ended

    # ---- verdicts
    def results(self, final: bool) -> list[RuleResult]:
        return [self._result(run, final) for run in self.runs]

    def _result(self, run: MetricRuleRun, final: bool) -> RuleResult:
        name, invoke = run.config.configuration_name, run.config.rule_to_invoke
        if run.failed:
            return RuleResult(name, invoke, STATUS_ERROR, run.failed, [])
        outcome = self._check(run)
        report = {"RuleTriggered": 1 if outcome.violations else 0, "Violations": len(outcome.violations),
                  "Details": outcome.details, "Datapoints": outcome.datapoints, "RuleParameters": _rule_parameters(run)}
        if outcome.violations:
            verdict, reason = STATUS_ISSUES, outcome.explanation or _SUMMARIES[invoke]
        elif outcome.not_applicable:
            verdict, reason = VERDICT_NOT_APPLICABLE, outcome.not_applicable
        else:
            verdict, reason = STATUS_NO_ISSUES, f"no issue over {outcome.datapoints} datapoints"
        sub = SubRuleResult(invoke, verdict, reason, report, _SUMMARIES[invoke])
        if verdict == STATUS_ISSUES:
            return RuleResult(name, invoke, STATUS_ISSUES, condition_met_details(invoke, outcome.first_step or 0), [sub])
        if not final:
            return RuleResult(name, invoke, STATUS_IN_PROGRESS, None, [sub])
        details = f"NotApplicable: {reason}" if verdict == VERDICT_NOT_APPLICABLE else None
        return RuleResult(name, invoke, STATUS_NO_ISSUES, details, [sub])

    def _check(self, run: MetricRuleRun) -> Outcome:
        missing = [m for m in run.metrics.values() if self.defined is not None and m not in self.defined]
        if missing:
            outcome = Outcome(0)
            outcome.not_applicable = (f"the job defines no metric {', '.join(map(repr, missing))} (its "
                                      f"MetricDefinitions: {', '.join(map(repr, self.defined or []))})")
            return outcome
        n, m = run.numbers, run.metrics
        invoke = run.config.rule_to_invoke
        if invoke == "LossNotDecreasing":
            outcome = loss_not_decreasing(self.series.get(m["metric"], []), metric=m["metric"], **n)
        elif invoke == "Overfit":
            outcome = overfit(self.series.get(m["train_metric"], []), self.series.get(m["validation_metric"], []),
                              **m, **n)
        elif invoke == "Overtraining":
            outcome = overtraining(self.series.get(m["train_metric"], []),
                                   self.series.get(m["validation_metric"], []), **m, **n)
        else:
            outcome = stalled(self.series.get(m["metric"], []), metric=m["metric"], threshold=n["threshold"],
                              training_since=self.training_since, reference=self.reference)
        if not outcome.datapoints and not outcome.violations:
            outcome.not_applicable = outcome.not_applicable or f"no datapoint of {', '.join(m.values())} in CloudWatch"
        return outcome

    def data_time(self) -> float:
        """The time the verdicts rest on: the end of the data read (deterministic for a retried run)."""
        return self.reference or 0.0

    # ---- persistence
    def to_state(self) -> dict[str, Any]:
        return {"configs": [r.config.to_dict() for r in self.runs], "series": self.series, "through": self.through,
                "training_since": self.training_since, "reference": self.reference, "defined": self.defined,
                "ended": self.ended}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> MetricEvaluation:
        evaluation = cls([RuleConfig.from_dict(c) for c in state["configs"]])
        for name, points in state["series"].items():
            if not all(isinstance(p, list) and len(p) == 2 for p in points):
                raise TypeError(f"the series of {name!r} is not a list of [time, value] pairs")
            evaluation.series[name] = [[float(t), float(v)] for t, v in points]
        evaluation.through = None if state["through"] is None else int(state["through"])
        evaluation.training_since = state.get("training_since")
        evaluation.reference = state.get("reference")
        evaluation.defined = state.get("defined")
        evaluation.ended = bool(state.get("ended"))
        return evaluation


def _merge(old: Series, new: Series) -> Series:
    by_time = {p[0]: p for p in old}
    by_time.update({p[0]: p for p in new})
    return [by_time[t] for t in sorted(by_time)]


def queries(job: str, names: list[str]) -> list[dict[str, Any]]:
    return [{"Id": f"m{i}", "MetricStat": {"Metric": {"Namespace": NAMESPACE, "MetricName": name,
                                                      "Dimensions": [{"Name": DIMENSION, "Value": job}]},
                                           "Period": PERIOD_S, "Stat": STATISTIC}, "ReturnData": True}
            for i, name in enumerate(names)]


def fetch(cloudwatch: Any, job: str, names: list[str], start_s: int, end_s: int) -> dict[str, Series]:
    """``{metric: [[period start, value], ...]}`` for [start_s, end_s); periods without a datapoint are absent."""
    out: dict[str, Series] = {name: [] for name in names}
    all_queries = queries(job, names)
    for offset in range(0, len(all_queries), MAX_QUERIES):
        kwargs: dict[str, Any] = {"MetricDataQueries": all_queries[offset:offset + MAX_QUERIES],
                                  "StartTime": datetime.fromtimestamp(start_s, tz=timezone.utc),
                                  "EndTime": datetime.fromtimestamp(end_s, tz=timezone.utc),
                                  "ScanBy": "TimestampAscending"}
        while True:
            page = cloudwatch.get_metric_data(**kwargs)
            for result in page.get("MetricDataResults", []):
                name = names[int(result["Id"][1:])]
                for stamp, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
                    out[name].append([float(int(stamp.timestamp()) // PERIOD_S * PERIOD_S), float(value)])
            if not page.get("NextToken"):
                break
            kwargs["NextToken"] = page["NextToken"]
    return {name: sorted(points) for name, points in out.items()}


def render_html(result: RuleResult, evaluation: MetricEvaluation, *, title: str, source: str) -> str:
    """The report of one metric rule: the verdict table (as for the profiler rules), the metric chart, the violations."""
    run = next((r for r in evaluation.runs if r.config.configuration_name == result.configuration_name), None)
    names = list(run.metrics.values()) if run is not None else []
    details = f" &middot; {_esc(result.status_details.strip())}" if result.status_details else ""
    out = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
           f"<title>{_esc(title)}</title><style>{CSS}</style></head><body>", f"<h1>{_esc(title)}</h1>",
           f'<p class="meta">Source: {_esc(source)}</p>',
           f'<p><b>{_esc(result.configuration_name)}</b>: <span class="badge {_esc(result.status)}">'
           f"{_esc(result.status)}</span>{details}</p>", "<h2>Rules</h2>", _summary_table([result]),
           "<h2>Training metrics</h2>"]
    series = {name: evaluation.series.get(name, []) for name in names}
    out.append(line_chart("training-metrics", "Training metrics", series, y_label="value"))
    violations = [v for sub in result.rules for v in sub.report.get("Details", {}).get("violations",
                  sub.report.get("Details", {}).get("gaps", []))]
    if violations:
        keys = list(violations[0])
        out.append('<table class="violations"><tr>' + "".join(f"<th>{_esc(k)}</th>" for k in keys) + "</tr>")
        out += ["<tr>" + "".join(f"<td>{_esc(_cell(v.get(k)))}</td>" for k in keys) + "</tr>" for v in violations]
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out)


def _cell(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def source_label(job: str) -> str:
    return f"CloudWatch {NAMESPACE} ({DIMENSION}={job}, {PERIOD_S} s {STATISTIC})"


def _training_since(description: dict[str, Any]) -> float | None:
    for transition in description.get("SecondaryStatusTransitions") or []:
        if isinstance(transition, dict) and transition.get("Status") == "Training":
            return epoch_seconds(transition.get("StartTime"))
    return epoch_seconds(description.get("TrainingStartTime"))


__all__ = ["MetricEvaluation", "is_metric_rule", "fetch", "queries", "render_html", "source_label", "iso", "NAMESPACE",
           "DIMENSION"]
