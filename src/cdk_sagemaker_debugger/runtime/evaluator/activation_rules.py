"""Debugger's activation, input and label rules on the tensor collector's counts (docs/tensor-rules.md)."""

from __future__ import annotations

from typing import Any

from .rules import RuleConfigError
from .tensor_data import StepData
from .tensor_rules import TensorRule, _fmt, variance


def _unit_layers(rule: TensorRule, data: StepData, kind: str, regex_key: str) -> list[tuple[str, dict[str, Any]]]:
    pattern = rule.regex(regex_key)
    return [(name, record) for name, record in sorted(data.get(kind).items())
            if record.get("n") and (pattern is None or pattern.search(name))]


def _inactive_layers(rule: TensorRule, data: StepData, kind: str, regex_key: str, what: str) -> list[str]:
    """Layers where more than threshold_layer % of the units are active in less than threshold_inactivity % of
    their samples (DeadRelu: output > 0; SaturatedActivation: input inside the non-saturated range)."""
    inactivity, layer = rule.number("threshold_inactivity", 0), rule.number("threshold_layer", 0)
    found = []
    for name, record in _unit_layers(rule, data, kind, regex_key):
        counts = record["counts"]
        if not counts:
            continue
        rule.checked += 1
        inactive = sum(1 for c in counts if 100.0 * c / record["n"] < inactivity)
        percent = 100.0 * inactive / len(counts)
        if percent > layer:
            found.append(f"{name}: {inactive} of {len(counts)} units ({_fmt(percent)} %) {what} in under "
                         f"{_fmt(inactivity)} % of {int(record['n'])} samples > threshold_layer {_fmt(layer)} %")
    return found


class DeadRelu(TensorRule):
    name = "DeadRelu"
    summary = "No ReLU layer may have more than threshold_layer % of units active in under threshold_inactivity %."
    defaults = {"tensor_regex": ".*relu_output", "threshold_inactivity": 1.0, "threshold_layer": 50.0}
    kinds = ("relu",)

    def check(self, data: StepData) -> list[str]:
        return _inactive_layers(self, data, "relu", "tensor_regex", "active")


class SaturatedActivation(TensorRule):
    name = "SaturatedActivation"
    summary = "No tanh/sigmoid layer may have more than threshold_layer % of units saturated."
    defaults = {"collection_names": None, "tensor_regex": ".*tanh_input|.*sigmoid_input",
                "threshold_tanh_min": -9.4999, "threshold_tanh_max": 9.4999, "threshold_sigmoid_min": -23,
                "threshold_sigmoid_max": 16.99999, "threshold_inactivity": 1.0, "threshold_layer": 50.0}
    kinds = ("saturation",)

    def check(self, data: StepData) -> list[str]:
        return _inactive_layers(self, data, "saturation", "tensor_regex", "outside saturation")


class PoorWeightInitialization(TensorRule):
    name = "PoorWeightInitialization"
    summary = ("In the first steps, the ReLU input variances of the layers may differ by at most threshold, and "
               "each layer's 5th-95th percentile range must exceed distribution_range.")
    defaults = {"activation_inputs_regex": ".*relu_input", "threshold": 10.0, "distribution_range": 0.001,
                "patience": 5, "steps": 10}
    kinds = ("relu_input",)

    def check(self, data: StepData) -> list[str]:
        threshold, spread = self.number("threshold", 0), self.number("distribution_range", 0)
        self.whole("patience", 1)
        if data.step >= self.whole("steps", 1):
            return []
        layers = _unit_layers(self, data, "relu_input", "activation_inputs_regex")
        found = []
        variances = {name: variance(r) for name, r in layers}
        for name, record in layers:
            self.checked += 1
            if record["p95"] - record["p5"] < spread:
                found.append(f"{name}: 5th-95th percentile range {_fmt(record['p95'] - record['p5'])} < "
                             f"distribution_range {_fmt(spread)}")
        positive = {n: v for n, v in variances.items() if v > 0}
        if len(positive) >= 2:
            high, low = max(positive, key=positive.get), min(positive, key=positive.get)
            if positive[high] / positive[low] > threshold:
                found.append(f"variance of {high} ({_fmt(positive[high])}) / variance of {low} "
                             f"({_fmt(positive[low])}) > threshold {_fmt(threshold)}")
        return found


