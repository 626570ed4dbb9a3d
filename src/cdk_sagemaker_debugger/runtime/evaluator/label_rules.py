"""ClassImbalance and Confusion on the label/prediction pairs the collector counts at the loss (docs/tensor-rules.md).

Both read a confusion-count matrix (rows: labels, columns: predictions). The class counts of ClassImbalance add up
from the start; the mispredictions and the confusion matrix are judged on the most recent ``samples`` pairs, so a
model is judged on what it predicts now, not on its untrained first steps.
"""

from __future__ import annotations

from typing import Any

from .rules import RuleConfigError
from .tensor_data import StepData
from .tensor_rules import TensorRule, _fmt

RECENT_SAMPLES = 500  # Confusion has no samples parameter: the window ClassImbalance uses by default


class _Labels(TensorRule):
    kinds = ("labels",)

    def setup(self) -> None:
        self.total: list[float] | None = None
        self.recent: list[list[float]] = []  # newest last; together at least `window` samples
        self.classes = 0

    def window(self) -> int:
        return RECENT_SAMPLES

    def add(self, data: StepData) -> bool:
        """Take this step's pairs; True once there are enough samples to judge."""
        pairs = None
        for record in data.get("labels").values():
            classes = int(record["classes"])
            if pairs is None or classes == self.classes:
                self.classes = classes
                pairs = record["pairs"] if pairs is None else [a + b for a, b in zip(pairs, record["pairs"], strict=True)]
        if pairs is None:
            return False
        if self.total is not None and len(self.total) != len(pairs):
            self.setup()  # the number of classes changed: start again
        self.total = pairs if self.total is None else [a + b for a, b in zip(self.total, pairs, strict=True)]
        self.recent.append(pairs)
        while len(self.recent) > 1 and sum(map(sum, self.recent[1:])) >= self.window():
            self.recent.pop(0)
        return sum(map(sum, self.recent)) >= self.window()

    def matrix(self, flat: list[float]) -> list[list[float]]:
        c = self.classes
        return [flat[i * c:(i + 1) * c] for i in range(c)]

    def recent_matrix(self) -> list[list[float]]:
        flat = [sum(values) for values in zip(*self.recent, strict=True)]
        return self.matrix(flat)

    def to_state(self) -> dict[str, Any]:
        return {**super().to_state(), "total": self.total, "recent": self.recent, "classes": self.classes}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.total, self.recent, self.classes = state.get("total"), list(state.get("recent", [])), int(
            state.get("classes", 0))


class ClassImbalance(_Labels):
    name = "ClassImbalance"
    summary = ("The largest class may have at most threshold_imbalance times the samples of the smallest, and no "
               "class may be mispredicted more than threshold_misprediction of the time.")
    defaults = {"threshold_imbalance": 10, "threshold_misprediction": 0.7, "samples": 500, "argmax": False,
                "labels_regex": ".*labels", "predictions_regex": ".*predictions"}

    def window(self) -> int:
        return self.whole("samples", 1)

    def check(self, data: StepData) -> list[str]:
        imbalance, misprediction = self.number("threshold_imbalance", 1), self.number("threshold_misprediction", 0)
        if not self.add(data):
            return []
        self.checked += 1
        found = []
        counts = [sum(row) for row in self.matrix(self.total or [])]
        present = {c: n for c, n in enumerate(counts) if n > 0}
        if len(present) >= 2:
            big, small = max(present, key=present.get), min(present, key=present.get)
            if present[big] / present[small] > imbalance:
                found.append(f"class {big} has {int(present[big])} samples, class {small} {int(present[small])}: "
                             f"ratio {_fmt(present[big] / present[small])} > threshold_imbalance {_fmt(imbalance)}")
        for c, row in enumerate(self.recent_matrix()):
            if sum(row) and 1 - row[c] / sum(row) > misprediction:
                found.append(f"class {c}: {_fmt(100 * (1 - row[c] / sum(row)))} % of its last {int(sum(row))} "
                             f"samples mispredicted > threshold_misprediction {_fmt(misprediction)}")
        return found


class Confusion(_Labels):
    name = "Confusion"
    summary = ("In the row-normalized confusion matrix of the recent samples, every diagonal value must be at least "
               "min_diag and every other value at most max_off_diag.")
    defaults = {"category_no": None, "labels": "labels", "predictions": "predictions", "labels_collection": "labels",
                "predictions_collection": "predictions", "min_diag": 0.9, "max_off_diag": 0.1}

    def check(self, data: StepData) -> list[str]:
        low, high = self.number("min_diag", 0), self.number("max_off_diag", 0)
        categories = self.whole("category_no", 2)
        if not self.add(data):
            return []
        if categories is not None and categories != self.classes:
            raise RuleConfigError(f"{self.configuration_name}: category_no={categories} but the loss sees "
                                  f"{self.classes} classes")
        self.checked += 1
        found = []
        for i, row in enumerate(self.recent_matrix()):
            total = sum(row)
            if not total:
                continue
            for j, value in enumerate(row):
                share = value / total
                if i == j and share < low:
                    found.append(f"class {i}: {_fmt(share)} of it predicted right < min_diag {_fmt(low)}")
                elif i != j and share > high:
                    found.append(f"class {i}: {_fmt(share)} of it predicted as {j} > max_off_diag {_fmt(high)}")
        return found
