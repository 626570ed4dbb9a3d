"""Debugger (tensor) rules: the 21 built-in rules as a data-driven catalog, and custom rules.

``to_rule_configuration()`` renders the DebugRuleConfiguration the SageMaker Python SDK sends (same keys, same order,
same RuleParameters merge order), with two fixes where the SDK is wrong:

* Every RuleParameters value is sent as a string. The SDK passes ints and bools through unchanged and the API
  rejects them (``Invalid type for parameter ...RuleParameters.num_steps``).
* The collections a rule needs are returned by :attr:`Rule.collections` and merged deterministically with the hook's
  (:func:`~cdk_sagemaker_debugger.model.debug_hook.merge_collections`) instead of through a Python set.

Like the SDK, only the parameters you pass are sent; the documented defaults live in the rule container and are listed
here for validation and documentation. Unlike the SDK, parameter names and values are validated at synth time.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from .actions import ACTION_JSON_MAX_LENGTH, Action, ActionList, check_actions
from .debug_hook import CollectionConfig
from .errors import ConfigurationError, ConfigurationTypeError, did_you_mean
from .job_family import job_name_pattern
from .parameters import ParameterSpec, is_token, validate_parameters
from .parameters import _number as _finite_number
from .rule_base import S3_URI, CustomRuleFields, RuleBase, check_custom_parameters

__all__ = [
    "Rule",
    "BuiltinRule",
    "CustomRule",
    "RuleScope",
    "DebuggerRuleSpec",
    "TensorParameterSpec",
    "RulePermissions",
    "DEBUGGER_RULE_SPECS",
    "RULE_CLASSES",
    "DEEP_LEARNING",
    "DEEP_LEARNING_AND_XGBOOST",
    "DEEP_LEARNING_APPLICATIONS",
    "XGBOOST",
    "XGBOOST_REPORT",
    "from_name",
]

# --- parameter kinds the profiler catalog does not need ----------------------------------------------------------------


def _type_error(spec: ParameterSpec, value: Any, where: str, expected: str) -> ConfigurationTypeError:
    return ConfigurationTypeError(
        f"expected {expected}, got {type(value).__name__} {value!r}.", where=where, field=spec.name, value=value
    )


def _check_number(spec: ParameterSpec, value: Any, where: str) -> None:
    _finite_number(spec, value, where)


def _check_non_negative_number(spec: ParameterSpec, value: Any, where: str) -> None:
    if _finite_number(spec, value, where) < 0:
        raise ConfigurationError(f"must be 0 or greater, got {value!r}.", where=where, field=spec.name, value=value)


def _check_open_percent(spec: ParameterSpec, value: Any, where: str) -> None:
    if not 0 < _finite_number(spec, value, where) < 100:
        raise ConfigurationError(
            f"is a percentage strictly between 0 and 100, got {value!r}.", where=where, field=spec.name, value=value
        )


def _integer(spec: ParameterSpec, value: Any, where: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(spec, value, where, f"an integer >= {minimum}")
    if value < minimum:
        raise ConfigurationError(f"must be an integer >= {minimum}, got {value!r}.", where=where, field=spec.name, value=value)


def _check_non_negative_int(spec: ParameterSpec, value: Any, where: str) -> None:
    _integer(spec, value, where, 0)


def _check_category_count(spec: ParameterSpec, value: Any, where: str) -> None:
    _integer(spec, value, where, 2)


def _check_boolean(spec: ParameterSpec, value: Any, where: str) -> None:
    if not isinstance(value, bool):
        raise _type_error(spec, value, where, "True or False")


def _check_string(spec: ParameterSpec, value: Any, where: str) -> None:
    if not isinstance(value, str) or not value:
        raise _type_error(spec, value, where, "a non-empty string")


def _check_regex(spec: ParameterSpec, value: Any, where: str) -> None:
    _check_string(spec, value, where)
    try:
        re.compile(value)
    except re.error as error:
        raise ConfigurationError(
            f"{value!r} is not a valid regular expression ({error}).", where=where, field=spec.name, value=value
        ) from None


def _items(spec: ParameterSpec, value: Any, where: str) -> list[str]:
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
    return items


def _check_value_list(spec: ParameterSpec, value: Any, where: str) -> None:
    _items(spec, value, where)


def _check_percent_list(spec: ParameterSpec, value: Any, where: str) -> None:
    for item in _items(spec, value, where):
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


_TENSOR_CHECKS: dict[str, Callable[[ParameterSpec, Any, str], None]] = {
    "number": _check_number,
    "non_negative_number": _check_non_negative_number,
    "open_percent": _check_open_percent,
    "non_negative_int": _check_non_negative_int,
    "category_count": _check_category_count,
    "boolean": _check_boolean,
    "string": _check_string,
    "regex": _check_regex,
    "value_list": _check_value_list,
    "percent_list": _check_percent_list,
}

_TENSOR_TYPES = {
    "number": "float",
    "non_negative_number": "float",
    "open_percent": "float",
    "non_negative_int": "int",
    "category_count": "int",
    "boolean": "bool",
    "string": "str",
    "regex": "str",
    "value_list": "str | list",
    "percent_list": "str | list",
}


@dataclass(frozen=True)
class TensorParameterSpec(ParameterSpec):
    """A debugger rule parameter: the profiler kinds plus numbers of any sign, booleans, strings, regexes and lists.

    ``default`` is the documented container default; None means the container decides (or the rule skips the check).
    """

    def __post_init__(self) -> None:
        if self.kind not in _TENSOR_CHECKS:
            super().__post_init__()

    @property
    def python_type(self) -> str:
        own = _TENSOR_TYPES.get(self.kind)
        return own if own is not None else super().python_type

    def validate(self, value: Any, *, where: str) -> None:
        if is_token(value):
            return
        check = _TENSOR_CHECKS.get(self.kind)
        if check is None:
            super().validate(value, where=where)
        else:
            check(self, value, where)

    def render(self, value: Any) -> str:
        """The value as the API string: lists comma-joined, everything else through ``str()``."""
        if isinstance(value, (list, tuple)):
            return ",".join(str(item) for item in value)
        # str() also for a CDK number token: its text stands for the number inside a string, which the API requires
        return value if isinstance(value, str) else str(value)


_Param = TensorParameterSpec  # short name for the catalog below


# --- the catalog ---------------------------------------------------------------------------------------------------------


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
    parameters: tuple[TensorParameterSpec, ...]
    collections: tuple[CollectionConfig, ...] = ()
    needs_other_trials: bool = False
    #: (lower, higher) parameter pairs that must be ordered when both are given.
    ordered: tuple[tuple[str, str], ...] = ()

    @property
    def rule_to_invoke(self) -> str:
        return self.name


def _every_500(name: str, include_regex: str | None = None) -> CollectionConfig:
    parameters = {"include_regex": include_regex} if include_regex else {}
    return CollectionConfig(name, {**parameters, "save_interval": "500"})


_COLLECTION_NAMES = _Param("collection_names", None, "string", "Collection whose tensors the rule checks.")


def _tensor_regex(default: str | None = None) -> TensorParameterSpec:
    return _Param("tensor_regex", default, "regex", "Regular expression selecting the tensors the rule checks.")


_SPECS = (
    DebuggerRuleSpec(
        "VanishingGradient", "vanishing_gradient",
        "Fires when the mean absolute gradient falls below the threshold, so layers stop learning.",
        DEEP_LEARNING,
        (_Param("threshold", 0.0000001, "positive_number", "Mean absolute gradient below which the rule fires."),),
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
            _Param("num_steps", None, "positive_int", "Steps between the two weight snapshots compared; None = consecutive saves."),
            _Param("large_threshold", 10.0, "positive_number", "Update ratio above which the rule fires."),
            _Param("small_threshold", 0.00000001, "positive_number", "Update ratio below which the rule fires."),
            _Param("epsilon", 0.000000001, "positive_number", "Small constant that avoids division by zero."),
        ),
        (_every_500("weights"),),
    ),
    DebuggerRuleSpec(
        "AllZero", "all_zero",
        "Fires when a share of tensor values above the threshold are all zero.",
        DEEP_LEARNING_AND_XGBOOST,
        (_COLLECTION_NAMES, _tensor_regex(), _Param("threshold", 100, "percentile", "Percentage of zero values that fires.")),
    ),
    DebuggerRuleSpec(
        "ExplodingTensor", "exploding_tensor",
        "Fires when tensors contain NaN or infinite values.",
        DEEP_LEARNING,
        (_COLLECTION_NAMES, _tensor_regex(), _Param("only_nan", False, "boolean", "Only NaN fires; infinities are ignored.")),
    ),
    DebuggerRuleSpec(
        "UnchangedTensor", "unchanged_tensor",
        "Fires when tensors stop changing across steps (numpy.allclose over num_steps).",
        DEEP_LEARNING_AND_XGBOOST,
        (
            _COLLECTION_NAMES,
            _tensor_regex(),
            _Param("num_steps", 3, "positive_int", "Steps over which the tensor must stay unchanged."),
            _Param("rtol", 1e-05, "non_negative_number", "Relative tolerance of the comparison."),
            _Param("atol", 1e-08, "non_negative_number", "Absolute tolerance of the comparison."),
            _Param("equal_nan", False, "boolean", "Treat NaNs in the same place as equal."),
        ),
    ),
    DebuggerRuleSpec(
        "LossNotDecreasing", "loss_not_decreasing",
        "Fires when the loss does not decrease by diff_percent within num_steps.",
        DEEP_LEARNING_AND_XGBOOST,
        (
            _COLLECTION_NAMES,
            _tensor_regex(),
            _Param("use_losses_collection", True, "boolean", "Also check the tensors of the 'losses' collection."),
            _Param("num_steps", 10, "positive_int", "Steps after which the loss must have decreased."),
            _Param("diff_percent", 0.1, "open_percent", "Minimum decrease, in percent, between checks."),
            _Param("increase_threshold_percent", 5, "open_percent", "Loss increase, in percent, that fires at once."),
            _Param("mode", "GLOBAL", "choice", "Steps of this mode are checked.", choices=("GLOBAL", "TRAIN", "EVAL")),
        ),
        (_every_500("losses"),),
    ),
    DebuggerRuleSpec(
        "CheckInputImages", "check_input_images",
        "Fires when input images do not look normalized (mean far from zero).",
        DEEP_LEARNING_APPLICATIONS,
        (
            _Param("threshold_mean", 0.2, "non_negative_number", "Largest acceptable absolute mean of the input."),
            _Param("threshold_samples", 500, "positive_int", "Images to sample before the check."),
            _Param("regex", ".*hybridsequential0_input_0", "regex", "Regular expression selecting the input tensor."),
            _Param("channel", 1, "non_negative_int", "Index of the color-channel dimension."),
        ),
        (_every_500("input_image", ".*hybridsequential0_input_0"),),
    ),
    DebuggerRuleSpec(
        "DeadRelu", "dead_relu",
        "Fires when too many ReLU units output zero (inactive) in too many layers.",
        DEEP_LEARNING,
        (
            _tensor_regex(".*relu_output"),
            _Param("threshold_inactivity", 1.0, "percentile", "Percentage of zero outputs that makes a unit dead."),
            _Param("threshold_layer", 50.0, "percentile", "Percentage of dead units that makes a layer fire."),
        ),
        (_every_500("relu_output", ".*relu_output"),),
    ),
    DebuggerRuleSpec(
        "Confusion", "confusion",
        "Fires when the confusion matrix is poor: low diagonal or high off-diagonal share.",
        XGBOOST,
        (
            _Param("category_no", None, "category_count", "Number of classes; None = inferred."),
            _Param("labels", "labels", "string", "Tensor holding the true labels."),
            _Param("predictions", "predictions", "string", "Tensor holding the predictions."),
            _Param("labels_collection", "labels", "string", "Collection holding the labels tensor."),
            _Param("predictions_collection", "predictions", "string", "Collection holding the predictions tensor."),
            _Param("min_diag", 0.9, "proportion", "Smallest acceptable share on the diagonal (0..1)."),
            _Param("max_off_diag", 0.1, "proportion", "Largest acceptable share off the diagonal (0..1)."),
        ),
    ),
    DebuggerRuleSpec(
        "TreeDepth", "tree_depth",
        "Fires when XGBoost trees are deeper than depth.",
        XGBOOST,
        (_Param("depth", 4, "positive_int", "Tree depth above which the rule fires."),),
    ),
    DebuggerRuleSpec(
        "ClassImbalance", "class_imbalance",
        "Fires when classes are imbalanced or one class is mispredicted much more than the others.",
        DEEP_LEARNING_AND_XGBOOST,
        (
            _Param("threshold_imbalance", 10, "positive_number", "Ratio between the largest and smallest class that fires."),
            _Param("threshold_misprediction", 0.7, "proportion", "Misprediction share per class that fires (0..1)."),
            _Param("samples", 500, "positive_int", "Labels to collect before the check."),
            _Param("argmax", False, "boolean", "Apply argmax to the predictions first."),
            _Param("labels_regex", ".*labels", "regex", "Regular expression selecting the labels tensor."),
            _Param("predictions_regex", ".*predictions", "regex", "Regular expression selecting the predictions tensor."),
        ),
    ),
    DebuggerRuleSpec(
        "Overfit", "overfit",
        "Fires when the validation loss drifts away from the training loss.",
        DEEP_LEARNING_AND_XGBOOST,
        (
            _tensor_regex(),
            _Param("start_step", 0, "non_negative_int", "Step at which the comparison starts."),
            _Param("patience", 1, "positive_int", "Steps the ratio may exceed the threshold before the rule fires."),
            _Param("ratio_threshold", 0.1, "positive_number", "Largest acceptable (validation - training) / training loss."),
        ),
    ),
    DebuggerRuleSpec(
        "TensorVariance", "tensor_variance",
        "Fires when tensor variance is very high or very low (exploding or vanishing values).",
        DEEP_LEARNING_AND_XGBOOST,
        (
            _COLLECTION_NAMES,
            _tensor_regex(),
            _Param("max_threshold", None, "number", "Variance above which the rule fires."),
            _Param("min_threshold", None, "number", "Variance below which the rule fires."),
        ),
        ordered=(("min_threshold", "max_threshold"),),
    ),
    DebuggerRuleSpec(
        "Overtraining", "overtraining",
        "Fires when the validation loss stops improving while the training loss still improves.",
        DEEP_LEARNING_AND_XGBOOST,
        (
            _Param("patience_train", 5, "positive_int", "Steps the training loss may stall before training counts as stalled."),
            _Param("patience_validation", 10, "positive_int", "Steps the validation loss may stall before the rule fires."),
            _Param("delta", 0.01, "non_negative_number", "Smallest improvement that counts."),
        ),
    ),
    DebuggerRuleSpec(
        "PoorWeightInitialization", "poor_weight_initialization",
        "Fires when activation inputs suggest a poor weight initialization.",
        DEEP_LEARNING,
        (
            _Param("activation_inputs_regex", ".*relu_input", "regex", "Regular expression selecting activation inputs."),
            _Param("threshold", 10.0, "positive_number", "Ratio of largest to smallest per-layer variance that fires."),
            _Param("distribution_range", 0.001, "positive_number", "Smallest acceptable spread of the distribution."),
            _Param("patience", 5, "positive_int", "Steps to wait for the loss to start decreasing."),
            _Param("steps", 10, "positive_int", "Steps the rule analyses."),
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
            _Param("threshold_tanh_min", -9.4999, "number", "tanh input below which a unit counts as saturated."),
            _Param("threshold_tanh_max", 9.4999, "number", "tanh input above which a unit counts as saturated."),
            _Param("threshold_sigmoid_min", -23, "number", "sigmoid input below which a unit counts as saturated."),
            _Param("threshold_sigmoid_max", 16.99999, "number", "sigmoid input above which a unit counts as saturated."),
            _Param("threshold_inactivity", 1.0, "percentile", "Percentage of saturated steps that makes a unit saturated."),
            _Param("threshold_layer", 50.0, "percentile", "Percentage of saturated units that makes a layer fire."),
        ),
        ordered=(("threshold_tanh_min", "threshold_tanh_max"), ("threshold_sigmoid_min", "threshold_sigmoid_max")),
    ),
    DebuggerRuleSpec(
        "NLPSequenceRatio", "nlp_sequence_ratio",
        "Fires when given tokens (e.g. padding) make up too much of the input sequences.",
        DEEP_LEARNING_APPLICATIONS,
        (
            _tensor_regex(".*embedding0_input_0"),
            _Param("token_values", "0", "value_list", "Token values to count, comma-separated."),
            _Param("token_thresholds_percent", "50", "percent_list", "Largest acceptable share per token, comma-separated."),
        ),
        (_every_500("input_sequence", ".*embedding0_input_0"),),
    ),
    DebuggerRuleSpec(
        "StalledTrainingRule", "stalled_training_rule",
        "Fires when the job writes no new tensors for threshold seconds; can stop the job.",
        DEEP_LEARNING_AND_XGBOOST,
        (
            _Param("threshold", 1800, "positive_int", "Seconds without progress after which the rule fires."),
            _Param("stop_training_on_fire", False, "boolean", "Stop the training job when the rule fires."),
            _Param(
                "training_job_name_prefix", None, "string",
                "Job to stop; defaults to the job-name prefix. If several running jobs match, none is stopped.",
            ),
        ),
    ),
    DebuggerRuleSpec(
        "FeatureImportanceOverweight", "feature_importance_overweight",
        "Fires when a few features carry most of the importance (XGBoost feature importance).",
        XGBOOST,
        (
            _Param("threshold", 0.8, "proportion", "Share of the total importance held by the top nfeatures that fires."),
            _Param("nfeatures", 3, "positive_int", "Number of top features considered."),
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


# --- IAM needs of rule actions -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RulePermissions:
    """What the rule container needs from the job's execution role to run the rules' actions.

    ``notification_topic``: the ``SMDebugRules`` SNS topic (Email and SMS actions); ``notification_endpoints`` the
    ``(protocol, endpoint)`` pairs the container subscribes to it. ``stop_training_job_prefixes``: StopTrainingJob on
    jobs with these name prefixes, plus ListTrainingJobs.
    """

    notification_topic: bool = False
    stop_training_job_prefixes: tuple[str, ...] = ()
    notification_endpoints: tuple[tuple[str, str], ...] = ()

    #: The topic the rule container publishes Email and SMS actions to.
    TOPIC_NAME: ClassVar[str] = "SMDebugRules"

    @property
    def stops_training(self) -> bool:
        return bool(self.stop_training_job_prefixes)

    def training_job_name_patterns(self) -> tuple[str, ...]:
        """Resource-name patterns for ``sagemaker:StopTrainingJob`` (``arn:...:training-job/<pattern>``).

        SageMaker writes job names in lowercase in ARNs, so the prefixes are lowercased (tokens are left as they are).
        ``sagemaker:ListTrainingJobs`` has no resource-level permissions and needs ``*``.
        """
        return tuple(job_name_pattern(prefix) for prefix in self.stop_training_job_prefixes)

    def __or__(self, other: RulePermissions) -> RulePermissions:
        prefixes = dict.fromkeys((*self.stop_training_job_prefixes, *other.stop_training_job_prefixes))
        endpoints = dict.fromkeys((*self.notification_endpoints, *other.notification_endpoints))
        return RulePermissions(self.notification_topic or other.notification_topic, tuple(prefixes), tuple(endpoints))


# --- rules ---------------------------------------------------------------------------------------------------------------


def _check_other_trials(value: Any, *, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigurationTypeError(
            f"expected a list of S3 URIs of other jobs' Debugger output, got {type(value).__name__} {value!r}.",
            where=where,
            field="other_trials",
            value=value,
        )
    trials = tuple(value)
    for trial in trials:
        if not is_token(trial) and (not isinstance(trial, str) or not S3_URI.fullmatch(trial)):
            raise ConfigurationError(
                f"every item must be an S3 URI like 's3://bucket/other-job/debug-output', got {trial!r}.",
                where=where,
                field="other_trials",
                value=trial,
            )
    return trials


def _check_collections(value: Any, *, where: str) -> tuple[CollectionConfig, ...] | None:
    if value is None:
        return None
    if isinstance(value, (CollectionConfig, str)) or not isinstance(value, Iterable):
        raise ConfigurationTypeError(
            f"expected a list of CollectionConfig, got {type(value).__name__} {value!r}.",
            where=where,
            field="collections_to_save",
            value=value,
        )
    items = tuple(value)
    for item in items:
        if not isinstance(item, CollectionConfig):
            raise ConfigurationTypeError(
                f"expected CollectionConfig items, got {type(item).__name__} {item!r}.",
                where=where,
                field="collections_to_save",
                value=item,
            )
    return items


class Rule(RuleBase):
    """Base class of debugger rules. Use the catalog classes (``debugger_rules.LossNotDecreasing(...)``) or
    :meth:`Rule.custom`."""

    rule_to_invoke: str | None
    other_trials: tuple[str, ...]
    actions: Action | ActionList | None

    #: Framework scope of a built-in rule; None for custom rules.
    scope: ClassVar[RuleScope | None] = None
    #: ``Rule.custom(name=..., ...)`` builds a :class:`CustomRule` (assigned below, once the class exists).
    custom: ClassVar[type[CustomRule]]

    def _init_common(
        self,
        *,
        name: str,
        actions: Any,
        local_path: str | None,
        s3_output_path: str | None,
        other_trials: Any,
        collections_to_save: Any,
    ) -> None:
        self._init_output(name, local_path, s3_output_path)
        self.actions = check_actions(actions, where=self.where)
        self.other_trials = _check_other_trials(other_trials, where=self.where)
        self._collections_to_save = _check_collections(collections_to_save, where=self.where)

    @property
    def collections(self) -> tuple[CollectionConfig, ...]:
        """The collections the hook must save for this rule (``collections_to_save`` replaces the built-in ones)."""
        return self._collections_to_save if self._collections_to_save is not None else self._default_collections()

    def _default_collections(self) -> tuple[CollectionConfig, ...]:
        return ()

    # -- hooks for subclasses ---------------------------------------------------------------------------------------------
    def _leading_parameters(self, source_s3_uri: str | None) -> dict[str, Any]:
        return {"rule_to_invoke": self.rule_to_invoke}

    def _rendered_parameters(self, job_name_prefix: str | None) -> dict[str, Any]:
        # RuleParameters are strings; a CDK number token is turned into its string form too (rendered as a string)
        return {key: value if isinstance(value, str) else str(value) for key, value in self.parameters.items()}

    # -- actions and permissions ------------------------------------------------------------------------------------------
    def _filled_actions(self, job_name_prefix: str | None) -> Action | ActionList | None:
        if self.actions is None:
            return None
        needs_prefix = any(getattr(action, "needs_job_prefix", False) for action in self.actions)
        if not needs_prefix:
            return self.actions
        if job_name_prefix is None:
            raise ConfigurationError(
                "StopTraining() without a prefix stops the job this rule belongs to, so rendering needs "
                "job_name_prefix=. Pass it, or give StopTraining('<job-name-prefix>') explicitly.",
                where=self.where,
                field="actions",
            )
        return self.actions.with_job_prefix(job_name_prefix)

    def _action_json(self, job_name_prefix: str | None) -> str | None:
        actions = self._filled_actions(job_name_prefix)
        if actions is None:
            return None
        text = actions.serialize()
        if not is_token(text) and len(text) > ACTION_JSON_MAX_LENGTH:
            raise ConfigurationError(
                f"the actions serialize to {len(text)} characters, but the API allows at most "
                f"{ACTION_JSON_MAX_LENGTH} per rule parameter (action_json = {text[:60]!r}...). Use fewer actions, "
                "a shorter StopTraining prefix or shorter addresses; or notify through one SNS topic subscription "
                "with RuleAlarm instead.",
                where=self.where,
                field="actions",
                value=len(text),
            )
        return text

    def permissions(self, *, job_name_prefix: str | None = None) -> RulePermissions:
        """What the job's execution role needs so the rule container can run this rule's actions."""
        actions = self._filled_actions(job_name_prefix)
        if actions is None:
            return RulePermissions()
        prefixes = tuple(action.training_job_prefix for action in actions if action.stops_training)  # type: ignore[attr-defined]
        endpoints = tuple((action.action_name, action.endpoint) for action in actions if action.notifies)  # type: ignore[attr-defined]
        return RulePermissions(
            any(action.notifies for action in actions), tuple(dict.fromkeys(prefixes)), tuple(dict.fromkeys(endpoints))
        )

    # -- rendering ------------------------------------------------------------------------------------------------------------
    def to_rule_configuration(
        self,
        *,
        region: str | None = None,
        image_uri: str | None = None,
        job_name_prefix: str | None = None,
        source_s3_uri: str | None = None,
    ) -> dict[str, Any]:
        """The DebugRuleConfiguration dict.

        Give ``region`` (the rule image is looked up) or ``image_uri`` (used as is, e.g. a CloudFormation token).
        ``job_name_prefix`` fills in StopTraining actions without a prefix.
        """
        params: dict[str, Any] = {f"other_trial_{index}": trial for index, trial in enumerate(self.other_trials)}
        params.update(self._leading_parameters(source_s3_uri))
        params.update(self._rendered_parameters(job_name_prefix))
        action_json = self._action_json(job_name_prefix)
        if action_json is not None:
            params["action_json"] = action_json
        return self._render_configuration(region=region, image_uri=image_uri, parameters=params)

    def framework_warning(self, framework_name: str | None) -> str | None:
        """A warning when the training framework is outside the rule's documented scope."""
        if self.scope is None or framework_name is None or framework_name in self.scope.frameworks:
            return None
        return (
            f"{self.where}: {type(self).__name__} applies to {self.scope.label} training, but the training image is "
            f"{framework_name}; the rule will probably find no tensors to check."
        )


