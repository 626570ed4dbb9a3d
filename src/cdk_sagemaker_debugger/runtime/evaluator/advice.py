"""What a person reads next to a verdict: the outcome in one word, what to try, and what the words in the report mean.

One vocabulary for every place a verdict is shown (the HTML report, the summary JSON, the CLI table and ``--fail-on``,
the RuleAlarm's e-mail and MLflow): ``IssuesFound``, ``NoIssuesFound``, ``NotApplicable``, ``InProgress``, ``Error``.
The first four besides ``NotApplicable`` are SageMaker's ``RuleEvaluationStatus`` values and stay what the evaluator
publishes; ``NotApplicable`` is the outcome of a finished rule that judged nothing (every rule that can trigger lacked
its data), which SageMaker reports as ``NoIssuesFound``.
"""

from __future__ import annotations

import re

from .engine import (
    STATUS_ERROR,
    STATUS_IN_PROGRESS,
    STATUS_ISSUES,
    STATUS_NO_ISSUES,
    VERDICT_NOT_APPLICABLE,
    RuleResult,
    SubRuleResult,
)

#: Every outcome a configured rule can have.
OUTCOMES = (STATUS_ISSUES, STATUS_ERROR, STATUS_NO_ISSUES, STATUS_IN_PROGRESS, VERDICT_NOT_APPLICABLE)

#: Rules that summarise and never trigger: they do not count as "judged".
INFORMATIONAL = frozenset({"OverallSystemUsage", "OverallFrameworkMetrics"})

#: One or two concrete things to try when the rule finds issues, most likely first.
WHAT_TO_TRY: dict[str, tuple[str, ...]] = {
    "LowGPUUtilization": (
        "Feed the GPUs faster: raise the data loader's num_workers and set pin_memory=True, or prefetch on the GPU.",
        "If the GPUs stay idle with a fast input pipeline, raise the batch size or move to a smaller GPU instance.",
    ),
    "BatchSize": (
        "Raise the batch size (scale the learning rate with it) until GPU memory is about 80 % used.",
        "Or move to a smaller or cheaper instance type: this one is mostly idle.",
    ),
    "GPUMemoryIncrease": (
        "Look for tensors kept across steps (losses appended without .item() or .detach(), growing caches).",
        "If memory use keeps rising, lower the batch size before the job runs out of GPU memory.",
    ),
    "LoadBalancing": (
        "Check that every rank gets the same amount of work: shard the data evenly (DistributedSampler, "
        "drop_last=True) and balance model-parallel stages.",
        "Look at the GPU utilisation chart for the GPU that stands out and what runs only on it.",
    ),
    "CPUBottleneck": (
        "Move preprocessing off the training loop: more data loader workers, or preprocess once before training.",
        "Or choose an instance with more CPU cores per GPU.",
    ),
    "IOBottleneck": (
        "Check the input pipeline: use FastFile or Pipe input mode, or copy the data to local NVMe before training.",
        "Read fewer, larger files (shards of 100 MB or more) and raise the data loader's prefetch_factor.",
    ),
    "StepOutlier": (
        "Look at the slow steps in the table below: regular ones point to checkpointing, evaluation or logging "
        "inside the loop; random ones to a straggler host or the input pipeline.",
        "On multi-node jobs, compare the nodes: one slow node slows every synchronised step.",
    ),
    "MaxInitializationTime": (
        "Check what runs before the first step: data download (use FastFile input mode), pip installs in the entry "
        "point, or a large checkpoint being read.",
        "Build dependencies into the image instead of installing them at start-up.",
    ),
    "Dataloader": (
        "Set the data loader's num_workers near the number of CPU cores per GPU process (not more than the cores).",
        "Set pin_memory=True and persistent_workers=True so workers are not restarted every epoch.",
    ),
    "LossNotDecreasing": (
        "Lower the learning rate or add warm-up; check that the labels and the loss function match.",
        "Check the input pipeline: shuffled, normalised data, and the right metric_definitions regex for the loss.",
    ),
    "Overfit": (
        "Add regularisation (dropout, weight decay, data augmentation) or stop earlier (early stopping).",
        "Check that training and validation data come from the same distribution.",
    ),
    "StalledTraining": (
        "Look at the job's CloudWatch logs around the last datapoint: a hang in a collective (NCCL), the data "
        "loader or a checkpoint upload.",
        "Check that the training script still prints the metric the rule watches (metric_definitions regex).",
    ),
}

