"""One measurement: which hosts of the family are training, and the lowest per-GPU utilisation among them."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from .contract_shared import (
    DEFAULT_NAMESPACE,
    GPU_WATCH_DIMENSION,
    LOWEST_GPU_UTILIZATION_METRIC,
    TRAINING_HOSTS_METRIC,
    GpuWatchEnvironment,
)

NAMESPACE = "/aws/sagemaker/TrainingJobs"
#: SageMaker publishes one value per host and minute, a few minutes late: the newest value of this window counts.
LOOKBACK = timedelta(minutes=5)
MAX_QUERIES = 500  # GetMetricData limit per request


class SettingsError(ValueError):
    """The function's environment is incomplete (a deployment problem, not a data problem)."""


@dataclass(frozen=True)
class Settings:
    job_name_prefix: str
    gpus_per_host: int
    namespace: str = DEFAULT_NAMESPACE
    #: Only jobs running as one of these roles count (a job that merely borrows the prefix cannot raise or hide the
    #: alarm); empty: the family has no known role.
    execution_role_arns: tuple[str, ...] = ()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Settings:
        names = GpuWatchEnvironment
        prefix = environ.get(names.JOB_NAME_PREFIX, "")
        if not prefix:
            raise SettingsError(f"{names.JOB_NAME_PREFIX} must name the job family's prefix")
        raw = environ.get(names.GPUS_PER_HOST, "")
        if not raw.isdigit() or int(raw) < 1:
            raise SettingsError(f"{names.GPUS_PER_HOST} must be a whole number of GPUs (1 or more), got {raw!r}")
        roles_raw = environ.get(names.EXECUTION_ROLE_ARNS) or "[]"
        try:
            roles = json.loads(roles_raw)
        except json.JSONDecodeError as error:
            raise SettingsError(f"{names.EXECUTION_ROLE_ARNS} must be a JSON list of role ARNs: {error}") from error
        if not isinstance(roles, list) or not all(isinstance(r, str) and r for r in roles):
            raise SettingsError(f"{names.EXECUTION_ROLE_ARNS} must be a JSON list of role ARNs, got {roles_raw[:200]!r}")
        return cls(prefix, int(raw), environ.get(names.METRIC_NAMESPACE) or DEFAULT_NAMESPACE, tuple(roles))


@dataclass(frozen=True)
class Measurement:
    #: host ("<job>/algo-<n>") -> percent per GPU, for the training hosts that reported in the lookback window
    per_gpu: dict[str, float]

    @property
    def lowest(self) -> tuple[str, float] | None:
        return min(self.per_gpu.items(), key=lambda item: item[1]) if self.per_gpu else None


def training_jobs(sagemaker: Any, prefix: str) -> Iterator[str]:
    """Names of the InProgress jobs of the family (ListTrainingJobs matches a substring; the prefix is checked here)."""
    kwargs: dict[str, Any] = {"StatusEquals": "InProgress", "NameContains": prefix.rstrip("-") or prefix,
                              "MaxResults": 100}
    while True:
        page = sagemaker.list_training_jobs(**kwargs)
        for summary in page.get("TrainingJobSummaries", []):
            if summary["TrainingJobName"].lower().startswith(prefix.lower()):
                yield summary["TrainingJobName"]
        if not page.get("NextToken"):
            return
        kwargs["NextToken"] = page["NextToken"]


def training_hosts(sagemaker: Any, job: str, execution_role_arns: tuple[str, ...] = ()) -> list[str]:
    """The job's hosts while it is in secondary status Training (downloading or starting GPUs are not "low"), and
    only when it runs as one of ``execution_role_arns`` (when given)."""
    description = sagemaker.describe_training_job(TrainingJobName=job)
    if description.get("SecondaryStatus") != "Training":
        return []
    if execution_role_arns and description.get("RoleArn") not in execution_role_arns:
        return []
    resources = description.get("ResourceConfig", {})
    count = resources.get("InstanceCount") or sum(g.get("InstanceCount", 0) for g in resources.get("InstanceGroups", []))
    return [f"{job}/algo-{n}" for n in range(1, max(count, 1) + 1)]


def latest_gpu_utilization(cloudwatch: Any, hosts: list[str], now: datetime) -> dict[str, float]:
    """The newest one-minute GPUUtilization average of each host (summed over its GPUs), if any in the window."""
    latest: dict[str, float] = {}
    for offset in range(0, len(hosts), MAX_QUERIES):
        batch = hosts[offset : offset + MAX_QUERIES]
        queries = [{"Id": f"h{i}", "ReturnData": True, "MetricStat": {
            "Metric": {"Namespace": NAMESPACE, "MetricName": "GPUUtilization",
                       "Dimensions": [{"Name": "Host", "Value": host}]},
            "Period": 60, "Stat": "Average"}} for i, host in enumerate(batch)]
        kwargs: dict[str, Any] = {"MetricDataQueries": queries, "StartTime": now - LOOKBACK, "EndTime": now,
                                  "ScanBy": "TimestampDescending"}
        while True:
            page = cloudwatch.get_metric_data(**kwargs)
            for result in page.get("MetricDataResults", []):
                host = batch[int(result["Id"][1:])]
                if result.get("Values") and host not in latest:
                    latest[host] = float(result["Values"][0])  # newest first
            if not page.get("NextToken"):
                break
            kwargs["NextToken"] = page["NextToken"]
    return latest


def measure(settings: Settings, sagemaker: Any, cloudwatch: Any, now: datetime | None = None) -> Measurement:
    now = now or datetime.now(timezone.utc)
    jobs = list(training_jobs(sagemaker, settings.job_name_prefix))
    hosts = [host for job in jobs for host in training_hosts(sagemaker, job, settings.execution_role_arns)]
    summed = latest_gpu_utilization(cloudwatch, hosts, now) if hosts else {}
    return Measurement({host: value / settings.gpus_per_host for host, value in summed.items()})


def emf_line(settings: Settings, measurement: Measurement, now_ms: int) -> str:
    """An embedded-metric-format log line: TrainingHosts always, LowestGPUUtilization only when a host reported."""
    metrics = [{"Name": TRAINING_HOSTS_METRIC, "Unit": "Count"}]
    document: dict[str, Any] = {GPU_WATCH_DIMENSION: settings.job_name_prefix,
                                TRAINING_HOSTS_METRIC: len(measurement.per_gpu)}
    lowest = measurement.lowest
    if lowest is not None:
        metrics.append({"Name": LOWEST_GPU_UTILIZATION_METRIC, "Unit": "Percent"})
        document[LOWEST_GPU_UTILIZATION_METRIC] = round(lowest[1], 3)
        document["LowestHost"] = lowest[0]  # a property, not a dimension: says which host in Logs Insights
    document["_aws"] = {"Timestamp": now_ms, "CloudWatchMetrics": [
        {"Namespace": settings.namespace, "Dimensions": [[GPU_WATCH_DIMENSION]], "Metrics": metrics}]}
    return json.dumps(document)
