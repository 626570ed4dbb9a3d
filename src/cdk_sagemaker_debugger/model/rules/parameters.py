"""One vocabulary for the parameters of every rule kind: profiler, training-health, metric and debugger (tensor) rules.

A catalog entry says what a parameter is, in words a reader checks against the rule's documentation::

    Param.percent("threshold", 50, "Percentage of total time with CPU bottlenecks that triggers the rule.")
    Param.integer("patience", 1000, "Data points to skip before the rule starts evaluating.")        # >= 1
    Param.integer("start_step", 0, "Step at which the comparison starts.", minimum=0)
    Param.number("stddev", 3, "Standard deviations above the mean ...", above=0)
    Param.choice("mode", None, "Only steps of this mode ...", ("TRAIN", "EVAL", "PREDICT", "GLOBAL"))

The released ``smdebug-rulesconfig`` validates with ``assert`` (gone under ``python -O``) and lets ``0.5`` through as a
"positive integer". Here every check raises a real exception that names the rule, the parameter, the value and the fix;
unresolved CDK tokens are left for CloudFormation. The same specs give the generated classes their docstrings, the
type stubs their annotations and the CLI's ``rules`` listing its types and bounds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import ConfigurationError, ConfigurationTypeError, did_you_mean
from ..tokens import is_token

__all__ = ["Param", "ParameterSpec", "ValueCheck", "validate_parameters", "check_order", "is_token"]


def _text(number: float) -> str:
    return repr(number) if isinstance(number, int) else f"{number:g}"


def _type_error(spec: Param, value: Any, where: str, expected: str) -> ConfigurationTypeError:
    return ConfigurationTypeError(
        f"expected {expected}, got {type(value).__name__} {value!r}.", where=where, field=spec.name, value=value
    )


def _finite_number(spec: Param, value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationTypeError(
            f"expected a number, got {type(value).__name__} {value!r}. Pass it unquoted, e.g. {spec.name}={spec.example!r}.",
            where=where,
            field=spec.name,
            value=value,
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigurationError(f"must be a finite number, got {value!r}.", where=where, field=spec.name, value=value)
    return value


class ValueCheck(Protocol):
    """What a parameter's values may be: checked at synth time, described in the stubs and the CLI."""

    def check(self, spec: Param, value: Any, where: str) -> None: ...

    def python_type(self, spec: Param) -> str: ...

    def constraint(self, spec: Param) -> str: ...