#: What each column of the verdict table means.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("Rule", "the check that ran"),
    ("Outcome", "IssuesFound, NoIssuesFound, or NotApplicable when the job lacked the data the rule needs; "
                "Informational for the two rules that only summarise (SageMaker reports them as NoIssuesFound)"),
    ("Windows met", "how many analysis windows met the rule's condition"),
    ("Violations", "how many individual samples or steps broke the rule's threshold"),
    ("Datapoints", "how many samples or steps the rule looked at"),
    ("Why", "the evaluator's one-line reason"),
)

#: Windows and steps are different things; the report uses both words.
WINDOWS_AND_STEPS = ("An analysis window is a 60-second slice of the job's profiler data (scan_interval_us); the "
                     "evaluator judges every rule once per window. A step is one iteration of the training loop, "
                     "as the framework profiler recorded it.")


def outcome(result: RuleResult) -> str:
    """The one word for a configured rule: its status, or NotApplicable when it finished without judging anything."""
    if result.status != STATUS_NO_ISSUES:
        return result.status
    judging = [s for s in result.rules if s.name not in INFORMATIONAL]
    if judging and all(s.verdict == VERDICT_NOT_APPLICABLE for s in judging):
        return VERDICT_NOT_APPLICABLE
    if not judging and result.rules and all(s.verdict == VERDICT_NOT_APPLICABLE for s in result.rules):
        return VERDICT_NOT_APPLICABLE
    return STATUS_NO_ISSUES


INFORMATIONAL_LABEL = "Informational"


def shown_verdict(sub: SubRuleResult) -> str:
    """The word the tables show for one rule: its verdict, or Informational for a rule that only summarises."""
    if sub.name in INFORMATIONAL and sub.verdict == STATUS_NO_ISSUES:
        return INFORMATIONAL_LABEL
    return sub.verdict


def what_to_try(sub: SubRuleResult) -> list[str]:
    """One or two things to try for a rule that found issues (nothing for the other verdicts)."""
    if sub.verdict != STATUS_ISSUES:
        return []
    return list(WHAT_TO_TRY.get(sub.name, ("Read the rule's section of the report and its parameters in "
                                           "'cdk-sagemaker-debugger rules'.",)))


#: Terms a reason may use, and the same with the scale in plain words.
PLAIN_TERMS = (
    (re.compile(r"Jensen-Shannon distance above ([0-9.]+)"),
     r"Jensen-Shannon distance above \1, on a scale from 0, the same busy pattern, to 1, nothing in common"),
)


def reason(sub: SubRuleResult) -> str:
    """The evaluator's reason, worded for a reader: informational rules say what they summarise, terms are explained."""
    if sub.name in INFORMATIONAL and sub.verdict != VERDICT_NOT_APPLICABLE:
        return "informational, never triggers: " + sub.summary.split(" (")[0].lower()
    text = sub.reason
    for pattern, plain in PLAIN_TERMS:
        text = pattern.sub(plain, text, count=1)
    return text


def headline(result: RuleResult, windows: int | None) -> str:
    """The outcome in plain words, instead of SageMaker's ``RuleEvaluationConditionMet ... at step N``."""
    word = outcome(result)
    issues = [s.name for s in result.rules if s.verdict == STATUS_ISSUES]
    judged = [s for s in result.rules if s.name not in INFORMATIONAL and s.verdict != VERDICT_NOT_APPLICABLE]
    span = ("the training metrics read so far" if windows is None
            else f"{windows} analysis window{'s' if windows != 1 else ''} (60-second slices of the job by default)")
    if word == STATUS_ISSUES:
        return f"{', '.join(issues)} found issues after {span}."
    if word == STATUS_ERROR:
        return f"The rule could not be evaluated: {(result.status_details or 'no reason given').strip()}"
    if word == VERDICT_NOT_APPLICABLE:
        return (f"Nothing was judged over {span}: every rule lacked the data it needs (see Why). "
                "This is not a clean bill of health.")
    if word == STATUS_IN_PROGRESS:
        return f"Still evaluating: {span} so far, no issues yet."
    return f"No issues found by {len(judged)} rule(s) over {span}."


def summary_entry(result: RuleResult) -> dict[str, object]:
    """The reader's fields the summary JSON adds to each configured rule."""
    return {"Outcome": outcome(result),
            "WhatToTry": {s.name: what_to_try(s) for s in result.rules if s.verdict == STATUS_ISSUES}}
