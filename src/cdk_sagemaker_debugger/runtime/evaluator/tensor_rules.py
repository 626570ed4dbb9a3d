"""Debugger's tensor rules, re-implemented on the tensor collector's reductions (docs/tensor-rules.md).

Debugger's rule code was never published, so these follow its documented semantics, with its parameter names and
defaults; where the documentation leaves a choice, the choice and its reason are in docs/tensor-rules.md. Each rule
sees the recorded steps in order (``check``) and returns what it found at that step; the first step with a finding
is the step the verdict names, as Debugger's "...at step 500..." does.
"""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar

from .rules import RuleConfigError, coerce_parameter
from .tensor_data import StepData

# collection name (Debugger's) -> the record kind holding it
COLLECTION_KINDS = {"weights": "weight", "gradients": "gradient", "biases": "weight", "all": None}


class TensorRule:
    """One configured tensor rule; parameters are Debugger's (strings from RuleParameters are converted)."""

    name: ClassVar[str]
    summary: ClassVar[str]
    #: (parameter, default) in Debugger's order; None means "not set".
    defaults: ClassVar[dict[str, Any]]
    #: The collector collections this rule needs (model/tensor_rules.py renders the same).
    kinds: ClassVar[tuple[str, ...]] = ("weight", "gradient")

    def __init__(self, configuration_name: str, parameters: dict[str, Any]):
        self.configuration_name = configuration_name
        given = {k: coerce_parameter(v) for k, v in parameters.items() if k != "rule_to_invoke"}
        unknown = sorted(set(given) - set(self.defaults))
        if unknown:
            raise RuleConfigError(f"{configuration_name}: unknown parameter(s) {', '.join(unknown)}; "
                                  f"{self.name} accepts {', '.join(self.defaults)}")
        self.p = {**self.defaults, **given}
        self.checked = 0  # tensors (or layers) judged so far: zero at the end means NotApplicable
        self.setup()

    def setup(self) -> None:
        pass

    # -- parameter helpers
    def number(self, key: str, minimum: float | None = None) -> float | None:
        value = self.p[key]
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (
                minimum is not None and value < minimum):
            raise RuleConfigError(f"{self.configuration_name}: {key}={value!r} is not a number"
                                  f"{'' if minimum is None else f' >= {minimum}'}")
        return float(value)

    def whole(self, key: str, minimum: int = 1) -> int | None:
        value = self.number(key, minimum)
        if value is not None and value != int(value):
            raise RuleConfigError(f"{self.configuration_name}: {key}={self.p[key]!r} is not a whole number")
        return None if value is None else int(value)

    def regex(self, key: str) -> re.Pattern[str] | None:
        value = self.p[key]
        if value in (None, ""):
            return None
        try:
            return re.compile(str(value))
        except re.error as exc:
            raise RuleConfigError(f"{self.configuration_name}: {key}={value!r} is not a regular expression ({exc})"
                                  ) from None

    def selected(self, data: StepData, default_kinds: tuple[str, ...]) -> list[tuple[str, str, dict[str, Any]]]:
        """(kind, name, record) of the tensors chosen by collection_names and tensor_regex (Debugger's selection)."""
        kinds = list(default_kinds)
        collections = self.p.get("collection_names")
        if collections:
            names = [c.strip() for c in str(collections).split(",") if c.strip()]
            kinds = [k for c in names for k in ([COLLECTION_KINDS[c]] if COLLECTION_KINDS.get(c) else ["weight", "gradient"])
                     if c in COLLECTION_KINDS]
        pattern = self.regex("tensor_regex") if "tensor_regex" in self.p else None
        out = []
        for kind in dict.fromkeys(kinds):
            for name, record in sorted(data.get(kind).items()):
                if pattern is None or pattern.search(name) or pattern.search(f"{kind}/{name}"):
                    out.append((kind, name, record))
        return out

    def check(self, data: StepData) -> list[str]:
        raise NotImplementedError

    def finish(self) -> str | None:
        """Why the rule could not judge anything (NotApplicable), or None."""
        return None if self.checked else "the tensor collector recorded none of the tensors this rule reads"

    # -- state (the Lambda continues from JSON)
    def to_state(self) -> dict[str, Any]:
        return {"checked": self.checked}

    def load_state(self, state: dict[str, Any]) -> None:
        self.checked = int(state.get("checked", 0))


def _mean(record: dict[str, Any], key: str) -> float:
    return record[key] / record["n"] if record.get("n") else math.nan


def variance(record: dict[str, Any]) -> float:
    n = record.get("n") or 0
    if not n:
        return math.nan
    mean = record["sum"] / n
    return max(record["sumsq"] / n - mean * mean, 0.0)


def _fmt(value: float) -> str:
    return f"{value:.4g}"


class VanishingGradient(TensorRule):
    name = "VanishingGradient"
    summary = "The mean absolute value of every gradient must stay at or above threshold."
    defaults = {"threshold": 0.0000001}
    kinds = ("gradient",)

    def check(self, data: StepData) -> list[str]:
        threshold = self.number("threshold", 0)
        found = []
        for _kind, name, record in self.selected(data, ("gradient",)):
            self.checked += 1
            mean = _mean(record, "abs_sum")
            if math.isfinite(mean) and mean < threshold:
                found.append(f"gradient {name}: mean |g| {_fmt(mean)} < threshold {_fmt(threshold)}")
        return found


