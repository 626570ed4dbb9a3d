"""Which debugger (tensor) rules the RuleEvaluator runs, and what the tensor collector must record for them.

With ``RuleEngine.EVALUATOR`` a ``ProfiledTrainingJob``'s ``debugger_rules`` are evaluated by the RuleEvaluator on
the files of the tensor collector (``cdk_sagemaker_debugger.tensors``, shipped in the sampler bundle). This table
says, per built-in debugger rule, whether the evaluator can run it, which collections the collector records for it,
and, for the others, why not and what to use instead. ``rule_table_markdown()`` writes the docs' table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..errors import ConfigurationError
from .debugger import BuiltinRule, Rule
from .debugger_catalog import DEBUGGER_RULE_SPECS
from .parameters import is_token
from .profiler import ProfilerRule

__all__ = ["TensorRuleNeeds", "EVALUATOR_TENSOR_RULES", "NOT_ON_EVALUATOR", "TENSORS_ENV", "EvaluatorTensorRule",
           "check_evaluator_rule", "collector_environment", "collector_config", "rule_table_markdown"]

#: The collector's configuration variable (runtime/tensors/contract.py CONFIG; a test keeps the two equal).
TENSORS_ENV = "CDK_SAGEMAKER_TENSORS"
DEFAULT_SAVE_INTERVAL = 500


def _given(rule: Rule, name: str) -> Any:
    value = rule.parameters.get(name)
    if value is None:
        value = next(p.default for p in rule.spec.parameters if p.name == name)  # type: ignore[attr-defined]
    return value


@dataclass(frozen=True)
class TensorRuleNeeds:
    """What one rule needs from the collector: collection keys, and a function giving their settings."""

    collections: tuple[str, ...]
    settings: Callable[[Rule], dict[str, Any]] | None = None


def _unchanged(rule: Rule) -> dict[str, Any]:
    return {"unchanged": {"rtol": float(_given(rule, "rtol"))}}


def _saturation(rule: Rule) -> dict[str, Any]:
    g = lambda n: float(_given(rule, n))  # noqa: E731
    return {"saturation": {"tanh": [g("threshold_tanh_min"), g("threshold_tanh_max")],
                           "sigmoid": [g("threshold_sigmoid_min"), g("threshold_sigmoid_max")]}}


def _tokens(rule: Rule) -> dict[str, Any]:
    values = _given(rule, "token_values")
    items = values if isinstance(values, (list, tuple)) else str(values).split(",")
    return {"tokens": {"values": sorted({int(float(v)) for v in items})}}


#: rule -> what it needs; every other built-in debugger rule is in NOT_ON_EVALUATOR.
EVALUATOR_TENSOR_RULES: Mapping[str, TensorRuleNeeds] = MappingProxyType({
    "VanishingGradient": TensorRuleNeeds(("gradients",)),
    "ExplodingTensor": TensorRuleNeeds(("gradients", "weights")),
    "WeightUpdateRatio": TensorRuleNeeds(("weights", "updates")),
    "AllZero": TensorRuleNeeds(("gradients", "weights")),
    "TensorVariance": TensorRuleNeeds(("weights", "gradients")),
    "UnchangedTensor": TensorRuleNeeds(("weights",), _unchanged),
    "DeadRelu": TensorRuleNeeds(("relu_output",)),
    "SaturatedActivation": TensorRuleNeeds(("saturation",), _saturation),
    "PoorWeightInitialization": TensorRuleNeeds(("relu_input",), lambda r: {"relu_input": {"steps": int(_given(r, "steps"))}}),
    "CheckInputImages": TensorRuleNeeds(("images",), lambda r: {"images": {"samples": int(_given(r, "threshold_samples"))}}),
    "NLPSequenceRatio": TensorRuleNeeds(("tokens",), _tokens),
    "ClassImbalance": TensorRuleNeeds(("labels",), lambda r: {"labels": {"samples": int(_given(r, "samples"))}}),
    "Confusion": TensorRuleNeeds(("labels",)),
})

#: rule -> why the evaluator does not run it, and what to use instead (the synth error says both).
NOT_ON_EVALUATOR: Mapping[str, str] = MappingProxyType({
    "LossNotDecreasing": "reads the loss tensors Debugger's hook saves; use rules.LossNotDecreasing(metric='train:loss') "
                         "in rule_set=, on the job's MetricDefinitions",
    "Overfit": "reads the loss tensors Debugger's hook saves; use rules.Overfit(train_metric=..., validation_metric=...) "
               "in rule_set=",
    "Overtraining": "reads the loss tensors Debugger's hook saves; use rules.Overtraining(train_metric=..., "
                    "validation_metric=...) in rule_set=",
    "StalledTrainingRule": "reads Debugger's hook output; use rules.StalledTraining(metric=...) in rule_set=",
    "SimilarAcrossRuns": "compares this run's saved tensors with other runs' Debugger output, which the collector does "
                         "not keep (it records reductions, not tensors); use RuleEngine.DEBUGGER, or compare the runs' "
                         "MetricDefinitions metrics on a TrainingDashboard",
    "FeatureImportanceOverweight": "is for XGBoost's built-in algorithm, whose container the collector (PyTorch) does "
                                   "not run in; use RuleEngine.DEBUGGER",
    "TreeDepth": "is for XGBoost's built-in algorithm, whose container the collector (PyTorch) does not run in; use "
                 "RuleEngine.DEBUGGER",
    "CreateXgboostReport": "is for XGBoost's built-in algorithm, whose container the collector (PyTorch) does not run "
                           "in; use RuleEngine.DEBUGGER",
})


def check_evaluator_rule(rule: object, *, where: str) -> None:
    """Raise unless the RuleEvaluator can run ``rule`` from the collector's files; the error names the alternative."""
    if not isinstance(rule, BuiltinRule):
        raise ConfigurationError(
            f"custom debugger rule {getattr(rule, 'name', rule)!r} runs in Debugger's rule container, which "
            "RuleEngine.EVALUATOR (the default) does not use; pass rule_engine=RuleEngine.DEBUGGER for custom rules.",
            where=where, field="debugger_rules", value=getattr(rule, "name", rule))
    name = rule.spec.name
    if name in NOT_ON_EVALUATOR:
        raise ConfigurationError(f"{name} is not evaluated by RuleEngine.EVALUATOR: it {NOT_ON_EVALUATOR[name]}.",
                                 where=where, field="debugger_rules", value=rule.name)
    if rule.actions is not None and len(rule.actions):
        raise ConfigurationError(
            f"{rule.name}: Debugger's rule actions run in Debugger's rule container; with RuleEngine.EVALUATOR notify "
            "or stop with a RuleAlarm(actions=[...]) on the rule's verdicts instead.",
            where=where, field="debugger_rules", value=rule.name)


