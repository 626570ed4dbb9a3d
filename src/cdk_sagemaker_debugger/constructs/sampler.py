"""Sampler: the profiler of RuleEngine.EVALUATOR, delivered to every training container as an input channel."""

from __future__ import annotations

import enum
import functools
import math
import tempfile
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from ..model.errors import ConfigurationError, ConfigurationTypeError
from ..runtime.sampler import contract
from ..runtime.sampler.bundle import write_bundle

__all__ = ["Sampler", "SAMPLER_CHANNEL", "DEFAULT_SAMPLER", "HangAction"]

#: The input channel that carries the sampler bundle (a zip that Python imports from, through PYTHONPATH).
SAMPLER_CHANNEL = "cdk-sagemaker-sampler"
_CHANNEL_DIR = f"/opt/ml/input/data/{SAMPLER_CHANNEL}"
_ASSETS: weakref.WeakKeyDictionary[cdk.Stack, s3_assets.Asset] = weakref.WeakKeyDictionary()


# What every job of a stack reads of its bundle, read once per asset and field (each attribute is a round trip to
# jsii). An object that cannot be weakly referenced (a plain namespace standing in for an asset) is read directly.
_LOCATIONS: weakref.WeakKeyDictionary[s3_assets.Asset, dict[str, str]] = weakref.WeakKeyDictionary()
_FIELDS: dict[str, Callable[[Any], str]] = {
    "url": lambda asset: asset.s3_object_url,
    "hash": lambda asset: asset.asset_hash,
    "object_arn": lambda asset: asset.bucket.arn_for_objects(asset.s3_object_key),
}


def _read(asset: s3_assets.Asset, field: str) -> str:
    try:
        cache = _LOCATIONS.setdefault(asset, {})
    except TypeError:
        return _FIELDS[field](asset)
    if field not in cache:
        cache[field] = _FIELDS[field](asset)
    return cache[field]


def bundle_object_arn(asset: s3_assets.Asset) -> str:
    """The ARN of the bundle object (what the execution role may download)."""
    return _read(asset, "object_arn")


class HangAction(enum.Enum):
    """What the sampler does when no training step or phase progresses on its host for ``hang_minutes``."""

    #: Write one line to the job's log and the sampler's status (the RuleEvaluator's TrainingHang still judges).
    LOG = "log"
    #: Also end the training's process group with a non-zero status, so that the job fails and SageMaker's retry
    #: strategy (``retry_strategy=``) or your restart from the last checkpoint applies, instead of the job billing
    #: until the NCCL watchdog or MaxRuntime.
    EXIT = "exit"


