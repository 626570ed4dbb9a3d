"""The 21 built-in Debugger (tensor) rules as data: names, parameters with the rule container's documented defaults,
framework scope, and the collections Debugger's hook must save for each.

The rule classes (``debugger.py``) are generated from this catalog; the RuleEvaluator's table of what it runs
(``evaluator_tensor.py``) and the metric rules' comparison table (``metric.py``) read it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..debug_hook import CollectionConfig
from .parameters import Param

__all__ = [
    "RuleScope",
    "DebuggerRuleSpec",
    "DEBUGGER_RULE_SPECS",
    "DEEP_LEARNING",
    "DEEP_LEARNING_AND_XGBOOST",
    "DEEP_LEARNING_APPLICATIONS",
    "XGBOOST",
    "XGBOOST_REPORT",
]


@dataclass(frozen=True)
class RuleScope:
    """Which training frameworks a built-in rule applies to (the scope table of the Debugger documentation)."""

    label: str
    frameworks: frozenset[str]


_DL = frozenset({"tensorflow", "mxnet", "pytorch"})
DEEP_LEARNING = RuleScope("deep learning (TensorFlow, MXNet, PyTorch)", _DL)
DEEP_LEARNING_AND_XGBOOST = RuleScope("deep learning and XGBoost", _DL | {"xgboost"})
DEEP_LEARNING_APPLICATIONS = RuleScope("deep learning applications", _DL)
XGBOOST = RuleScope("XGBoost", frozenset({"xgboost"}))
XGBOOST_REPORT = RuleScope("XGBoost report", frozenset({"xgboost"}))


@dataclass(frozen=True)
class DebuggerRuleSpec:
    """A built-in debugger rule: its name (= rule_to_invoke), parameters, and the collections the hook must save."""

    name: str
    function_name: str  # the smdebug-rulesconfig function, for users coming from the SDK
    summary: str
    scope: RuleScope
    parameters: tuple[Param, ...]
    collections: tuple[CollectionConfig, ...] = ()
    needs_other_trials: bool = False
    #: (lower, higher) parameter pairs that must be ordered when either is given (``check_order``).
    ordered: tuple[tuple[str, str], ...] = ()

    @property
    def rule_to_invoke(self) -> str:
        return self.name


def _every_500(name: str, include_regex: str | None = None) -> CollectionConfig:
    parameters = {"include_regex": include_regex} if include_regex else {}
    return CollectionConfig(name, {**parameters, "save_interval": "500"})


_COLLECTION_NAMES = Param.string("collection_names", None, "Collection whose tensors the rule checks.")


def _tensor_regex(default: str | None = None) -> Param:
    return Param.regex("tensor_regex", default, "Regular expression selecting the tensors the rule checks.")


_SPECS = (
    DebuggerRuleSpec(
        "VanishingGradient", "vanishing_gradient",
        "Fires when the mean absolute gradient falls below the threshold, so layers stop learning.",
        DEEP_LEARNING,
        (Param.number("threshold", 0.0000001, "Mean absolute gradient below which the rule fires.", above=0),),
        (_every_500("gradients"),),
    ),
    DebuggerRuleSpec(
        "SimilarAcrossRuns", "similar_across_runs",
        "Compares tensors of this job with those of other runs (other_trials) and fires when they differ.",
        DEEP_LEARNING_AND_XGBOOST,
        (_COLLECTION_NAMES, _tensor_regex()),
        needs_other_trials=True,
    ),
    DebuggerRuleSpec(
        "WeightUpdateRatio", "weight_update_ratio",
        "Fires when weight updates are too large or too small relative to the weights.",
        DEEP_LEARNING,
        (
            Param.integer("num_steps", None, "Steps between the two weight snapshots compared; None = consecutive saves."),
            Param.number("large_threshold", 10.0, "Update ratio above which the rule fires.", above=0),
            Param.number("small_threshold", 0.00000001, "Update ratio below which the rule fires.", above=0),
            Param.number("epsilon", 0.000000001, "Small constant that avoids division by zero.", above=0),
        ),
        (_every_500("weights"),),
    ),
    DebuggerRuleSpec(
        "AllZero", "all_zero",
        "Fires when a share of tensor values above the threshold are all zero.",
        DEEP_LEARNING_AND_XGBOOST,
        (_COLLECTION_NAMES, _tensor_regex(), Param.percent("threshold", 100, "Percentage of zero values that fires.")),
    ),
    DebuggerRuleSpec(
        "ExplodingTensor", "exploding_tensor",
        "Fires when tensors contain NaN or infinite values.",
        DEEP_LEARNING,
        (_COLLECTION_NAMES, _tensor_regex(), Param.boolean("only_nan", False, "Only NaN fires; infinities are ignored.")),
    ),
    DebuggerRuleSpec(
        "UnchangedTensor", "unchanged_tensor",
        "Fires when tensors stop changing across steps (numpy.allclose over num_steps).",
        DEEP_LEARNING_AND_XGBOOST,
        (
            _COLLECTION_NAMES,
            _tensor_regex(),
            Param.integer("num_steps", 3, "Steps over which the tensor must stay unchanged."),
            Param.number("rtol", 1e-05, "Relative tolerance of the comparison.", minimum=0),
            Param.number("atol", 1e-08, "Absolute tolerance of the comparison.", minimum=0),
            Param.boolean("equal_nan", False, "Treat NaNs in the same place as equal."),
        ),
    ),
    DebuggerRuleSpec(
        "LossNotDecreasing", "loss_not_decreasing",
        "Fires when the loss does not decrease by diff_percent within num_steps.",
        DEEP_LEARNING_AND_XGBOOST,
        (
            _COLLECTION_NAMES,
            _tensor_regex(),
            Param.boolean("use_losses_collection", True, "Also check the tensors of the 'losses' collection."),
            Param.integer("num_steps", 10, "Steps after which the loss must have decreased."),
            Param.percent("diff_percent", 0.1, "Minimum decrease, in percent, between checks.", exclusive=True),
            Param.percent("increase_threshold_percent", 5, "Loss increase, in percent, that fires at once.", exclusive=True),
            Param.choice("mode", "GLOBAL", "Steps of this mode are checked.", ("GLOBAL", "TRAIN", "EVAL")),
        ),
        (_every_500("losses"),),
    ),
    DebuggerRuleSpec(
        "CheckInputImages", "check_input_images",
        "Fires when input images do not look normalized (mean far from zero).",
        DEEP_LEARNING_APPLICATIONS,
        (
            Param.number("threshold_mean", 0.2, "Largest acceptable absolute mean of the input.", minimum=0),
            Param.integer("threshold_samples", 500, "Images to sample before the check."),
            Param.regex("regex", ".*hybridsequential0_input_0", "Regular expression selecting the input tensor."),
            Param.integer("channel", 1, "Index of the color-channel dimension.", minimum=0),
        ),
        (_every_500("input_image", ".*hybridsequential0_input_0"),),
    ),
    DebuggerRuleSpec(
        "DeadRelu", "dead_relu",
        "Fires when too many ReLU units output zero (inactive) in too many layers.",
        DEEP_LEARNING,
        (
            _tensor_regex(".*relu_output"),
            Param.percent("threshold_inactivity", 1.0, "Percentage of zero outputs that makes a unit dead."),
            Param.percent("threshold_layer", 50.0, "Percentage of dead units that makes a layer fire."),
        ),
        (_every_500("relu_output", ".*relu_output"),),
    ),
    DebuggerRuleSpec(
        "Confusion", "confusion",
        "Fires when the confusion matrix is poor: low diagonal or high off-diagonal share.",
        XGBOOST,
        (
            Param.integer("category_no", None, "Number of classes; None = inferred.", minimum=2),
            Param.string("labels", "labels", "Tensor holding the true labels."),
            Param.string("predictions", "predictions", "Tensor holding the predictions."),
            Param.string("labels_collection", "labels", "Collection holding the labels tensor."),
            Param.string("predictions_collection", "predictions", "Collection holding the predictions tensor."),
            Param.proportion("min_diag", 0.9, "Smallest acceptable share on the diagonal (0..1)."),
            Param.proportion("max_off_diag", 0.1, "Largest acceptable share off the diagonal (0..1)."),
        ),
    ),
    DebuggerRuleSpec(
        "TreeDepth", "tree_depth",
        "Fires when XGBoost trees are deeper than depth.",
        XGBOOST,
        (Param.integer("depth", 4, "Tree depth above which the rule fires."),),
    ),
    DebuggerRuleSpec(
        "ClassImbalance", "class_imbalance",
        "Fires when classes are imbalanced or one class is mispredicted much more than the others.",
        DEEP_LEARNING_AND_XGBOOST,
        (
            Param.number("threshold_imbalance", 10, "Ratio between the largest and smallest class that fires.", above=0),
            Param.proportion("threshold_misprediction", 0.7, "Misprediction share per class that fires (0..1)."),
            Param.integer("samples", 500, "Labels to collect before the check."),
            Param.boolean("argmax", False, "Apply argmax to the predictions first."),
            Param.regex("labels_regex", ".*labels", "Regular expression selecting the labels tensor."),
            Param.regex("predictions_regex", ".*predictions", "Regular expression selecting the predictions tensor."),
        ),
    ),
    DebuggerRuleSpec(
        "Overfit", "overfit",
        "Fires when the validation loss drifts away from the training loss.",
        DEEP_LEARNING_AND_XGBOOST,
        (
            _tensor_regex(),
            Param.integer("start_step", 0, "Step at which the comparison starts.", minimum=0),
            Param.integer("patience", 1, "Steps the ratio may exceed the threshold before the rule fires."),
            Param.number("ratio_threshold", 0.1, "Largest acceptable (validation - training) / training loss.", above=0),
        ),
    ),
    DebuggerRuleSpec(
        "TensorVariance", "tensor_variance",
        "Fires when tensor variance is very high or very low (exploding or vanishing values).",
        DEEP_LEARNING_AND_XGBOOST,
        (
            _COLLECTION_NAMES,
            _tensor_regex(),
            Param.number("max_threshold", None, "Variance above which the rule fires."),
            Param.number("min_threshold", None, "Variance below which the rule fires."),
        ),
        ordered=(("min_threshold", "max_threshold"),),
    ),
    DebuggerRuleSpec(
        "Overtraining", "overtraining",
        "Fires when the validation loss stops improving while the training loss still improves.",
        DEEP_LEARNING_AND_XGBOOST,
        (
            Param.integer("patience_train", 5, "Steps the training loss may stall before training counts as stalled."),
            Param.integer("patience_validation", 10, "Steps the validation loss may stall before the rule fires."),
            Param.number("delta", 0.01, "Smallest improvement that counts.", minimum=0),
        ),
    ),
    DebuggerRuleSpec(
        "PoorWeightInitialization", "poor_weight_initialization",
        "Fires when activation inputs suggest a poor weight initialization.",
        DEEP_LEARNING,
        (
            Param.regex("activation_inputs_regex", ".*relu_input", "Regular expression selecting activation inputs."),
            Param.number("threshold", 10.0, "Ratio of largest to smallest per-layer variance that fires.", above=0),
            Param.number("distribution_range", 0.001, "Smallest acceptable spread of the distribution.", above=0),
            Param.integer("patience", 5, "Steps to wait for the loss to start decreasing."),
            Param.integer("steps", 10, "Steps the rule analyses."),
        ),
        (_every_500("relu_input", ".*relu_input"),),
    ),
    DebuggerRuleSpec(
        "SaturatedActivation", "saturated_activation",
        "Fires when too many tanh or sigmoid units are saturated in too many layers.",
        DEEP_LEARNING,
        (
            _COLLECTION_NAMES,
            _tensor_regex(".*tanh_input|.*sigmoid_input"),
            Param.number("threshold_tanh_min", -9.4999, "tanh input below which a unit counts as saturated."),
            Param.number("threshold_tanh_max", 9.4999, "tanh input above which a unit counts as saturated."),
            Param.number("threshold_sigmoid_min", -23, "sigmoid input below which a unit counts as saturated."),
            Param.number("threshold_sigmoid_max", 16.99999, "sigmoid input above which a unit counts as saturated."),
            Param.percent("threshold_inactivity", 1.0, "Percentage of saturated steps that makes a unit saturated."),
            Param.percent("threshold_layer", 50.0, "Percentage of saturated units that makes a layer fire."),
        ),
        ordered=(("threshold_tanh_min", "threshold_tanh_max"), ("threshold_sigmoid_min", "threshold_sigmoid_max")),
    ),
    DebuggerRuleSpec(
        "NLPSequenceRatio", "nlp_sequence_ratio",
        "Fires when given tokens (e.g. padding) make up too much of the input sequences.",
        DEEP_LEARNING_APPLICATIONS,
        (
            _tensor_regex(".*embedding0_input_0"),
            Param.string_list("token_values", "0", "Token values to count, comma-separated."),
            Param.percent_list("token_thresholds_percent", "50", "Largest acceptable share per token, comma-separated."),
        ),
        (_every_500("input_sequence", ".*embedding0_input_0"),),
    ),
    DebuggerRuleSpec(
        "StalledTrainingRule", "stalled_training_rule",
        "Fires when the job writes no new tensors for threshold seconds; can stop the job.",
        DEEP_LEARNING_AND_XGBOOST,
        (
            Param.integer("threshold", 1800, "Seconds without progress after which the rule fires."),
            Param.boolean("stop_training_on_fire", False, "Stop the training job when the rule fires."),
            Param.string("training_job_name_prefix", None, "Job to stop; defaults to the job-name prefix. If several running jobs match, none is stopped."),
        ),
    ),
    DebuggerRuleSpec(
        "FeatureImportanceOverweight", "feature_importance_overweight",
        "Fires when a few features carry most of the importance (XGBoost feature importance).",
        XGBOOST,
        (
            Param.proportion("threshold", 0.8, "Share of the total importance held by the top nfeatures that fires."),
            Param.integer("nfeatures", 3, "Number of top features considered."),
            _tensor_regex(".*feature_importance/weight"),
        ),
        (_every_500("feature_importance"),),
    ),
    DebuggerRuleSpec(
        "CreateXgboostReport", "create_xgboost_report",
        "Writes the XGBoost training report (metrics, feature importance, confusion matrix).",
        XGBOOST_REPORT,
        (),
        (
            CollectionConfig("metrics", {"save_interval": "5"}),
            CollectionConfig("feature_importance", {"save_interval": "5"}),
            CollectionConfig("hyperparameters", {"save_steps": "0"}),
            CollectionConfig("predictions", {"save_interval": "5"}),
            CollectionConfig("labels", {"save_interval": "5"}),
        ),
    ),
)

#: Built-in debugger rules by rule_to_invoke name.
DEBUGGER_RULE_SPECS: Mapping[str, DebuggerRuleSpec] = MappingProxyType({spec.name: spec for spec in _SPECS})


