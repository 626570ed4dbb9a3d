"""What one sampler run needs to know, read from the job's environment (contract.py) and SageMaker's config files.

The variables in contract.py are what the construct sets; the ones here are knobs for tests, benchmarks and unusual
images. Every bad value raises SettingsError naming the variable, the value and the fix; callers inside a training
process turn that into one log line instead of an exception.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, replace

from . import contract
from .lock import LOCAL_DIR, ROLE, default_local_dir  # noqa: F401 - defined in lock.py, which stays import-light
from .watch import SUPERVISE  # noqa: F401 - defined in watch.py, which stays import-light

#: Where /proc is (a fake one for tests and the benchmark).
PROC_ROOT = "CDK_SAGEMAKER_SAMPLER_PROC_ROOT"
#: NVML shared library to load with ctypes (a fake one for tests).
NVML_LIBRARY = "CDK_SAGEMAKER_SAMPLER_NVML_LIBRARY"
#: SageMaker's config folder (resourceconfig.json, trainingjobconfig.json).
CONFIG_DIR = "CDK_SAGEMAKER_SAMPLER_CONFIG_DIR"
#: "auto" (= "stdlib": urllib + SigV4, the lighter client) or "boto3" (boto3's credential chain, about 28 MB more).
UPLOADER = "CDK_SAGEMAKER_SAMPLER_UPLOADER"
#: How data files are uploaded: "gzip" (``<name>.json.gz``, what the evaluator, the CLI and the reports read; the
#: default, see docs/sampler.md for the measurement) or "plain" (Debugger's own ``<name>.json``, for tools that read
#: Debugger's layout, such as smdebug).
UPLOAD_FORMAT = "CDK_SAGEMAKER_SAMPLER_UPLOAD_FORMAT"
UPLOAD_FORMATS = ("gzip", "plain")
DEFAULT_UPLOAD_FORMAT = "gzip"
#: Seconds added to the wall clock of the sampler and of the step events (tests only: a short run can then cross
#: a minute boundary, the only point at which the evaluator judges a minute).
CLOCK_OFFSET = "CDK_SAGEMAKER_SAMPLER_CLOCK_OFFSET_S"
#: Seconds without any training process before the sampler concludes the training ended (default 10).
END_GRACE = "CDK_SAGEMAKER_SAMPLER_END_GRACE_S"
#: Most megabytes of data the sampler keeps locally while uploads fail; the oldest go first (default 512).
MAX_BUFFER = "CDK_SAGEMAKER_SAMPLER_MAX_BUFFER_MB"
#: Megabytes of free space the sampler leaves on its volume for the training (default 1024).
MIN_FREE = "CDK_SAGEMAKER_SAMPLER_MIN_FREE_MB"
#: The training job's name, as SageMaker sets it in every training container.
JOB_NAME = "TRAINING_JOB_NAME"
#: Standard AWS SDK variables for an S3 endpoint override (moto in tests, a VPC endpoint URL in production).
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")

DEFAULT_CONFIG_DIR = "/opt/ml/input/config"
DEFAULT_NODE = "algo-1"
DEFAULT_NVML_LIBRARY = "libnvidia-ml.so.1"
UPLOADERS = ("auto", "boto3", "stdlib")
_NODE = re.compile(r"algo-\d+\Z")
_S3_URI = re.compile(r"s3://([a-z0-9][a-z0-9.\-]{1,61}[a-z0-9])(?:/(.*))?\Z")


class SettingsError(ValueError):
    """A sampler setting is invalid; the message says which, the bad value and how to fix it."""


@dataclass(frozen=True)
class Settings:
    local_dir: str
    interval_ms: int = contract.DEFAULT_INTERVAL_MS
    node: str = DEFAULT_NODE
    s3_uri: str | None = None
    job_name: str | None = None
    framework_events: bool = True
    proc_root: str = "/proc"
    nvml_library: str = DEFAULT_NVML_LIBRARY
    uploader: str = "auto"
    upload_format: str = DEFAULT_UPLOAD_FORMAT
    endpoint_url: str | None = None
    watch_members: bool = False
    end_marker: bool = False
    prune_uploaded: bool = False
    end_grace_s: float = 10.0
    supervise_s: float = 5.0
    max_buffer_mb: float = 512.0
    min_free_mb: float = 1024.0
    on_hang: str = "log"
    hang_minutes: float = contract.DEFAULT_HANG_MINUTES
    clock_offset_s: float = 0.0
    training_pid: int | None = None

    def with_changes(self, **changes: object) -> Settings:
        return replace(self, **changes).validated()

    def validated(self) -> Settings:
        check_interval(self.interval_ms, "interval_ms")
        check_node(self.node, "node")
        if self.s3_uri is not None:
            split_s3_uri(self.s3_uri)
        if self.uploader not in UPLOADERS:
            raise SettingsError(f"{UPLOADER}={self.uploader!r}: use one of {', '.join(UPLOADERS)}.")
        if self.upload_format not in UPLOAD_FORMATS:
            raise SettingsError(f"{UPLOAD_FORMAT}={self.upload_format!r}: use one of {', '.join(UPLOAD_FORMATS)} "
                                "(plain keeps Debugger's .json files for tools that read them).")
        if self.on_hang not in contract.HANG_ACTIONS:
            raise SettingsError(f"{contract.ON_HANG}={self.on_hang!r}: use one of {', '.join(contract.HANG_ACTIONS)}.")
        if not (isinstance(self.hang_minutes, (int, float)) and 0 < self.hang_minutes <= 10080):
            raise SettingsError(f"{contract.HANG_MINUTES}={self.hang_minutes!r}: use minutes above 0 and at most 10080 "
                                "(a week), for example 10.")
        if not self.local_dir:
            raise SettingsError(f"{LOCAL_DIR}: the local folder is empty; set it to a writable folder.")
        for name, value in ((END_GRACE, self.end_grace_s), (SUPERVISE, self.supervise_s),
                            (MAX_BUFFER, self.max_buffer_mb), (MIN_FREE, self.min_free_mb)):
            check_amount(value, name)
        return self


def check_amount(value: object, source: str) -> float:
    """A finite number >= 0 (seconds or megabytes); NaN, infinity and negatives are refused."""
    try:
        number = float(str(value).strip())
    except ValueError:
        number = float("nan")
    if not math.isfinite(number) or number < 0:
        raise SettingsError(f"{source}={value!r}: expected a finite number >= 0.")
    return number


def duration(text: str) -> float:
    """``--duration``: seconds, finite and >= 0 (argparse type; ``nan`` would never end)."""
    import argparse

    try:
        return check_amount(text, "--duration")
    except SettingsError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration in seconds (a finite number >= 0)") from exc


def check_interval(value: object, source: str) -> int:
    try:
        interval = int(str(value).strip())
    except ValueError:
        interval = -1
    if interval not in contract.INTERVALS_MS:
        allowed = ", ".join(str(i) for i in contract.INTERVALS_MS)
        raise SettingsError(f"{source}={value!r}: the sampling interval must be one of {allowed} milliseconds "
                            "(the values ProfilerConfig allows).")
    return interval


def check_node(node: str, source: str) -> str:
    if not _NODE.match(node):
        raise SettingsError(f"{source}={node!r}: node ids look like algo-1, algo-2, ... (SageMaker's host names); "
                            "the profiler readers only accept file names ending in .algo-<n>.json.")
    return node


def split_s3_uri(uri: str) -> tuple:
    """``s3://bucket/some/prefix/`` -> ("bucket", "some/prefix")."""
    match = _S3_URI.match(uri.strip())
    if not match:
        raise SettingsError(f"{contract.S3_URI}={uri!r}: expected s3://<bucket>[/<prefix>], for example "
                            "s3://my-bucket/profiler (the job's files go to <prefix>/<job name>/profiler-output/).")
    return match.group(1), (match.group(2) or "").strip("/")