class ExplodingTensor(TensorRule):
    name = "ExplodingTensor"
    summary = "No tensor may hold NaN (nor Inf, unless only_nan is True)."
    defaults = {"collection_names": None, "tensor_regex": None, "only_nan": False}

    def check(self, data: StepData) -> list[str]:
        only_nan = bool(self.p["only_nan"])
        found = []
        for kind, name, record in self.selected(data, ("gradient", "weight")):
            self.checked += 1
            nan, inf = record.get("nan"), record.get("inf")
            if nan is None or inf is None:  # counts unknown: the sums say whether something is not finite
                bad = not all(math.isfinite(record[k]) for k in ("sum", "sumsq"))
                if bad:
                    found.append(f"{kind} {name}: its sums are not finite (NaN or Inf)")
                continue
            if nan or (inf and not only_nan):
                found.append(f"{kind} {name}: {int(nan)} NaN and {int(inf)} Inf of {int(record['n'])} values")
        return found


class AllZero(TensorRule):
    name = "AllZero"
    summary = "No tensor may have threshold percent or more of its values equal to zero."
    defaults = {"collection_names": None, "tensor_regex": None, "threshold": 100}

    def check(self, data: StepData) -> list[str]:
        threshold = self.number("threshold", 0)
        found = []
        for kind, name, record in self.selected(data, ("gradient", "weight")):
            if not record.get("n"):
                continue
            self.checked += 1
            percent = 100.0 * record["zero"] / record["n"]
            if percent >= threshold:
                found.append(f"{kind} {name}: {_fmt(percent)} % zeros >= threshold {_fmt(threshold)} %")
        return found


class TensorVariance(TensorRule):
    name = "TensorVariance"
    summary = "The variance of every tensor must stay within min_threshold and max_threshold."
    defaults = {"collection_names": None, "tensor_regex": None, "max_threshold": None, "min_threshold": None}

    def setup(self) -> None:
        if self.number("max_threshold") is None and self.number("min_threshold") is None:
            raise RuleConfigError(f"{self.configuration_name}: set max_threshold, min_threshold or both; without "
                                  "them TensorVariance has nothing to check")

    def check(self, data: StepData) -> list[str]:
        high, low = self.number("max_threshold"), self.number("min_threshold")
        found = []
        for kind, name, record in self.selected(data, ("weight",)):
            value = variance(record)
            if not math.isfinite(value):
                continue
            self.checked += 1
            if high is not None and value > high:
                found.append(f"{kind} {name}: variance {_fmt(value)} > max_threshold {_fmt(high)}")
            if low is not None and value < low:
                found.append(f"{kind} {name}: variance {_fmt(value)} < min_threshold {_fmt(low)}")
        return found


class UnchangedTensor(TensorRule):
    name = "UnchangedTensor"
    summary = "No tensor may stay allclose(rtol, atol) to itself over num_steps consecutive recorded steps."
    defaults = {"collection_names": None, "tensor_regex": None, "num_steps": 3, "rtol": 1e-05, "atol": 1e-08,
                "equal_nan": False}

    def setup(self) -> None:
        self.runs: dict[str, int] = {}  # tensor -> consecutive recorded steps it stayed unchanged (incl. the first)

    def check(self, data: StepData) -> list[str]:
        num_steps, rtol, atol = self.whole("num_steps", 2), self.number("rtol", 0), self.number("atol", 0)
        found = []
        for name, record in sorted(data.get("unchanged").items()):
            if self.p["tensor_regex"] and not self.regex("tensor_regex").search(name):
                continue
            if not math.isclose(record.get("rtol", rtol), rtol, rel_tol=1e-9):
                raise RuleConfigError(f"{self.configuration_name}: rtol={rtol} but the collector compared with rtol="
                                      f"{record.get('rtol')}; evaluate with the rtol the job was configured with")
            self.checked += 1
            margin = record["margin"]
            same = margin <= atol if not math.isnan(margin) else bool(self.p["equal_nan"])
            self.runs[name] = self.runs.get(name, 1) + 1 if same else 1
            if self.runs[name] >= num_steps:
                found.append(f"weight {name}: unchanged (allclose rtol={rtol}, atol={atol}) over "
                             f"{self.runs[name]} recorded steps")
        return found

    def to_state(self) -> dict[str, Any]:
        return {**super().to_state(), "runs": self.runs}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.runs = {str(k): int(v) for k, v in dict(state.get("runs", {})).items()}


class WeightUpdateRatio(TensorRule):
    name = "WeightUpdateRatio"
    summary = "The ratio of each weight's update norm to its norm must stay between small_threshold and large_threshold."
    defaults = {"num_steps": None, "large_threshold": 10.0, "small_threshold": 0.00000001, "epsilon": 0.000000001}
    kinds = ("weight", "update")

    def setup(self) -> None:
        self.seen_steps = 0

    def check(self, data: StepData) -> list[str]:
        every = self.whole("num_steps", 1)
        large, small, epsilon = self.number("large_threshold"), self.number("small_threshold"), self.number("epsilon", 0)
        updates = data.get("update")
        if not updates:
            return []
        self.seen_steps += 1
        if every is not None and (self.seen_steps - 1) % every:
            return []
        found = []
        for name, weight in sorted(data.get("weight").items()):
            update = updates.get(name)
            if update is None:
                continue
            weight_norm, update_norm = math.sqrt(max(weight["sumsq"], 0)), math.sqrt(max(update["sumsq"], 0))
            if not (math.isfinite(weight_norm) and math.isfinite(update_norm)) or weight_norm == update_norm == 0:
                continue
            self.checked += 1
            ratio = update_norm / (weight_norm + epsilon)
            if ratio > large or ratio < small:
                side = f"> large_threshold {_fmt(large)}" if ratio > large else f"< small_threshold {_fmt(small)}"
                found.append(f"weight {name}: update/weight ratio {_fmt(ratio)} {side}")
        return found

    def to_state(self) -> dict[str, Any]:
        return {**super().to_state(), "seen_steps": self.seen_steps}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.seen_steps = int(state.get("seen_steps", 0))