@dataclass(frozen=True)
class Sampler:
    """Samples CPU, memory, network and GPUs inside the training container every ``interval_millis`` and writes
    SageMaker Debugger's profiler layout to ``<output>/<job>/profiler-output/``, with no change to the training image.

    :param interval_millis: sampling interval; one of 100, 200, 500, 1000, 5000, 60000 (ProfilerConfig's values).
        Default: 500.
    :param framework_events: write the step events of ``sampler.step()`` and the PyTorch Lightning / Hugging Face
        callbacks as python-timeline traces (StepOutlier, MaxInitializationTime, OverallFrameworkMetrics read them).
        Default: True.
    :param on_hang: what the sampler does when no step or phase (``sampler.step()``, ``sampler.phase()``,
        ``sampler.wrap(loader)``, the callbacks) progresses on its host for ``hang_minutes``: ``HangAction.LOG`` writes
        a line to the job's log; ``HangAction.EXIT`` also ends the training with a non-zero status (see
        docs/health-rules.md for retries and checkpoints). Nothing is judged before the first step. Default:
        ``HangAction.LOG``.
    :param hang_minutes: minutes without progress before ``on_hang`` applies; the sampler waits at least twice the
        longest pause it has seen between steps (a checkpoint save), so set it above your first checkpoint's save
        time. Default: 10.
    """

    interval_millis: int = contract.DEFAULT_INTERVAL_MS
    framework_events: bool = True
    on_hang: HangAction = HangAction.LOG
    hang_minutes: float = contract.DEFAULT_HANG_MINUTES

    def __post_init__(self) -> None:
        if isinstance(self.interval_millis, bool) or not isinstance(self.interval_millis, int):
            raise ConfigurationTypeError(
                f"expected whole milliseconds, one of {', '.join(map(str, contract.INTERVALS_MS))}; got "
                f"{self.interval_millis!r}.", where="Sampler", field="interval_millis", value=self.interval_millis)
        if self.interval_millis not in contract.INTERVALS_MS:
            raise ConfigurationError(
                f"must be one of {', '.join(map(str, contract.INTERVALS_MS))} (the intervals the profiler rules are "
                f"defined for), got {self.interval_millis}.", where="Sampler", field="interval_millis",
                value=self.interval_millis)
        if not isinstance(self.on_hang, HangAction):
            raise ConfigurationTypeError(
                f"expected HangAction.LOG or HangAction.EXIT, got {self.on_hang!r}.", where="Sampler", field="on_hang",
                value=self.on_hang)
        minutes = self.hang_minutes
        if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not math.isfinite(minutes) \
                or not 0 < minutes <= 10080:
            raise ConfigurationError(
                f"must be minutes above 0 and at most 10080 (a week), for example 10; got {minutes!r}.",
                where="Sampler", field="hang_minutes", value=minutes)

    def bundle(self, scope: Construct) -> s3_assets.Asset:
        """The sampler bundle as an S3 asset: one per stack, shared by its jobs."""
        stack = scope if isinstance(scope, cdk.Stack) else cdk.Stack.of(scope)
        asset = _ASSETS.get(stack)
        if asset is None:
            asset = _ASSETS[stack] = s3_assets.Asset(stack, "CdkSageMakerSamplerBundle", path=str(_bundle_dir()))
        return asset

    def channel(self, asset: s3_assets.Asset) -> dict[str, Any]:
        """The input channel (request JSON): always File mode, whatever the job's input mode, so the zip is a file."""
        return {
            "ChannelName": SAMPLER_CHANNEL,
            "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": _read(asset, "url"),
                                            "S3DataDistributionType": "FullyReplicated"}},
            "InputMode": "File",
        }

    def environment(self, asset: s3_assets.Asset, profiler_s3_uri: str, user_environment: dict[str, str]
                    ) -> dict[str, str]:
        """The variables the sampler reads, plus PYTHONPATH: the bundle first, then any value the user set (the
        bundle's sitecustomize runs the next sitecustomize on the path, so a user's own still runs)."""
        bundle_path = f"{_CHANNEL_DIR}/{_read(asset, 'hash')}.zip"
        user_path = user_environment.get("PYTHONPATH")
        hang = {} if self.on_hang is HangAction.LOG and self.hang_minutes == contract.DEFAULT_HANG_MINUTES else \
            contract.hang_environment(self.on_hang.value, self.hang_minutes)
        return {
            **contract.environment(profiler_s3_uri, self.interval_millis, self.framework_events),
            **hang,
            "PYTHONPATH": f"{bundle_path}:{user_path}" if user_path else bundle_path,
        }

    @staticmethod
    def notes(user_environment: dict[str, str] | None, entrypoint: Sequence[str] | None
              ) -> list[tuple[str, str, str]]:
        """What synth should say about starting the sampler: ("info" or "warning", id, message).

        * The job's ``Environment`` replaces the image's own variables: with no PYTHONPATH in ``environment=``, an
          image that sets one (``/opt/ml/code``, ``/app``) loses it.
        * ``python -I``, ``-E`` or ``-S`` in the container entrypoint ignore PYTHONPATH (or sitecustomize): that
          interpreter never starts the sampler.
        """
        found = []
        if not (user_environment or {}).get("PYTHONPATH"):
            found.append(("info", "samplerReplacesImagePythonPath", "the sampler bundle is started through PYTHONPATH, and the "
                          "job's environment replaces the image's own: if the image sets PYTHONPATH (for example "
                          "/opt/ml/code or /app), pass that value in environment={'PYTHONPATH': ...}; the bundle is "
                          "put in front of it."))
        flags = _python_flags(entrypoint)
        if flags:
            found.append(("warning", "samplerEntrypointIgnoresPythonPath", f"the container entrypoint runs Python with "
                          f"{' '.join(sorted(flags))}, which ignores PYTHONPATH or sitecustomize: that interpreter "
                          "starts no sampler. Drop the flag, or call sampler.start() at the top of the training script "
                          "(see docs/sampler.md, 'Where PYTHONPATH is not honoured')."))
        return found


def _python_flags(entrypoint: Sequence[str] | None) -> set[str]:
    """-I, -E, -S given to a python interpreter in ``entrypoint`` (also combined, like ``-IS``, or ``-u -E``)."""
    words = [w for w in (entrypoint or ()) if isinstance(w, str) and not cdk.Token.is_unresolved(w)]
    flags: set[str] = set()
    for position, word in enumerate(words):
        if not Path(word).name.startswith("python"):
            continue
        for option in words[position + 1:]:
            if not option.startswith("-") or option in ("-m", "-c"):
                break
            flags |= {f"-{letter}" for letter in option[1:] if letter in "IES"}
    return flags


@functools.cache
def _bundle_dir() -> Path:
    """The bundle's files, laid out once per process (the asset zips and hashes them)."""
    target = Path(tempfile.mkdtemp(prefix="cdk-sagemaker-sampler-")) / "bundle"
    target.mkdir()
    write_bundle(target)
    return target


#: The sampler a job gets unless it says otherwise (compared by identity, so an explicit Sampler() is "asked for").
DEFAULT_SAMPLER = Sampler()