def read_json(path: str) -> dict:
    """A SageMaker config file as a dict; {} when it is missing or unreadable (outside SageMaker)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def node_from_config(config_dir: str) -> str | None:
    host = read_json(os.path.join(config_dir, "resourceconfig.json")).get("current_host")
    return host if isinstance(host, str) and _NODE.match(host) else None


def job_name_from(env: dict, config_dir: str) -> str | None:
    """TRAINING_JOB_NAME (set by SageMaker in training containers), else trainingjobconfig.json's TrainingJobName."""
    name = env.get(JOB_NAME, "").strip()
    if name:
        return name
    name = read_json(os.path.join(config_dir, "trainingjobconfig.json")).get("TrainingJobName")
    return name.strip() if isinstance(name, str) and name.strip() else None


def endpoint_from(env: dict) -> str | None:
    for name in ENDPOINT_VARIABLES:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def flag(env: dict, name: str, default: bool) -> bool:
    value = env.get(name, "").strip()
    if not value:
        return default
    if value not in ("0", "1"):
        raise SettingsError(f"{name}={value!r}: use 1 (on) or 0 (off).")
    return value == "1"


def number(env: dict, name: str, default: float) -> float:
    value = env.get(name, "").strip()
    if not value:
        return default
    try:
        result = float(value)
    except ValueError:
        result = float("nan")
    if result != result or result in (float("inf"), float("-inf")):
        raise SettingsError(f"{name}={value!r}: expected a number, for example {default!r}.")
    return result


