"""Type stubs for the profiler rule classes generated from the catalog (written by tools/generate_stubs.py)."""

from typing import Any

from .model.rules.health import HealthRule as HealthRule
from .model.rules.metric import MetricRule as MetricRule
from .model.rules.profiler import BuiltinProfilerRule as BuiltinProfilerRule
from .model.rules.profiler import CustomProfilerRule as CustomProfilerRule
from .model.rules.profiler import ProfilerReport as ProfilerReport
from .model.rules.profiler import ProfilerRule as ProfilerRule

def from_name(rule_name: str, **parameters: Any) -> ProfilerRule: ...

class BatchSize(BuiltinProfilerRule):
    """Flags GPUs that may be underused because the batch size is too small (low p95 CPU, GPU and GPU memory usage)."""

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        cpu_threshold_p95: float = 70,
        gpu_threshold_p95: float = 70,
        gpu_memory_threshold_p95: float = 70,
        patience: int = 1000,
        window: int = 500,
        scan_interval_us: int = 60000000,
    ) -> None: ...

class CPUBottleneck(BuiltinProfilerRule):
    """Flags steps where the CPU is busy while the GPU waits for data."""

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        threshold: float = 50,
        gpu_threshold: float = 10,
        cpu_threshold: float = 90,
        patience: int = 1000,
        scan_interval_us: int = 60000000,
    ) -> None: ...

class Dataloader(BuiltinProfilerRule):
    """Checks that the number of parallel data loaders suits the CPU cores of the instance."""

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        min_threshold: float = 70,
        max_threshold: float = 200,
        scan_interval_us: int = 60000000,
    ) -> None: ...

class GPUMemoryIncrease(BuiltinProfilerRule):
    """Flags a large increase of GPU memory usage (possible memory leak or growing batches)."""

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        increase: float = 5,
        patience: int = 1000,
        window: int = 10,
        scan_interval_us: int = 60000000,
    ) -> None: ...

class IOBottleneck(BuiltinProfilerRule):
    """Flags steps where I/O wait is high while the GPU is idle."""

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        threshold: float = 50,
        gpu_threshold: float = 10,
        io_threshold: float = 50,
        patience: int = 1000,
        scan_interval_us: int = 60000000,
    ) -> None: ...

class LoadBalancing(BuiltinProfilerRule):
    """Flags unbalanced workload across the GPUs of a node."""

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        threshold: float = 0.5,
        patience: int = 1000,
        scan_interval_us: int = 60000000,
    ) -> None: ...

class LowGPUUtilization(BuiltinProfilerRule):
    """Flags GPUs with low or fluctuating utilization."""

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        threshold_p95: float = 70,
        threshold_p5: float = 10,
        window: int = 500,
        patience: int = 1000,
        scan_interval_us: int = 60000000,
    ) -> None: ...

class MaxInitializationTime(BuiltinProfilerRule):
    """Flags a training initialization that takes too long before the first step."""

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        threshold: float = 20,
        scan_interval_us: int = 60000000,
    ) -> None: ...

class OverallFrameworkMetrics(BuiltinProfilerRule):
    """Summarizes time spent in framework phases (forward, backward, data loading); never triggers."""

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        scan_interval_us: int = 60000000,
    ) -> None: ...

class OverallSystemUsage(BuiltinProfilerRule):
    """Summarizes system usage per node (CPU, GPU, memory, I/O, network); never triggers."""

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        scan_interval_us: int = 60000000,
    ) -> None: ...

class StepOutlier(BuiltinProfilerRule):
    """Flags steps whose duration is an outlier (more than stddev standard deviations above the mean)."""

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        stddev: float = 3,
        mode: str | None = None,
        n_outliers: int = 10,
        scan_interval_us: int = 60000000,
    ) -> None: ...

class TrainingHang(HealthRule):
    """Flags a rank without step or phase progress for `minutes` while the job's nodes still write samples (a hang), names the ranks that stopped first and the GPU signature; also flags nodes that stop writing samples."""

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        minutes: float = 10,
        pause_factor: float = 2,
        silent_minutes: float = 5,
        low_power_percent: float = 40,
        scan_interval_us: int = 60000000,
    ) -> None: ...

class Straggler(HealthRule):
    """Flags a rank whose data wait + forward pass takes `threshold` times the fastest rank's, or a GPU whose SM clock is `clock_drop` below the fastest; names the node, rank and GPU."""

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        threshold: float = 1.5,
        min_delay_ms: float = 5,
        min_events: int = 5,
        clock_drop: float = 0.15,
        patience: int = 1,
        scan_interval_us: int = 60000000,
    ) -> None: ...

class GPUHealth(HealthRule):
    """Flags GPUs that throttle (thermal, hardware slowdown, power brake), report XID errors, uncorrectable ECC errors or remapped rows, or run too hot; names the node and GPU."""

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        throttle_percent: float = 10,
        max_temperature: float = 90,
        ignore_xids: object = '',
        scan_interval_us: int = 60000000,
    ) -> None: ...

class DataWait(HealthRule):
    """Flags a rank that spends more than `threshold` % of its time blocked waiting for the next batch."""

    def __init__(
        self,
        *,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        threshold: float = 25,
        min_batches: int = 10,
        scan_interval_us: int = 60000000,
    ) -> None: ...

class LossNotDecreasing(MetricRule):
    """Fires when the metric does not fall by diff_percent over num_steps datapoints, or rises more than increase_threshold_percent above its lowest value."""

    def __init__(
        self,
        *,
        metric: str,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        num_steps: int = 10,
        diff_percent: float = 0.1,
        increase_threshold_percent: float = 5,
    ) -> None: ...

class Overfit(MetricRule):
    """Fires when (validation - training) / training exceeds ratio_threshold for more than patience consecutive validation datapoints."""

    def __init__(
        self,
        *,
        train_metric: str,
        validation_metric: str,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        start_step: int = 0,
        patience: int = 1,
        ratio_threshold: float = 0.1,
    ) -> None: ...

class StalledTraining(MetricRule):
    """Fires when the metric gets no new datapoint for threshold seconds while the job trains."""

    def __init__(
        self,
        *,
        metric: str,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        threshold: int = 1800,
        threshold_minutes: float | None = None,
    ) -> None: ...

class Overtraining(MetricRule):
    """Fires when the validation metric makes no new optimum (by delta) for patience_validation datapoints while the training metric made one within its last patience_train datapoints."""

    def __init__(
        self,
        *,
        train_metric: str,
        validation_metric: str,
        name: str | None = None,
        local_path: str | None = None,
        s3_output_path: str | None = None,
        patience_train: int = 5,
        patience_validation: int = 10,
        delta: float = 0.01,
    ) -> None: ...
