"""Training-health rules on the job's algorithm metrics, without SageMaker Debugger.

Debugger's LossNotDecreasing, Overfit and StalledTrainingRule read tensors that Debugger's hook saves; accounts without
Debugger have no hook. These rules read the metrics the training job's ``MetricDefinitions`` produce instead (SageMaker
parses them from the job's logs and publishes them to CloudWatch, namespace ``/aws/sagemaker/TrainingJobs``), and the
RuleEvaluator judges them with the same verdicts, reports and events as the profiler rules, so ``RuleAlarm`` notifies
and stops on them like on any other rule.

They keep Debugger's parameter names and defaults where Debugger has the parameter; Debugger's tensor-selection
parameters (``collection_names``, ``tensor_regex``, ``use_losses_collection``, ``mode``) become the metric names.
``docs/metric-rules.md`` compares them parameter by parameter (``comparison_markdown()`` writes that table).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from ..errors import ConfigurationError, ConfigurationTypeError, did_you_mean
from .debugger_catalog import DEBUGGER_RULE_SPECS
from .parameters import Param, is_token, validate_parameters
from .profiler import ProfilerRule

__all__ = [
    "MetricRule",
    "MetricRuleSpec",
    "METRIC_RULE_SPECS",
    "METRIC_RULE_CLASSES",
    "MAX_METRIC_NAME_LENGTH",
    "is_metric_rule",
    "check_metric_names",
    "comparison_markdown",
]

#: MetricDefinition.Name: 1 to 255 characters (SageMaker API reference, MetricDefinition).
MAX_METRIC_NAME_LENGTH = 255


@dataclass(frozen=True)
class MetricRuleSpec:
    """A metric rule: which metrics it reads (the argument names), its parameters, and its Debugger counterpart."""

    name: str
    summary: str
    metric_arguments: tuple[str, ...]
    parameters: tuple[Param, ...]
    #: The Debugger rule (``debugger_rules.<name>``) with the same purpose.
    debugger_rule: str
    #: (Debugger parameter, what takes its place here) for the parameters this rule does not keep.
    replaced: tuple[tuple[str, str], ...] = ()

    @property
    def rule_to_invoke(self) -> str:
        return self.name


_SPECS = (
    MetricRuleSpec(
        "LossNotDecreasing",
        "Fires when the metric does not fall by diff_percent over num_steps datapoints, or rises more than "
        "increase_threshold_percent above its lowest value.",
        ("metric",),
        (
            Param.integer("num_steps", 10, "Datapoints between two checks; each check compares the "
                          "value with the one num_steps datapoints earlier."),
            Param.percent("diff_percent", 0.1, "Smallest decrease, in percent, between two checks.", exclusive=True),
            Param.percent("increase_threshold_percent", 5, "Rise above the lowest value so far, in "
                          "percent, that fires at once.", exclusive=True),
        ),
        "LossNotDecreasing",
        (
            ("collection_names, tensor_regex, use_losses_collection", "metric= (a MetricDefinitions name)"),
            ("mode", "the metric name: define one metric per mode, e.g. train:loss and val:loss"),
        ),
    ),
    MetricRuleSpec(
        "Overfit",
        "Fires when (validation - training) / training exceeds ratio_threshold for more than patience consecutive "
        "validation datapoints.",
        ("train_metric", "validation_metric"),
        (
            Param.integer("start_step", 0, "Validation datapoints to skip before the comparison starts.", minimum=0),
            Param.integer("patience", 1, "Consecutive validation datapoints above the threshold that "
                          "are tolerated; one more fires."),
            Param.number("ratio_threshold", 0.1, "Largest acceptable (validation - training) / "
                          "training.", above=0),
        ),
        "Overfit",
        (("tensor_regex", "train_metric= and validation_metric= (MetricDefinitions names)"),),
    ),
    MetricRuleSpec(
        "StalledTraining",
        "Fires when the metric gets no new datapoint for threshold seconds while the job trains.",
        ("metric",),
        (Param.integer("threshold", 1800, "Seconds without a new datapoint after which the rule "
                       "fires (threshold_minutes= is accepted too)."),),
        "StalledTrainingRule",
        (
            ("stop_training_on_fire, training_job_name_prefix",
             "RuleAlarm(actions=[StopTraining()]): stops the run exactly once, by its exact name"),
        ),
    ),
    MetricRuleSpec(
        "Overtraining",
        "Fires when the validation metric makes no new optimum (by delta) for patience_validation datapoints while "
        "the training metric made one within its last patience_train datapoints.",
        ("train_metric", "validation_metric"),
        (
            Param.integer("patience_train", 5, "Training datapoints within which the training metric must "
                          "have made a new optimum for the rule to fire (it still improves)."),
            Param.integer("patience_validation", 10, "Validation datapoints without a new optimum that "
                          "fire the rule."),
            Param.number("delta", 0.01, "How much lower than the best value a datapoint must be "
                          "to count as a new optimum.", minimum=0),
        ),
        "Overtraining",
        (("(the losses collection)", "train_metric= and validation_metric= (MetricDefinitions names)"),),
    ),
)

#: The metric rules by name.
METRIC_RULE_SPECS: Mapping[str, MetricRuleSpec] = MappingProxyType({s.name: s for s in _SPECS})


def _check_metric_name(argument: str, value: Any, where: str) -> str:
    if isinstance(value, str) and is_token(value):
        raise ConfigurationError(
            "must be a literal metric name: the synth check compares it with the job's metric_definitions.",
            where=where, field=argument, value=value)
    if not isinstance(value, str):
        raise ConfigurationTypeError(
            f"expected the name of a metric the job defines (a key of metric_definitions=, e.g. 'train:loss'), got "
            f"{type(value).__name__} {value!r}.", where=where, field=argument, value=value)
    if not 1 <= len(value) <= MAX_METRIC_NAME_LENGTH:
        raise ConfigurationError(
            f"a metric name has 1 to {MAX_METRIC_NAME_LENGTH} characters (MetricDefinition.Name), got {len(value)}.",
            where=where, field=argument, value=value)
    return value


def _check_distinct_metrics(metrics: Mapping[str, str], where: str) -> None:
    """Overfit compares two metrics; given one metric twice, validation minus training is always 0 and it never fires."""
    seen: dict[str, str] = {}
    for argument, metric in metrics.items():
        if metric in seen:
            raise ConfigurationError(
                f"names the same metric as {seen[metric]}= ({metric!r}); the rule compares two different metrics "
                "and could never fire. Name the other metric, e.g. train_metric='train:loss', "
                "validation_metric='validation:loss'.", where=where, field=argument, value=metric)
        seen[metric] = argument


class MetricRule(ProfilerRule):
    """A training-health rule on algorithm metrics; the classes are generated from ``METRIC_RULE_SPECS``.

    It goes into a ``ProfilerRuleSet`` like any profiler rule and runs only in the RuleEvaluator
    (``RuleEngine.EVALUATOR``): rendering it as a Debugger rule configuration raises.
    """

    spec: ClassVar[MetricRuleSpec]

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        actions: object = None,
        **arguments: Any,
    ) -> None:
        self.rule_to_invoke = self.spec.rule_to_invoke
        self._init_common(name, local_path, s3_output_path, self.spec.name, actions)
        metrics = {}
        for argument in self.spec.metric_arguments:
            if argument not in arguments:
                raise ConfigurationError(
                    f"is required: the name of the metric to watch, as defined in the training job's "
                    f"metric_definitions= (e.g. {argument}='train:loss').", where=self.where, field=argument)
            metrics[argument] = _check_metric_name(argument, arguments.pop(argument), self.where)
        _check_distinct_metrics(metrics, self.where)
        arguments = self._convert_aliases(arguments)
        parameters = validate_parameters(self.spec.parameters, arguments, where=self.where)
        self.metrics: dict[str, str] = metrics
        #: Metric names first, then the numeric parameters (what the evaluator receives).
        self.parameters = {**metrics, **parameters}

    def _convert_aliases(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if self.spec.name != "StalledTraining" or "threshold_minutes" not in arguments:
            return arguments
        minutes = arguments.pop("threshold_minutes")
        if "threshold" in arguments:
            raise ConfigurationError(
                "give threshold= (seconds, Debugger's name) or threshold_minutes=, not both.", where=self.where,
                field="threshold_minutes", value=minutes)
        if is_token(minutes) or isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or minutes <= 0:
            raise ConfigurationError(f"must be a positive number of minutes, got {minutes!r}.", where=self.where,
                                     field="threshold_minutes", value=minutes)
        seconds = minutes * 60
        if seconds != int(seconds):
            raise ConfigurationError(f"{minutes!r} minutes is not a whole number of seconds; pass threshold= in "
                                     "seconds instead.", where=self.where, field="threshold_minutes", value=minutes)
        return {**arguments, "threshold": int(seconds)}

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The metrics this rule reads, in argument order."""
        return tuple(self.metrics.values())

    def debugger_error(self, where: str | None = None) -> ConfigurationError:
        """Why this rule cannot run on SageMaker Debugger, and what to use there instead."""
        debugger = self.spec.debugger_rule
        return ConfigurationError(
            f"{self.spec.name} reads the job's algorithm metrics in the RuleEvaluator, which RuleEngine.DEBUGGER does "
            f"not run. On Debugger use its tensor rule debugger_rules.{debugger}(...) in debugger_rules=[...], or use "
            "RuleEngine.EVALUATOR (the default) for this rule.",
            where=where or self.where, field="rules", value=self.name)

    def to_rule_configuration(
        self, *, region: str | None = None, image_uri: str | None = None, source_s3_uri: str | None = None
    ) -> dict[str, Any]:
        raise self.debugger_error()