class BuiltinRule(Rule):
    """A built-in debugger rule from the catalog; the subclasses are generated from ``DEBUGGER_RULE_SPECS``."""

    spec: ClassVar[DebuggerRuleSpec]

    def __init__(
        self,
        *,
        name: str | None = None,
        actions: Action | ActionList | None = None,
        collections_to_save: Sequence[CollectionConfig] | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        other_trials: Sequence[str] | None = None,
        **parameters: Any,
    ) -> None:
        spec = self.spec
        self.rule_to_invoke = spec.rule_to_invoke
        self._init_common(
            name=spec.name if name is None else name,
            actions=actions,
            local_path=local_path,
            s3_output_path=s3_output_path,
            other_trials=other_trials,
            collections_to_save=collections_to_save,
        )
        if "rule_to_invoke" in parameters:
            raise ConfigurationError(
                "a built-in rule always invokes itself; to run your own rule class use debugger_rules.Rule.custom(...).",
                where=self.where,
                field="rule_to_invoke",
                value=parameters["rule_to_invoke"],
            )
        if spec.needs_other_trials and not self.other_trials:
            raise ConfigurationError(
                "needs other_trials=[...]: the S3 URIs of the Debugger output of the runs to compare with, e.g. "
                "['s3://bucket/output/other-job/debug-output'].",
                where=self.where,
                field="other_trials",
            )
        if self.other_trials and not spec.needs_other_trials:
            raise ConfigurationError(
                f"{spec.name} does not compare runs, so other_trials has no effect. Remove it (SimilarAcrossRuns "
                "and custom rules take other_trials).",
                where=self.where,
                field="other_trials",
            )
        given = {key: value for key, value in parameters.items() if value is not None}
        validate_parameters(spec.parameters, given, where=self.where)
        self.parameters = given
        self._check_combinations()

    def _default_collections(self) -> tuple[CollectionConfig, ...]:
        return self.spec.collections

    def _check_combinations(self) -> None:
        params = self.parameters
        defaults = {spec.name: spec.default for spec in self.spec.parameters}
        for low, high in self.spec.ordered:
            if low not in params and high not in params:
                continue
            # A value given on one side is compared with the container's default on the other.
            low_value, high_value = params.get(low, defaults[low]), params.get(high, defaults[high])
            if low_value is None or high_value is None or is_token(low_value) or is_token(high_value):
                continue
            if low_value >= high_value:
                low_text = f"{low_value}{'' if low in params else ', the default'}"
                high_text = f"{high_value}{'' if high in params else ', the default'}"
                raise ConfigurationError(
                    f"{low} ({low_text}) must be lower than {high} ({high_text}).",
                    where=self.where,
                    field=low if low in params else high,
                    value=params.get(low, params.get(high)),
                )
        if self.spec.name == "NLPSequenceRatio":
            self._check_token_lists()
        if self.spec.name == "StalledTrainingRule" and "training_job_name_prefix" in params:
            if not params.get("stop_training_on_fire"):
                raise ConfigurationError(
                    "training_job_name_prefix only matters with stop_training_on_fire=True. Set it, or remove the prefix.",
                    where=self.where,
                    field="training_job_name_prefix",
                    value=params["training_job_name_prefix"],
                )

    def _check_token_lists(self) -> None:
        specs = {spec.name: spec for spec in self.spec.parameters}
        values = specs["token_values"].render(self.parameters.get("token_values", specs["token_values"].default))
        thresholds = specs["token_thresholds_percent"].render(
            self.parameters.get("token_thresholds_percent", specs["token_thresholds_percent"].default)
        )
        if is_token(values) or is_token(thresholds):
            return
        if len(values.split(",")) != len(thresholds.split(",")):
            raise ConfigurationError(
                f"token_values ({values!r}) and token_thresholds_percent ({thresholds!r}) need one threshold per "
                "token value.",
                where=self.where,
                field="token_thresholds_percent",
                value=thresholds,
            )

    def _stops_training_on_fire(self) -> bool:
        return self.spec.name == "StalledTrainingRule" and self.parameters.get("stop_training_on_fire") is True

    def _rendered_parameters(self, job_name_prefix: str | None) -> dict[str, Any]:
        specs = {spec.name: spec for spec in self.spec.parameters}
        rendered = {key: specs[key].render(value) for key, value in self.parameters.items()}
        if self._stops_training_on_fire() and "training_job_name_prefix" not in rendered:
            if job_name_prefix is None:
                raise ConfigurationError(
                    "stop_training_on_fire=True needs the name prefix of the job to stop: pass job_name_prefix= when "
                    "rendering, or training_job_name_prefix=.",
                    where=self.where,
                    field="training_job_name_prefix",
                )
            rendered["training_job_name_prefix"] = job_name_prefix
        return rendered

    def permissions(self, *, job_name_prefix: str | None = None) -> RulePermissions:
        own = super().permissions(job_name_prefix=job_name_prefix)
        if not self._stops_training_on_fire():
            return own
        prefix = self.parameters.get("training_job_name_prefix", job_name_prefix)
        return own | RulePermissions(stop_training_job_prefixes=(prefix,) if prefix else ())


