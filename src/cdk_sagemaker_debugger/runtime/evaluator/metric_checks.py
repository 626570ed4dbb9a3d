"""The training-health checks on a metric series: LossNotDecreasing, Overfit and StalledTraining.

Each check is a pure function of the series (``[[epoch seconds, value], ...]`` in time order) and its parameters, so a
retried or restarted evaluation reaches the same verdict from the same data. A "step" is one datapoint of the series:
one CloudWatch period (60 s) in which the training job logged the metric at least once (the period's average).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

Series = list[list[float]]
MAX_LISTED = 20  # violations listed in a report (the counts cover all of them)


def iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Outcome:
    """What a check found: violations (each a dict for the report), the first violating step, and the evidence."""

    datapoints: int
    violations: list[dict[str, Any]] = field(default_factory=list)
    first_step: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    not_applicable: str | None = None
    explanation: str | None = None

    def add(self, step: int, violation: dict[str, Any]) -> None:
        if self.first_step is None:
            self.first_step = step
        self.violations.append(violation)


def _decrease_percent(previous: float, value: float) -> float:
    """How much ``value`` fell below ``previous``, in percent of ``|previous|`` (negative: it rose)."""
    if previous == 0:
        return 0.0 if value >= 0 else math.inf
    return (previous - value) / abs(previous) * 100


def loss_not_decreasing(series: Series, *, metric: str, num_steps: int, diff_percent: float,
                        increase_threshold_percent: float) -> Outcome:
    """Every ``num_steps`` datapoints the value must have fallen by at least ``diff_percent`` % since the previous
    check; any datapoint more than ``increase_threshold_percent`` % above the lowest value so far fires at once."""
    outcome = Outcome(len(series))
    lowest = math.inf
    checks = 0
    for step, (stamp, value) in enumerate(series):
        if lowest < math.inf and value - lowest > abs(lowest) * increase_threshold_percent / 100:
            rise = (value - lowest) / abs(lowest) * 100 if lowest else math.inf
            outcome.add(step, {"step": step, "time": iso(stamp), "kind": "increase", "value": value,
                               "lowest": lowest, "increase_percent": rise})
        lowest = min(lowest, value)
        if step and step % num_steps == 0:
            checks += 1
            previous_stamp, previous = series[step - num_steps]
            fell = _decrease_percent(previous, value)
            if fell < diff_percent:
                outcome.add(step, {"step": step, "time": iso(stamp), "kind": "not decreasing", "value": value,
                                   "previous_step": step - num_steps, "previous_time": iso(previous_stamp),
                                   "previous": previous, "decrease_percent": fell})
    outcome.details = {"metric": metric, "checks": checks, "lowest": None if lowest == math.inf else lowest,
                       "violations": outcome.violations[:MAX_LISTED]}
    if not outcome.violations and len(series) <= num_steps:
        outcome.not_applicable = (f"{metric} has {len(series)} datapoint(s); the check needs more than num_steps "
                                  f"({num_steps})")
    if outcome.violations:
        outcome.explanation = _explain_loss(metric, outcome.violations[0], diff_percent, increase_threshold_percent)
    return outcome


def _explain_loss(metric: str, first: dict[str, Any], diff_percent: float, increase_threshold_percent: float) -> str:
    if first["kind"] == "increase":
        return (f"{metric} rose to {first['value']:.6g} at step {first['step']} ({first['time']}), "
                f"{first['increase_percent']:.3g}% above its lowest value {first['lowest']:.6g} "
                f"(increase_threshold_percent {increase_threshold_percent:g})")
    return (f"{metric} went from {first['previous']:.6g} at step {first['previous_step']} to {first['value']:.6g} at "
            f"step {first['step']} ({first['time']}): a decrease of {first['decrease_percent']:.3g}%, less than "
            f"diff_percent {diff_percent:g}")


def overfit(train: Series, validation: Series, *, train_metric: str, validation_metric: str, start_step: int,
            patience: int, ratio_threshold: float) -> Outcome:
    """Each validation datapoint is paired with the latest training datapoint at or before it; the rule fires when
    (validation - training) / |training| exceeds ``ratio_threshold`` more than ``patience`` times in a row."""
    outcome = Outcome(len(validation))
    position, latest, run, pairs, worst = 0, None, 0, 0, -math.inf
    for step, (stamp, value) in enumerate(validation):
        while position < len(train) and train[position][0] <= stamp:
            latest = train[position][1]
            position += 1
        if latest is None or step < start_step:
            continue
        pairs += 1
        ratio = (value - latest) / abs(latest) if latest else (math.inf if value > latest else 0.0)
        worst = max(worst, ratio)
        run = run + 1 if ratio > ratio_threshold else 0
        if run > patience:
            outcome.add(step, {"step": step, "time": iso(stamp), "validation": value, "training": latest,
                               "ratio": ratio, "consecutive": run})
    outcome.details = {"train_metric": train_metric, "validation_metric": validation_metric, "pairs": pairs,
                       "largest_ratio": None if worst == -math.inf else worst,
                       "violations": outcome.violations[:MAX_LISTED]}
    if not pairs and not outcome.violations:
        outcome.not_applicable = (f"no {validation_metric} datapoint after step {start_step} has a {train_metric} "
                                  "datapoint at or before it")
    if outcome.violations:
        first = outcome.violations[0]
        outcome.explanation = (
            f"{validation_metric} {first['validation']:.6g} vs {train_metric} {first['training']:.6g} at step "
            f"{first['step']} ({first['time']}): ratio {first['ratio']:.3g} above ratio_threshold {ratio_threshold:g} "
            f"for {first['consecutive']} consecutive validation datapoints (patience {patience})")
    return outcome


def stalled(series: Series, *, metric: str, threshold: float, training_since: float | None,
            reference: float | None) -> Outcome:
    """Fires when ``threshold`` seconds pass without a datapoint: from the start of training to the first datapoint,
    between two datapoints, or from the last datapoint to ``reference`` (the end of the data read, or the job's end).

    CloudWatch returns no datapoint at all for a period in which the job logged nothing, so a stalled metric is a gap
    in the timestamps, not a zero.

    A metric that never got a datapoint is NotApplicable, not stalled: a MetricDefinitions regex that never matches the
    logs looks exactly like it, and firing then (with StopTraining) would stop a healthy job. The reason names both
    causes; the gap counts only from the first datapoint on."""
    outcome = Outcome(len(series))
    if not series:
        outcome.details = {"metric": metric, "last_datapoint": None, "longest_gap_seconds": 0.0, "gaps": []}
        if training_since is None:
            outcome.not_applicable = "the job has not started training yet"
        else:
            waited = f" in the {reference - training_since:.0f} s since training started" if reference else ""
            outcome.not_applicable = (
                f"{metric} has no datapoint{waited}: its MetricDefinitions regex may never match the job's log lines "
                "(check it against the log), or the script hangs before it logs the metric the first time; a metric "
                "never seen is not judged stalled")
        return outcome
    # (time, step): the datapoints, after the start of training and before the end of the data read
    marks = [(stamp, step) for step, (stamp, _) in enumerate(series)]
    if training_since is not None:
        marks = [(training_since, 0), *[m for m in marks if m[0] >= training_since]]
    if reference is not None and marks and reference > marks[-1][0]:
        marks.append((reference, len(series)))
    longest = 0.0
    for (start, _), (end, step) in zip(marks, marks[1:], strict=False):
        longest = max(longest, end - start)
        if end - start > threshold:
            outcome.add(step, {"from": iso(start), "to": iso(end), "seconds": end - start})
    outcome.details = {"metric": metric, "last_datapoint": iso(series[-1][0]) if series else None,
                       "longest_gap_seconds": longest, "gaps": outcome.violations[:MAX_LISTED]}
    if outcome.violations:
        first = outcome.violations[0]
        outcome.explanation = (f"no {metric} datapoint from {first['from']} to {first['to']} ({first['seconds']:.0f} s, "
                               f"threshold {threshold:g} s)")
    return outcome
