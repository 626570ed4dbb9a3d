"""What the construct tells the tensor collector: one environment variable holding a JSON object (one definition).

ProfiledTrainingJob writes it into the CreateTrainingJob ``Environment`` when the job has debugger rules evaluated by
the RuleEvaluator; the collector reads it at interpreter start. Standard library only and no imports, so it ships in
the sampler bundle unchanged and the model layer keeps its own copy of the names (checked equal by a test).

The object (every key optional except ``save_interval``; a collection is recorded only when its key is present)::

    {"version": 1, "save_interval": 500,
     "weights": true, "gradients": true,            # per-tensor reductions
     "updates": true,                               # update norm of each sampled optimizer step (WeightUpdateRatio)
     "unchanged": {"rtol": 1e-05},                  # keeps a copy of the weights between sampled steps (UnchangedTensor)
     "relu_output": true,                           # per-unit ReLU activity (DeadRelu)
     "saturation": {"tanh": [-9.4999, 9.4999], "sigmoid": [-23, 16.99999]},   # SaturatedActivation
     "relu_input": {"steps": 10},                   # ReLU input spread on the first steps (PoorWeightInitialization)
     "images": {"samples": 500},                    # per-channel means of image inputs (CheckInputImages)
     "tokens": {"values": [0]},                     # token-id counts of the first embedding input (NLPSequenceRatio)
     "labels": {"samples": 500}}                    # label/prediction pairs from the loss (ClassImbalance, Confusion)
"""

import json

#: The collector's configuration (the JSON object above). Absent: the collector does not start.
CONFIG = "CDK_SAGEMAKER_TENSORS"
#: "1" switches the collector off for one run without changing the job's rules.
DISABLED = "CDK_SAGEMAKER_TENSORS_DISABLED"
#: Folder for the files before upload. Default: /opt/ml/output/cdk-sagemaker-tensors, else a temp folder.
LOCAL_DIR = "CDK_SAGEMAKER_TENSORS_LOCAL_DIR"
#: "0": write the files locally only (no upload; they stay in the local folder). Default "1" when an S3 URI is set.
UPLOAD = "CDK_SAGEMAKER_TENSORS_UPLOAD"

DEFAULT_SAVE_INTERVAL = 500
VERSION = 1
COLLECTIONS = ("weights", "gradients", "updates", "unchanged", "relu_output", "saturation", "relu_input", "images",
               "tokens", "labels")
#: Cap on the samples a first-steps collection (images, labels) records before it records only on sampled steps.
MAX_SAMPLES = 1_000_000


class ConfigError(ValueError):
    """The collector configuration is not usable; the message names the key and the fix."""


def _positive_int(value, key, maximum=10**9):
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise ConfigError(f"{CONFIG}: {key} must be an integer from 1 to {maximum}, got {value!r}")
    return value


def _number(value, key):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) == float("inf"):
        raise ConfigError(f"{CONFIG}: {key} must be a finite number, got {value!r}")
    return float(value)


def _pair(value, key):
    if not isinstance(value, list) or len(value) != 2:
        raise ConfigError(f"{CONFIG}: {key} must be [minimum, maximum], got {value!r}")
    low, high = _number(value[0], key), _number(value[1], key)
    if low >= high:
        raise ConfigError(f"{CONFIG}: {key} minimum {low} is not below maximum {high}")
    return [low, high]


def _section(config, key):
    value = config.get(key)
    if value is True:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{CONFIG}: {key} must be true or an object, got {value!r}")
    return value


def parse(text):
    """The validated configuration dict of ``text`` (the variable's value); ConfigError says what is wrong."""
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{CONFIG} is not JSON ({exc}); it is written by ProfiledTrainingJob") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{CONFIG} must be a JSON object, got {type(config).__name__}")
    unknown = sorted(set(config) - set(COLLECTIONS) - {"version", "save_interval"})
    if unknown:
        raise ConfigError(f"{CONFIG}: unknown key(s) {', '.join(unknown)}; known: {', '.join(COLLECTIONS)}")
    out = {"version": VERSION,
           "save_interval": _positive_int(config.get("save_interval", DEFAULT_SAVE_INTERVAL), "save_interval")}
    for key in COLLECTIONS:
        if key not in config or config[key] is False:
            continue
        section = dict(_section(config, key))
        if key == "unchanged":
            section["rtol"] = _number(section.get("rtol", 1e-05), "unchanged.rtol")
        elif key == "saturation":
            section = {"tanh": _pair(section.get("tanh", [-9.4999, 9.4999]), "saturation.tanh"),
                       "sigmoid": _pair(section.get("sigmoid", [-23.0, 16.99999]), "saturation.sigmoid")}
        elif key == "relu_input":
            section["steps"] = _positive_int(section.get("steps", 10), "relu_input.steps", 10_000)
        elif key in ("images", "labels"):
            section["samples"] = _positive_int(section.get("samples", 500), f"{key}.samples", MAX_SAMPLES)
        elif key == "tokens":
            values = section.get("values", [0])
            if not isinstance(values, list) or not values or not all(
                    isinstance(v, int) and not isinstance(v, bool) for v in values):
                raise ConfigError(f"{CONFIG}: tokens.values must be a list of token ids, got {values!r}")
            section["values"] = sorted(set(values))
        out[key] = section
    return out


def environment(config):
    """The variable a job needs for the collector to record ``config`` (validated here, so synth fails early)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    parse(text)
    return {CONFIG: text}