# --- custom rules --------------------------------------------------------------------------------------------------------

#: Parameters of a custom debugger rule that the library sets, and the argument that sets each.
_RESERVED_PARAMETERS = {
    "rule_to_invoke": "rule_to_invoke",
    "source_s3_uri": "source",
    "action_json": "actions",
    "other_trial_": "other_trials",
}


class CustomRule(CustomRuleFields, Rule):
    """A debugger rule you wrote: ``source`` (a local .py file or s3:// URI) run by the custom rule evaluator image of
    the region, or your own ``image_uri``. ``source`` and ``rule_to_invoke`` go together; ``other_trials`` passes other
    jobs' Debugger output (``other_trial_0``, ...) for cross-run comparisons. ``parameters`` are your rule's own
    RuleParameters, sent as strings (the SDK calls them ``rule_parameters``)."""

    def __init__(
        self,
        *,
        name: str,
        instance_type: str,
        volume_size_in_gb: int,
        image_uri: str | None = None,
        source: str | os.PathLike[str] | None = None,
        rule_to_invoke: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        other_trials: Sequence[str] | None = None,
        collections_to_save: Sequence[CollectionConfig] | None = None,
        actions: Action | ActionList | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
    ) -> None:
        if not isinstance(name, str) and not is_token(name):
            raise ConfigurationTypeError(
                f"a custom rule needs name= (its RuleConfigurationName), got {name!r}.",
                where="custom debugger rule",
                field="name",
                value=name,
            )
        self._init_common(
            name=name,
            actions=actions,
            local_path=local_path,
            s3_output_path=s3_output_path,
            other_trials=other_trials,
            collections_to_save=collections_to_save,
        )
        where = self.where
        if (source is None) != (rule_to_invoke is None):
            missing = "rule_to_invoke" if rule_to_invoke is None else "source"
            raise ConfigurationError(
                "source and rule_to_invoke go together: the evaluator loads source and runs the rule class "
                f"rule_to_invoke from it. {missing} is missing.",
                where=where,
                field=missing,
            )
        if source is None and image_uri is None:
            raise ConfigurationError(
                "a custom rule needs source= and rule_to_invoke= (run by the custom rule evaluator image), or "
                "image_uri= (your own rule container).",
                where=where,
                field="source",
            )
        if rule_to_invoke is not None and (not isinstance(rule_to_invoke, str) or not rule_to_invoke):
            raise ConfigurationTypeError(
                f"expected the name of the rule class in source, got {rule_to_invoke!r}.",
                where=where,
                field="rule_to_invoke",
                value=rule_to_invoke,
            )
        self.rule_to_invoke = rule_to_invoke
        self._init_custom_fields(
            instance_type=instance_type, volume_size_in_gb=volume_size_in_gb, image_uri=image_uri, source=source
        )
        self.parameters = check_custom_parameters(parameters, where=where, reserved=_RESERVED_PARAMETERS)

    def _leading_parameters(self, source_s3_uri: str | None) -> dict[str, Any]:
        return self._source_parameters(source_s3_uri)


