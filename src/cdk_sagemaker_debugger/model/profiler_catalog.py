"""The built-in profiler rule catalog: names, parameters and defaults exactly as ``smdebug-rulesconfig`` 1.0.1 sends them.

Where the AWS documentation's defaults differ (BatchSize/CPUBottleneck/GPUMemoryIncrease/LoadBalancing patience,
GPUMemoryIncrease increase and window, IOBottleneck gpu_threshold, StepOutlier stddev) the released code wins, because
that is what every SageMaker Python SDK user has been sending.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .parameters import ParameterSpec

__all__ = ["ProfilerRuleSpec", "PROFILER_RULE_SPECS", "PROFILER_REPORT", "OVERRIDABLE_BY_PROFILER_REPORT"]

PROFILER_REPORT = "ProfilerReport"

_SCAN = ParameterSpec("scan_interval_us", 60_000_000, "positive_int", "How often the rule scans the data, in microseconds.")
_PATIENCE = ParameterSpec("patience", 1000, "positive_int", "Data points to skip before the rule starts evaluating.")


@dataclass(frozen=True)
class ProfilerRuleSpec:
    """A built-in profiler rule: what it checks, what data it reads and its parameters in signature order."""

    name: str
    summary: str
    data: str  # "system" or "framework": which profiler output the rule reads
    parameters: tuple[ParameterSpec, ...]
    overridable: bool = True  # can ProfilerReport pass <name>_<parameter> overrides to it?

    @property
    def rule_to_invoke(self) -> str:
        return self.name


_SPECS = (
    ProfilerRuleSpec(
        "BatchSize",
        "Flags GPUs that may be underused because the batch size is too small (low p95 CPU, GPU and GPU memory usage).",
        "system",
        (
            ParameterSpec("cpu_threshold_p95", 70, "percentile", "p95 CPU utilization below which the CPU counts as underused."),
            ParameterSpec("gpu_threshold_p95", 70, "percentile", "p95 GPU utilization below which the GPU counts as underused."),
            ParameterSpec("gpu_memory_threshold_p95", 70, "percentile", "p95 GPU memory utilization below which memory counts as underused."),
            _PATIENCE,
            ParameterSpec("window", 500, "positive_int", "Window size (data points) for the quantiles."),
            _SCAN,
        ),
    ),
    ProfilerRuleSpec(
        "CPUBottleneck",
        "Flags steps where the CPU is busy while the GPU waits for data.",
        "system",
        (
            ParameterSpec("threshold", 50, "percentile", "Percentage of total time with CPU bottlenecks that triggers the rule."),
            ParameterSpec("gpu_threshold", 10, "percentile", "GPU utilization below which the GPU counts as idle."),
            ParameterSpec("cpu_threshold", 90, "percentile", "CPU utilization above which the CPU counts as busy."),
            _PATIENCE,
            _SCAN,
        ),
    ),
    ProfilerRuleSpec(
        "Dataloader",
        "Checks that the number of parallel data loaders suits the CPU cores of the instance.",
        "framework",
        (
            ParameterSpec("min_threshold", 70, "positive_number", "Lower bound, in percent of CPU cores, for data-loader processes."),
            ParameterSpec("max_threshold", 200, "positive_number", "Upper bound, in percent of CPU cores, for data-loader processes."),
            _SCAN,
        ),
    ),
    ProfilerRuleSpec(
        "GPUMemoryIncrease",
        "Flags a large increase of GPU memory usage (possible memory leak or growing batches).",
        "system",
        (
            ParameterSpec("increase", 5, "positive_number", "Relative increase of the moving average, in percent, that triggers the rule."),
            _PATIENCE,
            ParameterSpec("window", 10, "positive_int", "Window size (data points) of the moving average."),
            _SCAN,
        ),
    ),
    ProfilerRuleSpec(
        "IOBottleneck",
        "Flags steps where I/O wait is high while the GPU is idle.",
        "system",
        (
            ParameterSpec("threshold", 50, "percentile", "Percentage of total time with I/O bottlenecks that triggers the rule."),
            ParameterSpec("gpu_threshold", 10, "percentile", "GPU utilization below which the GPU counts as idle."),
            ParameterSpec("io_threshold", 50, "percentile", "I/O wait above which the step counts as I/O bound."),
            _PATIENCE,
            _SCAN,
        ),
    ),
    ProfilerRuleSpec(
        "LoadBalancing",
        "Flags unbalanced workload across the GPUs of a node.",
        "system",
        (
            ParameterSpec("threshold", 0.5, "proportion", "Difference between GPU usage histograms (0..1) that triggers the rule."),
            _PATIENCE,
            _SCAN,
        ),
    ),
    ProfilerRuleSpec(
        "LowGPUUtilization",
        "Flags GPUs with low or fluctuating utilization.",
        "system",
        (
            ParameterSpec("threshold_p95", 70, "percentile", "p95 GPU utilization below which the GPU counts as underused."),
            ParameterSpec("threshold_p5", 10, "percentile", "p5 GPU utilization below which utilization counts as fluctuating."),
            ParameterSpec("window", 500, "positive_int", "Window size (data points) for the quantiles."),
            _PATIENCE,
            _SCAN,
        ),
    ),
    ProfilerRuleSpec(
        "MaxInitializationTime",
        "Flags a training initialization that takes too long before the first step.",
        "framework",
        (
            ParameterSpec("threshold", 20, "positive_number", "Initialization time, in minutes, that triggers the rule."),
            _SCAN,
        ),
    ),
    ProfilerRuleSpec(
        "OverallFrameworkMetrics",
        "Summarizes time spent in framework phases (forward, backward, data loading); never triggers.",
        "framework",
        (_SCAN,),
        overridable=False,
    ),
    ProfilerRuleSpec(
        "OverallSystemUsage",
        "Summarizes system usage per node (CPU, GPU, memory, I/O, network); never triggers.",
        "system",
        (_SCAN,),
    ),
    ProfilerRuleSpec(
        "StepOutlier",
        "Flags steps whose duration is an outlier (more than stddev standard deviations above the mean).",
        "framework",
        (
            ParameterSpec("stddev", 3, "positive_number", "Standard deviations above the mean that make a step an outlier."),
            ParameterSpec(
                "mode", None, "choice", "Only steps of this mode (TRAIN, EVAL, ...); None means every mode.",
                choices=("TRAIN", "EVAL", "PREDICT", "GLOBAL"),
            ),
            ParameterSpec("n_outliers", 10, "positive_int", "Outliers to ignore before the rule triggers."),
            _SCAN,
        ),
    ),
)

#: Built-in standalone profiler rules by name (ProfilerReport is separate: it takes overrides, not parameters).
PROFILER_RULE_SPECS: Mapping[str, ProfilerRuleSpec] = MappingProxyType({s.name: s for s in _SPECS})

#: Rules whose parameters ProfilerReport accepts as ``<RuleName>_<parameter>`` (the released rule config's list of 10).
OVERRIDABLE_BY_PROFILER_REPORT: Mapping[str, ProfilerRuleSpec] = MappingProxyType(
    {s.name: s for s in _SPECS if s.overridable}
)


def catalog_markdown() -> str:
    """The README's rule catalog table, generated from the catalog (a test keeps the README in sync)."""
    lines = [
        "| Rule | Reads | Parameters (default) | What it checks |",
        "|---|---|---|---|",
        "| `ProfilerReport` | both | `<Rule>_<parameter>` overrides for the rules below (except OverallFrameworkMetrics) "
        "| Runs every built-in rule and writes the profiler report. |",
    ]
    for spec in PROFILER_RULE_SPECS.values():
        params = ", ".join(f"`{p.name}`={p.default!r}" for p in spec.parameters)
        lines.append(f"| `{spec.name}` | {spec.data} | {params} | {spec.summary} |")
    return "\n".join(lines)
