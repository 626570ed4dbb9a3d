"""ProfilerConfig and (deprecated) framework profiling, rendered in the exact format the SageMaker service receives.

Framework profiling values are Python-dict-like strings with a trailing ``", "`` before ``}`` (not JSON), which is what
the SageMaker Python SDK sends and the profiler in the training container parses.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, ClassVar

from .errors import ConfigurationError, ConfigurationTypeError, did_you_mean
from .frameworks import FrameworkInfo
from .parameters import is_token

__all__ = [
    "ALLOWED_INTERVALS_MS",
    "DEFAULT_FRAMEWORK_PROFILER_PATH",
    "ProfilerConfig",
    "FrameworkProfile",
    "DetailedProfilingConfig",
    "DataloaderProfilingConfig",
    "PythonProfilingConfig",
    "HorovodProfilingConfig",
    "SMDataParallelProfilingConfig",
    "framework_profiling_deprecation",
]

ALLOWED_INTERVALS_MS = (100, 200, 500, 1000, 5000, 60000)
DEFAULT_FRAMEWORK_PROFILER_PATH = "/opt/ml/output/profiler"
_S3_URI = re.compile(r"(https|s3)://([^/]+)/?(.*)")


def _fmt(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value)


def _dict_string(pairs: list[tuple[str, Any]]) -> str:
    return "{" + "".join(f'"{key}": {_fmt(value)}, ' for key, value in pairs) + "}"


def _int(value: Any, field: str, where: str, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationTypeError(f"expected an integer, got {type(value).__name__} {value!r}.", where=where, field=field, value=value)
    if value < minimum:
        raise ConfigurationError(f"must be >= {minimum}, got {value}.", where=where, field=field, value=value)


def _positive_number(value: Any, field: str, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationTypeError(f"expected a number, got {type(value).__name__} {value!r}.", where=where, field=field, value=value)
    if value <= 0:
        raise ConfigurationError(f"must be greater than 0, got {value}.", where=where, field=field, value=value)


class _MetricsConfig:
    """Shared step-or-time range of the framework profiling configs."""

    key: ClassVar[str]
    default_start_step: ClassVar[int]
    default_num_steps: ClassVar[int] = 1

    def __init__(
        self,
        *,
        start_step: int | None = None,
        num_steps: int | None = None,
        start_unix_time: int | None = None,
        duration: float | None = None,
    ) -> None:
        where = type(self).__name__
        steps = start_step is not None or num_steps is not None
        times = start_unix_time is not None or duration is not None
        if steps and times:
            raise ConfigurationError(
                "give either a step range (start_step/num_steps) or a time range (start_unix_time/duration), not both.",
                where=where,
                field="start_step",
            )
        if start_step is not None:
            _int(start_step, "start_step", where, minimum=0)
        if num_steps is not None:
            _int(num_steps, "num_steps", where, minimum=1)
        if start_unix_time is not None:
            _int(start_unix_time, "start_unix_time", where, minimum=0)
            try:
                datetime.fromtimestamp(start_unix_time, tz=timezone.utc)
            except (OverflowError, OSError, ValueError) as error:
                raise ConfigurationError(
                    f"{start_unix_time} is not a valid Unix time in seconds.", where=where, field="start_unix_time"
                ) from error
        if duration is not None:
            _positive_number(duration, "duration", where)
        self.profile_default_steps = not (steps or times)
        self.start_step = start_step
        self.num_steps = num_steps
        self.start_unix_time = start_unix_time
        self.duration = duration

    def _range_pairs(self) -> list[tuple[str, Any]]:
        if self.profile_default_steps:
            return [("StartStep", self.default_start_step), ("NumSteps", self.default_num_steps)]
        if self.start_step is not None or self.num_steps is not None:
            return [
                ("StartStep", self.start_step if self.start_step is not None else 0),
                ("NumSteps", self.num_steps if self.num_steps is not None else 1),
            ]
        pairs: list[tuple[str, Any]] = []
        if self.start_unix_time is not None:
            pairs.append(("StartTimeInSecSinceEpoch", self.start_unix_time))
        if self.duration is not None:
            pairs.append(("Duration", self.duration))
        return pairs

    def _extra_pairs(self) -> list[tuple[str, Any]]:
        return []

    def render(self) -> str:
        return _dict_string(self._range_pairs() + self._extra_pairs())


class DetailedProfilingConfig(_MetricsConfig):
    """Detailed framework operator profiling (default: step 5, one step)."""

    key = "DetailedProfilingConfig"
    default_start_step = 5


class DataloaderProfilingConfig(_MetricsConfig):
    """Data loader profiling (default: step 7, one step, every metric)."""

    key = "DataloaderProfilingConfig"
    default_start_step = 7

    def __init__(self, *, metrics_regex: str = ".*", **range_: Any) -> None:
        super().__init__(**range_)
        if not isinstance(metrics_regex, str):
            raise ConfigurationTypeError("expected a regular expression string.", where=type(self).__name__, field="metrics_regex")
        try:
            re.compile(metrics_regex)
        except re.error as error:
            raise ConfigurationError(
                f"{metrics_regex!r} is not a valid regular expression ({error}).",
                where=type(self).__name__,
                field="metrics_regex",
                value=metrics_regex,
            ) from error
        self.metrics_regex = metrics_regex

    def _extra_pairs(self) -> list[tuple[str, Any]]:
        return [("MetricsRegex", self.metrics_regex)]


class PythonProfilingConfig(_MetricsConfig):
    """Python profiling with cProfile or pyinstrument (default: step 9, three steps)."""

    key = "PythonProfilingConfig"
    default_start_step = 9
    default_num_steps = 3
    PROFILERS = ("cprofile", "pyinstrument")
    TIMERS = ("total_time", "cpu_time", "off_cpu_time", "default")

    def __init__(self, *, python_profiler: str = "cprofile", cprofile_timer: str | None = None, **range_: Any) -> None:
        super().__init__(**range_)
        where = type(self).__name__
        if python_profiler not in self.PROFILERS:
            raise ConfigurationError(
                f"must be one of {self.PROFILERS}, got {python_profiler!r}.{did_you_mean(str(python_profiler), self.PROFILERS)}",
                where=where,
                field="python_profiler",
                value=python_profiler,
            )
        if cprofile_timer is not None and cprofile_timer not in self.TIMERS:
            raise ConfigurationError(
                f"must be one of {self.TIMERS}, got {cprofile_timer!r}.{did_you_mean(str(cprofile_timer), self.TIMERS)}",
                where=where,
                field="cprofile_timer",
                value=cprofile_timer,
            )
        self.python_profiler = python_profiler
        self.cprofile_timer = cprofile_timer

    def _extra_pairs(self) -> list[tuple[str, Any]]:
        pairs: list[tuple[str, Any]] = [("ProfilerName", self.python_profiler)]
        if self.python_profiler == "cprofile":
            timer = self.cprofile_timer or ("default" if self.profile_default_steps else "total_time")
            pairs.append(("cProfileTimer", timer))
        return pairs


class HorovodProfilingConfig(_MetricsConfig):
    """Horovod timeline profiling (default: step 13, one step)."""

    key = "HorovodProfilingConfig"
    default_start_step = 13


class SMDataParallelProfilingConfig(_MetricsConfig):
    """SageMaker distributed data parallel profiling (default: step 15, one step)."""

    key = "SMDataParallelProfilingConfig"
    default_start_step = 15


_CONFIG_CLASSES: tuple[type[_MetricsConfig], ...] = (
    DetailedProfilingConfig,
    DataloaderProfilingConfig,
    PythonProfilingConfig,
    HorovodProfilingConfig,
    SMDataParallelProfilingConfig,
)


class FrameworkProfile:
    """Framework profiling (deprecated by AWS from PyTorch 2.0 and TensorFlow 2.11; system monitoring is unaffected).

    With no per-config objects and no range, all five profilers run at their default steps; with a range
    (``start_step``/``num_steps`` or ``start_unix_time``/``duration``) all five use that range; with config objects, only
    those run.
    """

    def __init__(
        self,
        *,
        local_path: str = DEFAULT_FRAMEWORK_PROFILER_PATH,
        file_max_size: int = 10485760,
        file_close_interval: float = 60,
        file_open_fail_threshold: int = 50,
        detailed_profiling_config: DetailedProfilingConfig | None = None,
        dataloader_profiling_config: DataloaderProfilingConfig | None = None,
        python_profiling_config: PythonProfilingConfig | None = None,
        horovod_profiling_config: HorovodProfilingConfig | None = None,
        smdataparallel_profiling_config: SMDataParallelProfilingConfig | None = None,
        start_step: int | None = None,
        num_steps: int | None = None,
        start_unix_time: int | None = None,
        duration: float | None = None,
    ) -> None:
        where = "FrameworkProfile"
        if not isinstance(local_path, str) or not local_path:
            raise ConfigurationTypeError("expected a non-empty path string.", where=where, field="local_path", value=local_path)
        _int(file_max_size, "file_max_size", where, minimum=1)
        _positive_number(file_close_interval, "file_close_interval", where)
        _int(file_open_fail_threshold, "file_open_fail_threshold", where, minimum=1)
        self.local_path = local_path
        self.file_max_size = file_max_size
        self.file_close_interval = file_close_interval
        self.file_open_fail_threshold = file_open_fail_threshold
        given = {
            DetailedProfilingConfig: detailed_profiling_config,
            DataloaderProfilingConfig: dataloader_profiling_config,
            PythonProfilingConfig: python_profiling_config,
            HorovodProfilingConfig: horovod_profiling_config,
            SMDataParallelProfilingConfig: smdataparallel_profiling_config,
        }
        for cls, config in given.items():
            if config is not None and not isinstance(config, cls):
                raise ConfigurationTypeError(
                    f"expected a {cls.__name__}, got {type(config).__name__}.",
                    where=where,
                    field=f"{cls.key[0].lower()}{cls.key[1:]}",
                )
        if any(given.values()):
            self.configs: list[_MetricsConfig] = [c for c in given.values() if c is not None]
        else:
            range_ = {"start_step": start_step, "num_steps": num_steps, "start_unix_time": start_unix_time, "duration": duration}
            range_ = {k: v for k, v in range_.items() if v is not None}
            self.configs = [cls(**range_) for cls in _CONFIG_CLASSES]

    @property
    def profiles_collectives(self) -> bool:
        """True when Horovod or SMDDP collective operations are profiled (Debugger does not collect them)."""
        return any(isinstance(c, (HorovodProfilingConfig, SMDataParallelProfilingConfig)) for c in self.configs)

    def to_profiling_parameters(self) -> dict[str, str]:
        params = {
            "LocalPath": self.local_path,
            "RotateMaxFileSizeInBytes": str(self.file_max_size),
            "RotateFileCloseIntervalInSeconds": str(self.file_close_interval),
            "FileOpenFailThreshold": str(self.file_open_fail_threshold),
        }
        for config in self.configs:
            params[config.key] = config.render()
        return params


@dataclass(frozen=True)
class ProfilerConfig:
    """Profiler settings of a training job.

    ``s3_output_path`` defaults to the job's output location. ``profiling_interval_millis`` is the system monitoring
    interval, one of 100, 200, 500, 1000, 5000 or 60000 (the service default is 500). ``disable_profiler=True`` turns
    system monitoring off; profiler rules then cannot run.
    """

    s3_output_path: str | None = None
    profiling_interval_millis: int | None = None
    framework_profile: FrameworkProfile | None = None
    disable_profiler: bool = False

    def __post_init__(self) -> None:
        where = "ProfilerConfig"
        if not isinstance(self.disable_profiler, bool):
            raise ConfigurationTypeError(
                f"expected True or False, got {self.disable_profiler!r}.", where=where, field="disable_profiler"
            )
        interval = self.profiling_interval_millis
        if interval is not None and not is_token(interval):
            if isinstance(interval, bool) or not isinstance(interval, int):
                raise ConfigurationTypeError(
                    f"expected an integer number of milliseconds, got {type(interval).__name__} {interval!r}.",
                    where=where,
                    field="profiling_interval_millis",
                    value=interval,
                )
            if interval not in ALLOWED_INTERVALS_MS:
                closest = min(ALLOWED_INTERVALS_MS, key=lambda allowed: abs(allowed - interval))
                raise ConfigurationError(
                    f"must be one of {', '.join(map(str, ALLOWED_INTERVALS_MS))} milliseconds, got {interval}. "
                    f"Did you mean {closest}?",
                    where=where,
                    field="profiling_interval_millis",
                    value=interval,
                )
        path = self.s3_output_path
        if path is not None and not is_token(path) and (not isinstance(path, str) or not _S3_URI.fullmatch(path)):
            raise ConfigurationError(
                f"must be an S3 URI like 's3://bucket/prefix', got {path!r}.", where=where, field="s3_output_path", value=path
            )
        if self.framework_profile is not None and not isinstance(self.framework_profile, FrameworkProfile):
            raise ConfigurationTypeError(
                f"expected a FrameworkProfile, got {type(self.framework_profile).__name__}.",
                where=where,
                field="framework_profile",
            )
        if self.disable_profiler and (self.framework_profile is not None or interval is not None):
            raise ConfigurationError(
                "disable_profiler=True turns the profiler off, so profiling_interval_millis and framework_profile have "
                "no effect. Remove them or set disable_profiler=False.",
                where=where,
                field="disable_profiler",
            )

    def to_request(self, default_s3_output_path: str | None) -> dict[str, Any]:
        """The ProfilerConfig member of CreateTrainingJob."""
        request: dict[str, Any] = {}
        if not self.disable_profiler:
            path = self.s3_output_path or default_s3_output_path
            if path:
                request["S3OutputPath"] = path
        request["DisableProfiler"] = self.disable_profiler
        if self.profiling_interval_millis is not None:
            request["ProfilingIntervalInMilliseconds"] = self.profiling_interval_millis
        if self.framework_profile is not None:
            request["ProfilingParameters"] = self.framework_profile.to_profiling_parameters()
        return request


def framework_profiling_deprecation(framework: FrameworkInfo | None) -> str | None:
    """The warning to show when framework profiling is configured for a framework version where AWS deprecated it."""
    if framework is None:
        return None
    if (framework.name == "pytorch" and framework.at_least(2, 0)) or (
        framework.name == "tensorflow" and framework.at_least(2, 11)
    ):
        return (
            f"Framework profiling is deprecated from {framework.name} {'2.0' if framework.name == 'pytorch' else '2.11'} "
            f"and the training image is {framework.name} {framework.version_string}: no framework metrics (step times, "
            "data loader, Python profiles) will be collected, so StepOutlier, Dataloader and MaxInitializationTime will have "
            "no data. System monitoring still works. Remove framework_profile, or use a PyTorch < 2.0 / TensorFlow < 2.11 image."
        )
    return None