Rule.custom = CustomRule


# --- generated classes ---------------------------------------------------------------------------------------------------


def _make_rule_class(spec: DebuggerRuleSpec) -> type[BuiltinRule]:
    lines = [
        spec.summary,
        "",
        f"Scope: {spec.scope.label}. SDK equivalent: rule_configs.{spec.function_name}().",
        "Parameters (documented container defaults; only the ones you pass are sent):",
    ]
    lines += [f"    {p.name} ({p.python_type}, default {p.default!r}): {p.doc}" for p in spec.parameters]
    if spec.collections:
        lines.append("Collections saved by the hook: " + ", ".join(repr(c) for c in spec.collections))
    attributes = {"spec": spec, "scope": spec.scope, "__doc__": "\n".join(lines), "__module__": __name__}
    return type(spec.name, (BuiltinRule,), attributes)


#: Every built-in debugger rule class by name.
RULE_CLASSES: dict[str, type[BuiltinRule]] = {name: _make_rule_class(spec) for name, spec in DEBUGGER_RULE_SPECS.items()}
globals().update(RULE_CLASSES)
__all__ += list(RULE_CLASSES)

_BY_FUNCTION_NAME = {spec.function_name: spec.name for spec in _SPECS}


def from_name(rule_name: str, **kwargs: Any) -> BuiltinRule:
    """A built-in rule by class name or SDK function name: ``from_name("loss_not_decreasing", num_steps=20)``."""
    cls = RULE_CLASSES.get(rule_name) or RULE_CLASSES.get(_BY_FUNCTION_NAME.get(rule_name, ""))
    if cls is None:
        names = [*RULE_CLASSES, *_BY_FUNCTION_NAME]
        raise ConfigurationError(
            f"unknown debugger rule {rule_name!r}.{did_you_mean(str(rule_name), names)} "
            f"Built-in rules: {', '.join(RULE_CLASSES)}.",
            field="rule",
            value=rule_name,
        )
    return cls(**kwargs)