def is_disabled(env: dict) -> bool:
    return env.get(contract.DISABLED, "").strip() == "1"


def from_environment(env: dict | None = None, **overrides: object) -> Settings:
    """Settings for this container: explicit overrides win, then the environment, then SageMaker's config files.

    The node id comes from resourceconfig.json's current_host when SageMaker wrote one, else ``node``, else algo-1.
    """
    env = dict(os.environ if env is None else env)
    config_dir = env.get(CONFIG_DIR, "").strip() or DEFAULT_CONFIG_DIR
    s3_uri = overrides.pop("s3_uri", None) or env.get(contract.S3_URI, "").strip() or None
    interval = overrides.pop("interval_ms", None)
    interval_source = "interval_ms"
    if interval is None and env.get(contract.INTERVAL_MS, "").strip():
        interval, interval_source = env[contract.INTERVAL_MS], contract.INTERVAL_MS
    node = node_from_config(config_dir) or overrides.pop("node", None) or DEFAULT_NODE
    overrides.pop("node", None)
    values = {
        "local_dir": overrides.pop("local_dir", None) or default_local_dir(env),
        "interval_ms": contract.DEFAULT_INTERVAL_MS if interval is None else check_interval(interval, interval_source),
        "node": node,
        "s3_uri": s3_uri,
        "job_name": overrides.pop("job_name", None) or job_name_from(env, config_dir),
        "framework_events": flag(env, contract.FRAMEWORK_EVENTS, True),
        "proc_root": env.get(PROC_ROOT, "").strip() or "/proc",
        "nvml_library": env.get(NVML_LIBRARY, "").strip() or DEFAULT_NVML_LIBRARY,
        "uploader": env.get(UPLOADER, "").strip() or "auto",
        "upload_format": env.get(UPLOAD_FORMAT, "").strip().lower() or DEFAULT_UPLOAD_FORMAT,
        "endpoint_url": endpoint_from(env),
        "on_hang": env.get(contract.ON_HANG, "").strip() or "log",
        "hang_minutes": number(env, contract.HANG_MINUTES, contract.DEFAULT_HANG_MINUTES),
        "clock_offset_s": number(env, CLOCK_OFFSET, 0.0),
        **amounts_from(env),
    }
    for key, value in overrides.items():
        if key not in Settings.__dataclass_fields__:
            accepted = ", ".join(sorted(Settings.__dataclass_fields__))
            raise SettingsError(f"unknown sampler option {key!r}; accepted options: {accepted}.")
        if value is not None:
            values[key] = value
    return Settings(**values).validated()


def amounts_from(env: dict) -> dict:
    """The optional knobs set in the environment (end grace, supervision, buffer cap, free space)."""
    fields = {END_GRACE: "end_grace_s", SUPERVISE: "supervise_s", MAX_BUFFER: "max_buffer_mb", MIN_FREE: "min_free_mb"}
    return {field: check_amount(env[name], name) for name, field in fields.items() if env.get(name, "").strip()}


def add_arguments(parser: object, out_required: bool = False) -> None:
    """The options of ``python -m ...sampler`` and ``cdk-sagemaker-debugger sample`` (argparse)."""
    parser.add_argument("--out", metavar="DIR", required=out_required,
                        help="local folder to write to" + ("" if out_required else " (default: the container's)"))
    parser.add_argument("--interval-ms", type=int, choices=contract.INTERVALS_MS,
                        help=f"sampling interval (default: ${contract.INTERVAL_MS} or {contract.DEFAULT_INTERVAL_MS})")
    parser.add_argument("--duration", type=duration, metavar="SECONDS", help="stop after this long (default: never)")
    parser.add_argument("--node", metavar="algo-N", help="node id when SageMaker's resourceconfig.json has none")
    parser.add_argument("--s3-uri", metavar="S3_URI", help="also upload to <S3_URI>/<job name>/profiler-output/")
    parser.add_argument("--job-name", help=f"training job name for the upload (default: ${JOB_NAME})")


def settings_from_arguments(args: object, **extra: object) -> Settings:
    return from_environment(local_dir=args.out, interval_ms=args.interval_ms, node=args.node, s3_uri=args.s3_uri,
                            job_name=args.job_name, **extra)