class CheckInputImages(TensorRule):
    name = "CheckInputImages"
    summary = "Once threshold_samples images were seen, every channel's mean must be within threshold_mean of 0."
    defaults = {"threshold_mean": 0.2, "threshold_samples": 500, "regex": ".*hybridsequential0_input_0", "channel": 1}
    kinds = ("images",)

    def setup(self) -> None:
        if self.whole("channel", 0) != 1:
            raise RuleConfigError(f"{self.configuration_name}: channel={self.p['channel']!r}; the collector records "
                                  "PyTorch's NCHW images, whose channel is dimension 1 (channel=1)")
        self.totals: dict[str, dict[str, Any]] = {}

    def check(self, data: StepData) -> list[str]:
        mean_limit, samples = self.number("threshold_mean", 0), self.whole("threshold_samples", 1)
        found = []
        for name, record in sorted(data.get("images").items()):  # regex: Debugger's MXNet name; any image input here
            total = self.totals.setdefault(name, {"images": 0, "n": 0, "sums": [0.0] * len(record["sums"])})
            if len(total["sums"]) != len(record["sums"]):
                continue
            total["images"] += record.get("images", 0)
            total["n"] += record["n"]
            total["sums"] = [a + b for a, b in zip(total["sums"], record["sums"], strict=True)]
            if total["images"] < samples or not total["n"]:
                continue
            self.checked += 1
            channels = len(total["sums"]) // 2
            for c in range(channels):
                mean = total["sums"][c] / total["n"]
                if abs(mean) > mean_limit:
                    found.append(f"{name}: channel {c} mean {_fmt(mean)} over {total['images']} images is not within "
                                 f"threshold_mean {_fmt(mean_limit)} of 0 (normalize the inputs)")
        return found

    def to_state(self) -> dict[str, Any]:
        return {**super().to_state(), "totals": self.totals}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.totals = dict(state.get("totals", {}))


def _number_list(rule: TensorRule, key: str) -> list[float]:
    text = rule.p[key]
    items = text if isinstance(text, list) else str(text).split(",")
    try:
        return [float(item) for item in items]
    except ValueError:
        raise RuleConfigError(f"{rule.configuration_name}: {key}={text!r} is not a comma-separated list of numbers"
                              ) from None


class NLPSequenceRatio(TensorRule):
    name = "NLPSequenceRatio"
    summary = "Each token in token_values may make up at most its token_thresholds_percent of the input tokens."
    defaults = {"tensor_regex": ".*embedding0_input_0", "token_values": "0", "token_thresholds_percent": "50"}
    kinds = ("tokens",)

    def check(self, data: StepData) -> list[str]:
        tokens, limits = _number_list(self, "token_values"), _number_list(self, "token_thresholds_percent")
        if len(tokens) != len(limits):
            raise RuleConfigError(f"{self.configuration_name}: {len(tokens)} token_values but {len(limits)} "
                                  "token_thresholds_percent; give one threshold per token")
        found = []
        for name, record in sorted(data.get("tokens").items()):  # regex: Debugger's MXNet name; the first embedding
            recorded = [float(v) for v in record.get("values", [])]
            if not record.get("n"):
                continue
            self.checked += 1
            for token, limit in zip(tokens, limits, strict=True):
                if token not in recorded:
                    raise RuleConfigError(f"{self.configuration_name}: token {token:g} was not recorded (the job "
                                          f"counted {recorded}); configure the job with this rule's token_values")
                percent = 100.0 * record["counts"][recorded.index(token)] / record["n"]
                if percent > limit:
                    found.append(f"{name}: token {token:g} is {_fmt(percent)} % of {int(record['n'])} tokens > "
                                 f"{_fmt(limit)} %")
        return found