def _make_rule_class(spec: MetricRuleSpec) -> type[MetricRule]:
    lines = [spec.summary, "", f"Metrics: {', '.join(spec.metric_arguments)} (names from metric_definitions=).",
             "", "Parameters (Debugger's names and defaults):"]
    lines += [f"    {p.name} ({p.python_type}, default {p.default!r}): {p.doc}" for p in spec.parameters]
    return type(spec.name, (MetricRule,), {"spec": spec, "__doc__": "\n".join(lines), "__module__": __name__})


#: The metric rule classes by name.
METRIC_RULE_CLASSES: dict[str, type[MetricRule]] = {name: _make_rule_class(s) for name, s in METRIC_RULE_SPECS.items()}
globals().update(METRIC_RULE_CLASSES)


def is_metric_rule(rule: object) -> bool:
    return isinstance(rule, MetricRule)


def check_metric_names(rule: MetricRule, defined: Iterable[str], *, where: str | None = None) -> None:
    """Raise unless every metric ``rule`` reads is one of the ``defined`` MetricDefinitions names."""
    names = list(defined)
    for argument, metric in rule.metrics.items():
        if metric in names:
            continue
        known = ", ".join(repr(n) for n in names) or "none"
        raise ConfigurationError(
            f"rule {rule.name!r} reads metric {metric!r}, which no MetricDefinition of this job produces (defined: "
            f"{known}).{did_you_mean(metric, names)} Add it to metric_definitions= "
            f"(e.g. {{{metric!r}: r'{metric.split(':')[-1]}=([0-9.eE+-]+)'}}) or fix {argument}=.",
            where=where, field=f"rule_set > {rule.name}.{argument}", value=metric)


def _debugger_defaults(name: str) -> dict[str, Any]:
    return {p.name: p.default for p in DEBUGGER_RULE_SPECS[name].parameters}


def comparison_markdown() -> str:
    """The docs table: each metric rule's parameters next to its Debugger rule's (``docs/metric-rules.md``)."""
    lines = ["| Rule (ours) | Parameter (ours) = default | Debugger rule | Debugger parameter = default |",
             "|---|---|---|---|"]
    for spec in METRIC_RULE_SPECS.values():
        theirs = _debugger_defaults(spec.debugger_rule)
        for argument in spec.metric_arguments:
            lines.append(f"| `{spec.name}` | `{argument}` (required) | `{spec.debugger_rule}` | — |")
        for p in spec.parameters:
            match = f"`{p.name}` = {theirs[p.name]!r}" if p.name in theirs else "—"
            lines.append(f"| `{spec.name}` | `{p.name}` = {p.default!r} | `{spec.debugger_rule}` | {match} |")
        for debugger_parameter, instead in spec.replaced:
            lines.append(f"| `{spec.name}` | {instead} | `{spec.debugger_rule}` | `{debugger_parameter}` |")
    return "\n".join(lines)
