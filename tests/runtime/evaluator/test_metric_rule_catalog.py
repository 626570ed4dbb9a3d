"""The metric-rule catalog has one definition, in the model (model/rules/metric.py). The evaluator cannot import the
model (each Lambda asset holds one runtime package), so it keeps the few facts it needs; this test ties them to the
model's: the same rules, the same metric arguments, the same parameters with the same defaults and limits."""

from __future__ import annotations

from cdk_sagemaker_debugger.model.metric_rules import METRIC_RULE_SPECS
from cdk_sagemaker_debugger.runtime.evaluator import metric_rules as runtime


def test_the_evaluator_knows_exactly_the_models_metric_rules():
    assert set(runtime.RULES) == set(METRIC_RULE_SPECS)
    assert set(runtime._SUMMARIES) == set(METRIC_RULE_SPECS)


def test_each_rule_reads_the_same_metrics_with_the_same_parameters_and_defaults():
    for name, spec in METRIC_RULE_SPECS.items():
        arguments, defaults = runtime.RULES[name]
        assert arguments == spec.metric_arguments, name
        assert defaults == {p.name: p.default for p in spec.parameters}, name


def test_whole_numbers_and_minimums_follow_the_parameter_specs():
    parameters = [p for spec in METRIC_RULE_SPECS.values() for p in spec.parameters]
    assert runtime._WHOLE == {p.name for p in parameters if p.whole}
    # the evaluator's default minimum is 0; it lists the parameters whose minimum is higher
    assert runtime._MINIMUM == {p.name: p.minimum for p in parameters if p.whole and p.minimum}
