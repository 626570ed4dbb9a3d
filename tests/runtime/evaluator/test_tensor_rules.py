"""The tensor rules on hand-made step files: each rule's documented condition, its boundary, damaged input, and a
Lambda-style continuation from JSON state reaching the same verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cdk_sagemaker_debugger.runtime.evaluator.engine import RuleConfig
from cdk_sagemaker_debugger.runtime.evaluator.metric_checks import overtraining
from cdk_sagemaker_debugger.runtime.evaluator.storage import LocalStore
from cdk_sagemaker_debugger.runtime.evaluator.tensor_evaluation import TensorEvaluation


def write(root: Path, step: int, records: list[dict[str, Any]], rank: int = 0) -> None:
    path = root / "algo-1" / f"{rank:05d}" / f"{step:012d}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"step": step, **r}) + "\n" for r in records))


def verdict(root: Path, rule: str, **parameters: Any) -> tuple[str, str | None, list[str]]:
    evaluation = TensorEvaluation([RuleConfig(rule, rule, parameters)])
    evaluation.update(LocalStore(root), final=True)
    [result] = evaluation.results(final=True)
    details = result.rules[0].report["Details"] if result.rules else []
    return result.status, result.status_details, details


def param(kind: str, name: str, values: list[float], shard: bool = False) -> dict[str, Any]:
    return {"kind": kind, "name": name, "n": len(values), "shard": shard, "sum": sum(values),
            "sumsq": sum(v * v for v in values), "abs_sum": sum(abs(v) for v in values),
            "zero": sum(1 for v in values if v == 0), "min": min(values), "max": max(values), "nan": 0, "inf": 0}


def test_vanishing_gradient_fires_below_the_threshold_only(tmp_path: Path):
    write(tmp_path, 0, [param("gradient", "w", [1e-7, -1e-7])])  # mean |g| == threshold: fine
    write(tmp_path, 500, [param("gradient", "w", [1e-8, -1e-8])])
    status, details, found = verdict(tmp_path, "VanishingGradient")
    assert status == "IssuesFound" and "at step 500 " in details and "gradient w" in found[0]


def test_exploding_tensor_only_nan(tmp_path: Path):
    write(tmp_path, 0, [{**param("weight", "w", [1.0]), "inf": 1, "sum": "inf", "sumsq": "inf"}])
    assert verdict(tmp_path, "ExplodingTensor")[0] == "IssuesFound"
    assert verdict(tmp_path, "ExplodingTensor", only_nan=True)[0] == "NoIssuesFound"


def test_unchanged_tensor_needs_num_steps_consecutive_unchanged_steps(tmp_path: Path):
    for step, margin in ((0, 1.0), (10, 0.0), (20, 1e-9), (30, 0.5)):
        write(tmp_path, step, [{"kind": "unchanged", "name": "w", "n": 4, "shard": False, "rtol": 1e-5,
                                "margin": margin}])
    assert verdict(tmp_path, "UnchangedTensor")[0:2] == ("IssuesFound", verdict(tmp_path, "UnchangedTensor")[1])
    assert "at step 20 " in verdict(tmp_path, "UnchangedTensor")[1]
    assert verdict(tmp_path, "UnchangedTensor", num_steps=4)[0] == "NoIssuesFound"
    assert verdict(tmp_path, "UnchangedTensor", atol=1e-10)[0] == "NoIssuesFound"  # 1e-9 > atol: it changed
    status, details, _ = verdict(tmp_path, "UnchangedTensor", rtol=1e-3)
    assert status == "Error" and "collector compared with rtol=1e-05" in details


def test_weight_update_ratio_both_sides(tmp_path: Path):
    write(tmp_path, 0, [param("weight", "big", [1.0]), {"kind": "update", "name": "big", "n": 1, "sumsq": 121.0},
                        param("weight", "ok", [1.0]), {"kind": "update", "name": "ok", "n": 1, "sumsq": 1e-4}])
    status, _, found = verdict(tmp_path, "WeightUpdateRatio")
    assert status == "IssuesFound" and found == ["weight big: update/weight ratio 11 > large_threshold 10"]


def test_all_zero_and_tensor_variance(tmp_path: Path):
    write(tmp_path, 0, [param("weight", "w", [0.0, 0.0, 1.0, 0.0])])
    assert verdict(tmp_path, "AllZero")[0] == "NoIssuesFound"
    assert verdict(tmp_path, "AllZero", threshold=75)[0] == "IssuesFound"
    assert verdict(tmp_path, "TensorVariance", max_threshold=0.1)[0] == "IssuesFound"  # variance 0.1875
    assert verdict(tmp_path, "TensorVariance", max_threshold=0.2)[0] == "NoIssuesFound"
    assert verdict(tmp_path, "TensorVariance")[0] == "Error"


def test_dead_relu_and_saturated_activation_per_layer(tmp_path: Path):
    write(tmp_path, 0, [{"kind": "relu", "name": "l1.relu_output", "n": 200, "counts": [0, 1, 150, 3]},
                        {"kind": "saturation", "name": "l2.tanh_input", "n": 100, "counts": [0, 0, 50]}])
    status, _, found = verdict(tmp_path, "DeadRelu")  # units 0 and 1 under 1 %: 50 % dead, not more than 50 %
    assert status == "NoIssuesFound"
    assert verdict(tmp_path, "DeadRelu", threshold_layer=49)[0] == "IssuesFound"
    status, _, found = verdict(tmp_path, "SaturatedActivation")
    assert status == "IssuesFound" and found[0].startswith("l2.tanh_input: 2 of 3 units")


def test_poor_weight_initialization_variance_ratio_and_range(tmp_path: Path):
    def layer(name: str, variance: float, p5: float, p95: float) -> dict[str, Any]:
        return {"kind": "relu_input", "name": name, "n": 100, "sum": 0.0, "sumsq": 100 * variance, "p5": p5, "p95": p95}

    write(tmp_path, 0, [layer("a.relu_input", 1.0, -1, 1), layer("b.relu_input", 0.5, -1, 1)])
    write(tmp_path, 1, [layer("a.relu_input", 1.0, -1, 1), layer("b.relu_input", 0.01, -1e-4, 1e-4)])
    status, details, found = verdict(tmp_path, "PoorWeightInitialization")
    assert status == "IssuesFound" and "at step 1 " in details and len(found) == 2
    assert verdict(tmp_path, "PoorWeightInitialization", steps=1)[0] == "NoIssuesFound"


def test_check_input_images_waits_for_threshold_samples(tmp_path: Path):
    # 3 channels, 100 pixels per channel per step; channel 1 has mean 0.5
    write(tmp_path, 0, [{"kind": "images", "name": "model.input_0", "images": 300, "n": 100,
                         "sums": [0.0, 50.0, 0.0, 100.0, 100.0, 100.0]}])
    assert verdict(tmp_path, "CheckInputImages")[0] == "NoIssuesFound"  # not yet 500 images: not judged
    status, details, found = verdict(tmp_path, "CheckInputImages", threshold_samples=300)
    assert status == "IssuesFound" and "channel 1 mean 0.5" in found[0]
    assert verdict(tmp_path, "CheckInputImages", channel=3)[0] == "Error"


def test_nlp_sequence_ratio(tmp_path: Path):
    write(tmp_path, 0, [{"kind": "tokens", "name": "embed.input_0", "n": 100, "values": [0, 1], "counts": [60, 10]}])
    assert verdict(tmp_path, "NLPSequenceRatio")[0] == "IssuesFound"
    assert verdict(tmp_path, "NLPSequenceRatio", token_thresholds_percent="70")[0] == "NoIssuesFound"
    assert verdict(tmp_path, "NLPSequenceRatio", token_values="0,1", token_thresholds_percent="70,5")[0] == \
        "IssuesFound"
    assert verdict(tmp_path, "NLPSequenceRatio", token_values="7", token_thresholds_percent="5")[0] == "Error"


def test_class_imbalance_and_confusion_on_recent_pairs(tmp_path: Path):
    # an untrained start (everything predicted 0), then a model that predicts well
    write(tmp_path, 0, [{"kind": "labels", "name": "loss", "classes": 2, "pairs": [250, 0, 250, 0]}])
    for step in range(1, 4):
        write(tmp_path, step, [{"kind": "labels", "name": "loss", "classes": 2, "pairs": [245, 5, 5, 245]}])
    assert verdict(tmp_path, "ClassImbalance")[0] == "IssuesFound"  # the first 500 samples: class 1 all wrong
    assert verdict(tmp_path, "Confusion")[0] == "IssuesFound"
    for step in range(0, 4):
        write(tmp_path, step, [{"kind": "labels", "name": "loss", "classes": 2, "pairs": [245, 5, 5, 245]}])
    assert verdict(tmp_path, "ClassImbalance")[0] == "NoIssuesFound"
    assert verdict(tmp_path, "Confusion")[0] == "NoIssuesFound"
    assert verdict(tmp_path, "Confusion", min_diag=0.99)[0] == "IssuesFound"


def test_sharded_sources_are_added_replicated_ones_taken_once(tmp_path: Path):
    write(tmp_path, 0, [param("gradient", "w", [1e-8, 1e-8], shard=True)], rank=0)
    write(tmp_path, 0, [param("gradient", "w", [1e-3, 1e-3], shard=True)], rank=1)
    assert verdict(tmp_path, "VanishingGradient")[0] == "NoIssuesFound"  # mean over the whole tensor: 5e-4
    write(tmp_path, 0, [param("gradient", "w", [1e-8, 1e-8])], rank=0)
    write(tmp_path, 0, [param("gradient", "w", [1e-8, 1e-8])], rank=1)
    evaluation = TensorEvaluation([RuleConfig("VanishingGradient", "VanishingGradient", {})])
    evaluation.update(LocalStore(tmp_path), final=True)
    assert evaluation.results(final=True)[0].status == "IssuesFound"


def test_damaged_lines_are_counted_and_skipped(tmp_path: Path):
    write(tmp_path, 0, [param("gradient", "w", [1e-8])])
    path = tmp_path / "algo-1/00000/000000000000.jsonl"
    path.write_text(path.read_text() + '{"step": 0, "kind": "gradient"}\nnot json\n{"step":0,"kind":"weight",'
                    '"name":"w","n":1,"sum":NaN}\n')
    evaluation = TensorEvaluation([RuleConfig("VanishingGradient", "VanishingGradient", {})])
    evaluation.update(LocalStore(tmp_path), final=True)
    assert evaluation.results(final=True)[0].status == "IssuesFound"
    assert evaluation.stats.bad_lines == 3
    assert evaluation.stats.problems[0].startswith("algo-1/00000/000000000000.jsonl: skipped")


def test_a_step_waits_for_every_source_then_a_continuation_from_state_agrees(tmp_path: Path):
    configs = [RuleConfig("VanishingGradient", "VanishingGradient", {})]
    write(tmp_path, 0, [param("gradient", "w", [1e-8, 1e-8], shard=True)], rank=0)
    write(tmp_path, 0, [param("gradient", "w", [1e-3, 1e-3], shard=True)], rank=1)
    write(tmp_path, 10, [param("gradient", "w", [1e-9, 1e-9], shard=True)], rank=0)  # rank 1 has not written it
    evaluation = TensorEvaluation(configs)
    evaluation.update(LocalStore(tmp_path), final=False)
    assert evaluation.judged_through == 0 and evaluation.results(final=False)[0].status == "InProgress"
    restored = TensorEvaluation.from_state(json.loads(json.dumps(evaluation.to_state())))
    write(tmp_path, 10, [param("gradient", "w", [1e-9, 1e-9], shard=True)], rank=1)
    restored.update(LocalStore(tmp_path), final=True)
    [result] = restored.results(final=True)
    assert result.status == "IssuesFound" and "at step 10 " in result.status_details


def test_no_data_is_not_applicable(tmp_path: Path):
    status, details, _ = verdict(tmp_path, "DeadRelu")
    assert status == "NoIssuesFound" and details.startswith("NotApplicable: no tensor data")


@pytest.mark.parametrize(("validation", "fires"), [
    ([1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.01], False),  # keeps improving
    ([1.0, 0.9, *[0.9] * 10], True),  # stalls for 10 datapoints while training improves
])
def test_overtraining(validation: list[float], fires: bool):
    train = [[60.0 * i, 1.0 - 0.05 * i] for i in range(len(validation))]
    series = [[60.0 * i + 1, v] for i, v in enumerate(validation)]
    outcome = overtraining(train, series, train_metric="t", validation_metric="v", patience_train=5,
                           patience_validation=10, delta=0.01)
    assert bool(outcome.violations) is fires