@dataclass(frozen=True)
class Number:
    """A finite number within optional bounds; ``unit`` "percentage" or "proportion" words the error for the reader."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    unit: str = ""

    def check(self, spec: Param, value: Any, where: str) -> None:
        number = _finite_number(spec, value, where)
        below = self.low is not None and (number <= self.low if self.open_low else number < self.low)
        over = self.high is not None and (number >= self.high if self.open_high else number > self.high)
        if below or over:
            raise ConfigurationError(self._out_of_range(value, number), where=where, field=spec.name, value=value)

    def _out_of_range(self, value: Any, number: float) -> str:
        if self.unit == "proportion":
            hint = f" Did you mean {number / 100:g} ({number:g}%)?" if 1 < number <= 100 else ""
            return f"is a proportion between 0 and 1 (0.2 means 20%), got {value!r}.{hint}"
        if self.unit == "percentage":
            if self.open_low and self.open_high:
                return f"is a percentage strictly between 0 and 100, got {value!r}."
            return f"is a percentage and must be between 0 and 100 inclusive, got {value!r}."
        return f"must be {self._bounds_words()}, got {value!r}."

    def _bounds_words(self) -> str:
        low = None if self.low is None else _text(self.low)
        high = None if self.high is None else _text(self.high)
        if high is None:
            return f"greater than {low}" if self.open_low else f"{low} or greater"
        if low is None:
            return f"less than {high}" if self.open_high else f"{high} or less"
        if not self.open_low and not self.open_high:
            return f"between {low} and {high} inclusive"
        return f"{'>' if self.open_low else '>='} {low} and {'<' if self.open_high else '<='} {high}"

    def python_type(self, spec: Param) -> str:
        return "float"

    def constraint(self, spec: Param) -> str:
        if self.unit == "percentage":
            return "percentage, strictly between 0 and 100" if self.open_low else "percentage, 0 to 100"
        if self.unit == "proportion":
            return "proportion, 0 to 1"
        if self.low is None and self.high is None:
            return "finite number"
        bounds = [f"{'>' if self.open_low else '>='} {_text(self.low)}"] if self.low is not None else []
        if self.high is not None:
            bounds.append(f"{'<' if self.open_high else '<='} {_text(self.high)}")
        return f"number {' and '.join(bounds)}"


@dataclass(frozen=True)
class Integer:
    """A whole number (``int``, not ``float`` or ``bool``) of at least ``minimum``."""

    minimum: int = 1

    def check(self, spec: Param, value: Any, where: str) -> None:
        positive = self.minimum == 1
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(spec, value, where, "a positive integer" if positive else f"an integer >= {self.minimum}")
        if value < self.minimum:
            text = "must be a positive integer (> 0)" if positive else f"must be an integer >= {self.minimum}"
            raise ConfigurationError(f"{text}, got {value!r}.", where=where, field=spec.name, value=value)

    def python_type(self, spec: Param) -> str:
        return "int"

    def constraint(self, spec: Param) -> str:
        return f"integer >= {self.minimum}"


@dataclass(frozen=True)
class Boolean:
    def check(self, spec: Param, value: Any, where: str) -> None:
        if not isinstance(value, bool):
            raise _type_error(spec, value, where, "True or False")

    def python_type(self, spec: Param) -> str:
        return "bool"

    def constraint(self, spec: Param) -> str:
        return "True or False"


@dataclass(frozen=True)
class Choice:
    """One of ``choices``; None too when the default is None (the rule then takes every value)."""

    choices: tuple[str, ...]

    def check(self, spec: Param, value: Any, where: str) -> None:
        if value is None and spec.default is None:
            return
        listed = ", ".join(map(repr, self.choices))
        if not isinstance(value, str):
            none = " or None" if spec.default is None else ""
            raise _type_error(spec, value, where, f"one of {listed}{none}")
        if value not in self.choices:
            raise ConfigurationError(
                f"must be one of {listed}, got {value!r}.{did_you_mean(value, self.choices)}",
                where=where,
                field=spec.name,
                value=value,
            )

    def python_type(self, spec: Param) -> str:
        return "str | None" if spec.default is None else "str"

    def constraint(self, spec: Param) -> str:
        return f"one of {', '.join(self.choices)}{' or None' if spec.default is None else ''}"


@dataclass(frozen=True)
class Text:
    """A non-empty string; with ``regex`` it must compile as a regular expression."""

    regex: bool = False

    def check(self, spec: Param, value: Any, where: str) -> None:
        if not isinstance(value, str) or not value:
            raise _type_error(spec, value, where, "a non-empty string")
        if self.regex:
            try:
                re.compile(value)
            except re.error as error:
                raise ConfigurationError(
                    f"{value!r} is not a valid regular expression ({error}).", where=where, field=spec.name, value=value
                ) from None

    def python_type(self, spec: Param) -> str:
        return "str"

    def constraint(self, spec: Param) -> str:
        return "regular expression" if self.regex else "non-empty string"


@dataclass(frozen=True)
class ValueList:
    """One or more values, as a comma-separated string or a list (sent comma-joined); ``percentages`` 0 to 100 each."""

    percentages: bool = False

    def check(self, spec: Param, value: Any, where: str) -> None:
        if isinstance(value, str):
            items = [item.strip() for item in value.split(",")]
        elif isinstance(value, (list, tuple)):
            items = [str(item) for item in value]
        else:
            raise _type_error(spec, value, where, "a comma-separated string or a list")
        if not items or any(not item for item in items):
            raise ConfigurationError(
                f"must list one or more values separated by commas, got {value!r}.", where=where, field=spec.name, value=value
            )
        for item in items if self.percentages else ():
            try:
                number = float(item)
            except ValueError:
                number = math.nan
            if not 0 <= number <= 100:
                raise ConfigurationError(
                    f"every item is a percentage between 0 and 100, got {item!r} in {value!r}.",
                    where=where,
                    field=spec.name,
                    value=value,
                )

    def python_type(self, spec: Param) -> str:
        return "str | list"

    def constraint(self, spec: Param) -> str:
        return "comma-separated percentages, 0 to 100 each" if self.percentages else "comma-separated values"


@dataclass(frozen=True)
class Anything:
    """Passed to the rule as given (the rule reads it leniently)."""

    def check(self, spec: Param, value: Any, where: str) -> None:
        return None

    def python_type(self, spec: Param) -> str:
        return "object"

    def constraint(self, spec: Param) -> str:
        return "any value"


@dataclass(frozen=True)
class Param:
    """One rule parameter: its name, its default (the value the rule uses when it is not given), what it means, and
    what its values may be. Build one with the constructors below (``Param.percent(...)``, ``Param.integer(...)``)."""

    name: str
    default: Any
    doc: str
    values: ValueCheck = field(default_factory=Anything)

    # -- the vocabulary --------------------------------------------------------------------------------------------------
    @classmethod
    def number(
        cls,
        name: str,
        default: Any,
        doc: str,
        *,
        above: float | None = None,
        minimum: float | None = None,
        maximum: float | None = None,
        below: float | None = None,
    ) -> Param:
        """A finite number; ``above``/``below`` are exclusive bounds, ``minimum``/``maximum`` inclusive ones."""
        if (above is not None and minimum is not None) or (below is not None and maximum is not None):
            raise ValueError(f"{name}: give one lower bound (above= or minimum=) and one upper bound (below= or maximum=)")
        low, high = (above if above is not None else minimum), (below if below is not None else maximum)
        return cls(name, default, doc, Number(low, high, above is not None, below is not None))

    @classmethod
    def percent(cls, name: str, default: Any, doc: str, *, exclusive: bool = False) -> Param:
        """A percentage from 0 to 100 (inclusive; ``exclusive=True``: strictly between)."""
        return cls(name, default, doc, Number(0, 100, exclusive, exclusive, "percentage"))

    @classmethod
    def proportion(cls, name: str, default: Any, doc: str) -> Param:
        """A share from 0 to 1 inclusive (0.2 means 20 %); a value like 20 gets a "did you mean 0.2" hint."""
        return cls(name, default, doc, Number(0, 1, unit="proportion"))

    @classmethod
    def integer(cls, name: str, default: Any, doc: str, *, minimum: int = 1) -> Param:
        """A whole number of at least ``minimum`` (default 1: a positive integer)."""
        return cls(name, default, doc, Integer(minimum))

    @classmethod
    def boolean(cls, name: str, default: Any, doc: str) -> Param:
        return cls(name, default, doc, Boolean())

    @classmethod
    def choice(cls, name: str, default: Any, doc: str, choices: tuple[str, ...]) -> Param:
        """One of ``choices``; a default of None means the rule takes every value and None is accepted."""
        return cls(name, default, doc, Choice(tuple(choices)))

    @classmethod
    def string(cls, name: str, default: Any, doc: str) -> Param:
        """A non-empty string."""
        return cls(name, default, doc, Text())

    @classmethod
    def regex(cls, name: str, default: Any, doc: str) -> Param:
        """A regular expression (checked to compile)."""
        return cls(name, default, doc, Text(regex=True))

    @classmethod
    def string_list(cls, name: str, default: Any, doc: str) -> Param:
        """One or more values, comma-separated or as a list."""
        return cls(name, default, doc, ValueList())

    @classmethod
    def percent_list(cls, name: str, default: Any, doc: str) -> Param:
        """One or more percentages (0 to 100), comma-separated or as a list."""
        return cls(name, default, doc, ValueList(percentages=True))

    @classmethod
    def any(cls, name: str, default: Any, doc: str) -> Param:
        """Any value, sent as its string (for parameters the rule parses leniently itself)."""
        return cls(name, default, doc, Anything())

    # -- what the spec tells --------------------------------------------------------------------------------------------
    @property
    def choices(self) -> tuple[str, ...]:
        return self.values.choices if isinstance(self.values, Choice) else ()

    @property
    def whole(self) -> bool:
        """True when the value is a whole number."""
        return isinstance(self.values, Integer)

    @property
    def minimum(self) -> float | None:
        """The smallest value accepted (inclusive), or None: a whole number's minimum, or a number's inclusive bound."""
        if isinstance(self.values, Integer):
            return self.values.minimum
        if isinstance(self.values, Number) and not self.values.open_low:
            return self.values.low
        return None

    @property
    def example(self) -> Any:
        return self.default if self.default is not None else (self.choices[0] if self.choices else 1)

    @property
    def python_type(self) -> str:
        """Type annotation used in the generated stubs and the docstrings."""
        return self.values.python_type(self)

    @property
    def constraint(self) -> str:
        """What values are accepted, in a few words (``integer >= 1``, ``percentage, >= 0 and <= 100``)."""
        return self.values.constraint(self)

    def describe(self) -> dict[str, Any]:
        """The spec as data (the CLI's ``rules --format json``)."""
        described = {"name": self.name, "default": self.default, "description": self.doc, "type": self.python_type,
                     "accepts": self.constraint}
        if self.choices:
            described["choices"] = list(self.choices)
        return described

    def validate(self, value: Any, *, where: str) -> None:
        """Raise ConfigurationError (ConfigurationTypeError for a wrong type) unless ``value`` is accepted."""
        if is_token(value):
            return
        self.values.check(self, value, where)

    def render(self, value: Any) -> str:
        """The value as the API's RuleParameters string: lists comma-joined, everything else through ``str()``."""
        if isinstance(value, (list, tuple)):
            return ",".join(str(item) for item in value)
        # str() also for a CDK number token: its text stands for the number inside a string, which the API requires
        return value if isinstance(value, str) else str(value)


#: The name the catalogs used before the vocabulary had its constructors; the same class.
ParameterSpec = Param


def validate_parameters(
    specs: tuple[Param, ...], given: Mapping[str, Any], *, where: str, noun: str = "parameter"
) -> dict[str, Any]:
    """Validate ``given`` against ``specs`` and return every parameter in spec order with defaults filled in."""
    by_name = {s.name: s for s in specs}
    for key in given:
        if key not in by_name:
            accepted = ", ".join(by_name) or "none"
            raise ConfigurationTypeError(
                f"unknown {noun} {key!r}.{did_you_mean(key, by_name)} Accepted: {accepted}.",
                where=where,
                field=key,
                value=given[key],
            )
    result: dict[str, Any] = {}
    for spec in specs:
        value = given.get(spec.name, spec.default)
        if spec.name in given:
            spec.validate(value, where=where)
        result[spec.name] = value
    return result


def check_order(
    specs: tuple[Param, ...], given: Mapping[str, Any], pairs: tuple[tuple[str, str], ...], *, where: str
) -> None:
    """Raise unless each (lower, higher) pair is ordered; a value given on one side is compared with the default of the
    other, and the message says which value is the default."""
    defaults = {spec.name: spec.default for spec in specs}
    for low, high in pairs:
        if low not in given and high not in given:
            continue
        low_value, high_value = given.get(low, defaults[low]), given.get(high, defaults[high])
        if low_value is None or high_value is None or is_token(low_value) or is_token(high_value):
            continue
        if low_value >= high_value:
            low_text = f"{low_value}{'' if low in given else ', the default'}"
            high_text = f"{high_value}{'' if high in given else ', the default'}"
            raise ConfigurationError(
                f"{low} ({low_text}) must be lower than {high} ({high_text}).",
                where=where,
                field=low if low in given else high,
                value=given.get(low, given.get(high)),
            )