def _save_interval(rules: Iterable[Rule]) -> int:
    """The smallest save_interval of the rules' collections (Debugger's default 500 when none says)."""
    intervals = []
    for rule in rules:
        for collection in rule.collections:
            value = collection.parameters.get("save_interval")
            if value is not None and not is_token(value) and str(value).isdigit() and int(value) > 0:
                intervals.append(int(value))
    return min(intervals, default=DEFAULT_SAVE_INTERVAL)


def collector_config(rules: Iterable[Rule]) -> dict[str, Any]:
    """The collector configuration recording what ``rules`` need (the union of their collections)."""
    rules = list(rules)
    config: dict[str, Any] = {"version": 1, "save_interval": _save_interval(rules)}
    for rule in rules:
        needs = EVALUATOR_TENSOR_RULES[rule.spec.name]  # type: ignore[attr-defined]
        for key in needs.collections:
            config.setdefault(key, True)
        for key, section in (needs.settings(rule) if needs.settings else {}).items():
            if key in ("images", "labels") and isinstance(config.get(key), dict):
                section = {"samples": max(section["samples"], config[key]["samples"])}
            if key == "tokens" and isinstance(config.get(key), dict):
                section = {"values": sorted(set(section["values"]) | set(config[key]["values"]))}
            config[key] = section
    return config


def collector_environment(rules: Iterable[Rule]) -> dict[str, str]:
    """The job environment that starts the collector for ``rules`` ({} for none)."""
    rules = list(rules)
    if not rules:
        return {}
    return {TENSORS_ENV: json.dumps(collector_config(rules), sort_keys=True, separators=(",", ":"))}


class EvaluatorTensorRule(ProfilerRule):
    """A debugger rule as the RuleEvaluator runs it: a member of the job's rule set, so its verdicts flow like the
    profiler rules' (RuleAlarm, dashboard, report). Made by ``ProfiledTrainingJob`` from ``debugger_rules``."""

    def __init__(self, rule: Rule) -> None:
        self.rule_to_invoke = rule.spec.name  # type: ignore[attr-defined]
        self._init_common(rule.name, None, None, rule.spec.name, None)  # type: ignore[attr-defined]
        self.debugger_rule = rule
        self.parameters = {k: v for k, v in rule.parameters.items()}

    def to_rule_configuration(self, *, region: str | None = None, image_uri: str | None = None,
                              source_s3_uri: str | None = None) -> dict[str, Any]:
        raise ConfigurationError("runs in the RuleEvaluator only; put the debugger rule in debugger_rules= with "
                                 "RuleEngine.DEBUGGER to run it on Debugger.", where=self.where, field="rules",
                                 value=self.name)


def is_evaluator_tensor_rule(rule: object) -> bool:
    return isinstance(rule, EvaluatorTensorRule)


def rule_table_markdown() -> str:
    """Per built-in debugger rule: which engine can evaluate it (docs/debugger-rules.md)."""
    lines = ["| Debugger rule | RuleEngine.DEBUGGER | RuleEngine.EVALUATOR | Collector records |", "|---|---|---|---|"]
    for name in DEBUGGER_RULE_SPECS:
        if name in EVALUATOR_TENSOR_RULES:
            lines.append(f"| `{name}` | yes | yes (tensor collector) | "
                         f"{', '.join(EVALUATOR_TENSOR_RULES[name].collections)} |")
        else:
            lines.append(f"| `{name}` | yes | no: {NOT_ON_EVALUATOR[name]} | — |")
    return "\n".join(lines)
