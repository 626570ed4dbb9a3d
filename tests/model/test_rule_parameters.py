"""One parameter vocabulary (model/rules/parameters.py) for every rule kind: what each spec accepts, the words of its
errors, the ordering check, and that every catalog is written in it."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from cdk_sagemaker_debugger import debugger_rules, rules
from cdk_sagemaker_debugger.model.errors import ConfigurationError, ConfigurationTypeError
from cdk_sagemaker_debugger.model.rules.debugger_catalog import DEBUGGER_RULE_SPECS
from cdk_sagemaker_debugger.model.rules.health import HEALTH_RULE_SPECS
from cdk_sagemaker_debugger.model.rules.metric import METRIC_RULE_SPECS
from cdk_sagemaker_debugger.model.rules.parameters import Param, check_order, validate_parameters
from cdk_sagemaker_debugger.model.rules.profiler_catalog import PROFILER_RULE_SPECS

WHERE = "rule 'R'"


def error_of(spec: Param, value: object) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as raised:
        spec.validate(value, where=WHERE)
    return raised.value


@pytest.mark.parametrize(
    ("spec", "accepted", "refused", "message"),
    [
        (Param.number("x", 1, "", above=0), [1e-9, 3], [0, -1], "rule 'R': x: must be greater than 0, got 0."),
        (Param.number("x", 1, "", minimum=0), [0, 2.5], [-0.001], "rule 'R': x: must be 0 or greater, got -0.001."),
        (Param.number("x", 1, "", minimum=1, maximum=5), [1, 5], [0.5, 6], "rule 'R': x: must be between 1 and 5 inclusive, got 0.5."),
        (Param.number("x", 1, "", below=10), [9.99, -50], [10], "rule 'R': x: must be less than 10, got 10."),
        (Param.number("x", 1, "", above=0, maximum=1), [1], [0], "rule 'R': x: must be > 0 and <= 1, got 0."),
        (Param.number("x", 1, ""), [-23, 16.99999], [float("inf")], "rule 'R': x: must be a finite number, got inf."),
        (Param.percent("x", 50, ""), [0, 100], [100.5], "rule 'R': x: is a percentage and must be between 0 and 100 inclusive, got 100.5."),
        (Param.percent("x", 5, "", exclusive=True), [0.1, 99.9], [0, 100], "rule 'R': x: is a percentage strictly between 0 and 100, got 0."),
        (Param.proportion("x", 0.5, ""), [0, 1], [40], "rule 'R': x: is a proportion between 0 and 1 (0.2 means 20%), got 40. Did you mean 0.4 (40%)?"),
        (Param.proportion("x", 0.5, ""), [], [-0.5], "rule 'R': x: is a proportion between 0 and 1 (0.2 means 20%), got -0.5."),
        (Param.integer("x", 3, ""), [1, 10**9], [0], "rule 'R': x: must be a positive integer (> 0), got 0."),
        (Param.integer("x", 0, "", minimum=0), [0], [-1], "rule 'R': x: must be an integer >= 0, got -1."),
        (Param.integer("x", None, "", minimum=2), [2], [1], "rule 'R': x: must be an integer >= 2, got 1."),
        (Param.choice("x", "A", "", ("A", "B")), ["B"], ["b"], "rule 'R': x: must be one of 'A', 'B', got 'b'. Did you mean 'B'?"),
        (Param.choice("x", None, "", ("A", "B")), [None, "A"], ["C"], "rule 'R': x: must be one of 'A', 'B', got 'C'."),
        (Param.regex("x", None, ""), [".*relu"], ["(*"], "rule 'R': x: '(*' is not a valid regular expression (nothing to repeat at position 1)."),
        (Param.string_list("x", "0", ""), ["0,1", [0, 1]], ["0,,1"], "rule 'R': x: must list one or more values separated by commas, got '0,,1'."),
        (Param.percent_list("x", "50", ""), ["50,20.5", (1, 2)], ["50,150"], "rule 'R': x: every item is a percentage between 0 and 100, got '150' in '50,150'."),
        (Param.any("x", "", ""), ["", 13, [1]], [], None),
    ],
)
def test_each_kind_accepts_its_values_and_words_its_refusals(spec, accepted, refused, message):
    for value in accepted:
        spec.validate(value, where=WHERE)
    errors = [error_of(spec, value) for value in refused]  # each refused value raises
    assert [str(e) for e in errors[:1]] == ([message] if refused else [])


@pytest.mark.parametrize(
    ("spec", "value", "message"),
    [
        (Param.number("x", 50, ""), "90", "rule 'R': x: expected a number, got str '90'. Pass it unquoted, e.g. x=50."),
        (Param.percent("x", 50, ""), True, "rule 'R': x: expected a number, got bool True. Pass it unquoted, e.g. x=50."),
        (Param.integer("x", 3, ""), 2.0, "rule 'R': x: expected a positive integer, got float 2.0."),
        (Param.integer("x", 0, "", minimum=0), False, "rule 'R': x: expected an integer >= 0, got bool False."),
        (Param.boolean("x", False, ""), "True", "rule 'R': x: expected True or False, got str 'True'."),
        (Param.choice("x", None, "", ("A",)), 1, "rule 'R': x: expected one of 'A' or None, got int 1."),
        (Param.string("x", "labels", ""), "", "rule 'R': x: expected a non-empty string, got str ''."),
        (Param.string_list("x", "0", ""), 0, "rule 'R': x: expected a comma-separated string or a list, got int 0."),
    ],
)
def test_a_wrong_type_is_a_type_error_naming_the_type_and_value(spec, value, message):
    error = error_of(spec, value)
    assert isinstance(error, ConfigurationTypeError) and isinstance(error, TypeError)
    assert str(error) == message and error.field == "x" and error.value == value


def test_tokens_are_left_for_cloudformation():
    for spec in (Param.integer("x", 1, ""), Param.percent("x", 1, ""), Param.boolean("x", True, "")):
        spec.validate("${Token[TOKEN.7]}", where=WHERE)
        spec.validate(-1.8881545897087626e289, where=WHERE)


def test_a_number_has_one_lower_and_one_upper_bound():
    with pytest.raises(ValueError, match="one lower bound"):
        Param.number("x", 1, "", above=0, minimum=0)


def test_what_a_spec_tells_the_stubs_the_cli_and_the_evaluator():
    patience, start = Param.integer("patience", 1000, "Skip."), Param.integer("start_step", 0, "", minimum=0)
    assert (patience.python_type, patience.whole, patience.minimum, patience.constraint) == ("int", True, 1, "integer >= 1")
    assert (start.whole, start.minimum) == (True, 0)
    delta = Param.number("delta", 0.01, "", minimum=0)
    assert (delta.python_type, delta.whole, delta.minimum, delta.constraint) == ("float", False, 0, "number >= 0")
    assert Param.number("t", 1, "", above=0).minimum is None  # an exclusive bound is no minimum
    assert Param.choice("mode", None, "", ("TRAIN",)).python_type == "str | None"
    assert Param.percent("p", 50, "").constraint == "percentage, 0 to 100"
    assert patience.describe() == {"name": "patience", "default": 1000, "description": "Skip.", "type": "int",
                                   "accepts": "integer >= 1"}
    assert Param.choice("m", "A", "", ("A", "B")).describe()["choices"] == ["A", "B"]


def test_render_joins_lists_and_strings_everything_else():
    spec = Param.string_list("x", "0", "")
    assert (spec.render([0, 1]), spec.render("0,1"), spec.render(True), spec.render(2.5)) == ("0,1", "0,1", "True", "2.5")


def test_validate_parameters_fills_defaults_in_spec_order_and_names_unknown_ones():
    specs = (Param.integer("window", 500, ""), Param.percent("threshold", 70, ""))
    assert validate_parameters(specs, {"threshold": 80}, where=WHERE) == {"window": 500, "threshold": 80}
    with pytest.raises(ConfigurationTypeError, match=r"^rule 'R': treshold: unknown parameter 'treshold'\. Did you mean "
                                                     r"'threshold'\? Accepted: window, threshold\.$"):
        validate_parameters(specs, {"treshold": 80}, where=WHERE)


class TestOrder:
    SPECS = (Param.number("low", 70, "", above=0), Param.number("high", 200, "", above=0))

    def test_both_given(self):
        with pytest.raises(ConfigurationError) as raised:
            check_order(self.SPECS, {"low": 300, "high": 100}, (("low", "high"),), where=WHERE)
        assert str(raised.value) == "rule 'R': low: low (300) must be lower than high (100)."

    def test_one_side_given_is_compared_with_the_default_and_named_as_the_field(self):
        with pytest.raises(ConfigurationError) as raised:
            check_order(self.SPECS, {"high": 50}, (("low", "high"),), where=WHERE)
        assert str(raised.value) == "rule 'R': high: low (70, the default) must be lower than high (50)."
        assert raised.value.field == "high"

    def test_ordered_or_untouched_or_tokens_pass(self):
        for given in ({}, {"low": 10}, {"high": "${Token[T.1]}"}):
            check_order(self.SPECS, given, (("low", "high"),), where=WHERE)

    def test_the_profiler_and_the_debugger_catalogs_use_it(self):
        with pytest.raises(ConfigurationError, match=r"^rule 'Dataloader': max_threshold: min_threshold \(70, the "
                                                     r"default\) must be lower than max_threshold \(50\)\.$"):
            rules.Dataloader(max_threshold=50)
        with pytest.raises(ConfigurationError, match=r"^rule 'TensorVariance': min_threshold: min_threshold \(5\) must "
                                                     r"be lower than max_threshold \(1\)\.$"):
            debugger_rules.TensorVariance(min_threshold=5, max_threshold=1)


def test_every_rule_kind_is_written_in_the_one_vocabulary():
    catalogs = {"profiler": PROFILER_RULE_SPECS, "health": HEALTH_RULE_SPECS, "metric": METRIC_RULE_SPECS,
                "debugger": DEBUGGER_RULE_SPECS}
    for kind, specs in catalogs.items():
        for spec in specs.values():
            for parameter in spec.parameters:
                assert type(parameter) is Param, (kind, spec.name, parameter)
    # the same scan_interval_us everywhere it appears
    scans = {p for specs in (PROFILER_RULE_SPECS, HEALTH_RULE_SPECS) for s in specs.values() for p in s.parameters
             if p.name == "scan_interval_us"}
    assert len(scans) == 1 and next(iter(scans)).constraint == "integer >= 1"


@pytest.mark.parametrize(
    ("old", "new"),
    [("parameters", "parameters"), ("rule_base", "base"), ("profiler_catalog", "profiler_catalog"),
     ("profiler_rules", "profiler"), ("health_rules", "health"), ("metric_rules", "metric"),
     ("debugger_rules", "debugger"), ("evaluator_tensor_rules", "evaluator_tensor")],
)
def test_the_old_module_paths_are_the_moved_modules(old, new):
    assert importlib.import_module(f"cdk_sagemaker_debugger.model.{old}") is importlib.import_module(
        f"cdk_sagemaker_debugger.model.rules.{new}")


def test_no_model_module_is_over_600_lines():
    model = Path(importlib.import_module("cdk_sagemaker_debugger.model").__file__).parent
    long = {str(p.relative_to(model)): n for p in model.rglob("*.py") if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}
