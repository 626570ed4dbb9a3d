"""The built-in profiler rule catalog: names, parameters and defaults exactly as ``smdebug-rulesconfig`` 1.0.1 sends them.

Where the AWS documentation's defaults differ (BatchSize/CPUBottleneck/GPUMemoryIncrease/LoadBalancing patience,
GPUMemoryIncrease increase and window, IOBottleneck gpu_threshold, StepOutlier stddev) the released code wins, because
that is what every SageMaker Python SDK user has been sending.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .parameters import Param

__all__ = ["ProfilerRuleSpec", "PROFILER_RULE_SPECS", "PROFILER_REPORT", "OVERRIDABLE_BY_PROFILER_REPORT", "SCAN_INTERVAL"]

PROFILER_REPORT = "ProfilerReport"

#: Every profiler and training-health rule has it: the length of the analysis window.
SCAN_INTERVAL = Param.integer("scan_interval_us", 60_000_000, "How often the rule scans the data, in microseconds.")
_PATIENCE = Param.integer("patience", 1000, "Data points to skip before the rule starts evaluating.")


@dataclass(frozen=True)
class ProfilerRuleSpec:
    """A built-in profiler rule: what it checks, what data it reads and its parameters in signature order."""

    name: str
    summary: str
    data: str  # "system" or "framework": which profiler output the rule reads
    parameters: tuple[Param, ...]
    overridable: bool = True  # can ProfilerReport pass <name>_<parameter> overrides to it?
    #: (lower, higher) parameter pairs that must be ordered when either is given (``check_order``).
    ordered: tuple[tuple[str, str], ...] = ()

    @property
    def rule_to_invoke(self) -> str:
        return self.name


_SPECS = (
    ProfilerRuleSpec(
        "BatchSize",
        "Flags GPUs that may be underused because the batch size is too small (low p95 CPU, GPU and GPU memory usage).",
        "system",
        (
            Param.percent("cpu_threshold_p95", 70, "p95 CPU utilization below which the CPU counts as underused."),
            Param.percent("gpu_threshold_p95", 70, "p95 GPU utilization below which the GPU counts as underused."),
            Param.percent("gpu_memory_threshold_p95", 70, "p95 GPU memory utilization below which memory counts as underused."),
            _PATIENCE,
            Param.integer("window", 500, "Window size (data points) for the quantiles."),
            SCAN_INTERVAL,
        ),
    ),
    ProfilerRuleSpec(
        "CPUBottleneck",
        "Flags steps where the CPU is busy while the GPU waits for data.",
        "system",
        (
            Param.percent("threshold", 50, "Percentage of total time with CPU bottlenecks that triggers the rule."),
            Param.percent("gpu_threshold", 10, "GPU utilization below which the GPU counts as idle."),
            Param.percent("cpu_threshold", 90, "CPU utilization above which the CPU counts as busy."),
            _PATIENCE,
            SCAN_INTERVAL,
        ),
    ),
    ProfilerRuleSpec(
        "Dataloader",
        "Checks that the number of parallel data loaders suits the CPU cores of the instance.",
        "framework",
        (
            Param.number("min_threshold", 70, "Lower bound, in percent of CPU cores, for data-loader processes.", above=0),
            Param.number("max_threshold", 200, "Upper bound, in percent of CPU cores, for data-loader processes.", above=0),
            SCAN_INTERVAL,
        ),
        ordered=(("min_threshold", "max_threshold"),),
    ),
    ProfilerRuleSpec(
        "GPUMemoryIncrease",
        "Flags a large increase of GPU memory usage (possible memory leak or growing batches).",
        "system",
        (
            Param.number("increase", 5, "Relative increase of the moving average, in percent, that triggers the rule.", above=0),
            _PATIENCE,
            Param.integer("window", 10, "Window size (data points) of the moving average."),
            SCAN_INTERVAL,
        ),
    ),
    ProfilerRuleSpec(
        "IOBottleneck",
        "Flags steps where I/O wait is high while the GPU is idle.",
        "system",
        (
            Param.percent("threshold", 50, "Percentage of total time with I/O bottlenecks that triggers the rule."),
            Param.percent("gpu_threshold", 10, "GPU utilization below which the GPU counts as idle."),
            Param.percent("io_threshold", 50, "I/O wait above which the step counts as I/O bound."),
            _PATIENCE,
            SCAN_INTERVAL,
        ),
    ),
    ProfilerRuleSpec(
        "LoadBalancing",
        "Flags unbalanced workload across the GPUs of a node.",
        "system",
        (
            Param.proportion("threshold", 0.5, "Difference between GPU usage histograms (0..1) that triggers the rule."),
            _PATIENCE,
            SCAN_INTERVAL,
        ),
    ),
    ProfilerRuleSpec(
        "LowGPUUtilization",
        "Flags GPUs with low or fluctuating utilization.",
        "system",
        (
            Param.percent("threshold_p95", 70, "p95 GPU utilization below which the GPU counts as underused."),
            Param.percent("threshold_p5", 10, "p5 GPU utilization below which utilization counts as fluctuating."),
            Param.integer("window", 500, "Window size (data points) for the quantiles."),
            _PATIENCE,
            SCAN_INTERVAL,
        ),
    ),
    ProfilerRuleSpec(
        "MaxInitializationTime",
        "Flags a training initialization that takes too long before the first step.",
        "framework",
        (
            Param.number("threshold", 20, "Initialization time, in minutes, that triggers the rule.", above=0),
            SCAN_INTERVAL,
        ),
    ),
    ProfilerRuleSpec(
        "OverallFrameworkMetrics",
        "Summarizes time spent in framework phases (forward, backward, data loading); never triggers.",
        "framework",
        (SCAN_INTERVAL,),
        overridable=False,
    ),
    ProfilerRuleSpec(
        "OverallSystemUsage",
        "Summarizes system usage per node (CPU, GPU, memory, I/O, network); never triggers.",
        "system",
        (SCAN_INTERVAL,),
    ),
    ProfilerRuleSpec(
        "StepOutlier",
        "Flags steps whose duration is an outlier (more than stddev standard deviations above the mean).",
        "framework",
        (
            Param.number("stddev", 3, "Standard deviations above the mean that make a step an outlier.", above=0),
            Param.choice("mode", None, "Only steps of this mode (TRAIN, EVAL, ...); None means every mode.", ("TRAIN", "EVAL", "PREDICT", "GLOBAL")),
            Param.integer("n_outliers", 10, "Outliers to ignore before the rule triggers."),
            SCAN_INTERVAL,
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
