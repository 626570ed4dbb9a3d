"""The Debugger-free source: SageMaker's own instance metrics in CloudWatch (``/aws/sagemaker/TrainingJobs``).

CloudWatch gives one value per host and minute, summed over the host's GPUs or cores (0-100 x devices). The values are
turned into system records shaped like the profiler's (one averaged "device" per host, one record per minute) and run
through the same rules; see docs/evaluator.md for what each rule measures this way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from .readers import SystemFile

NAMESPACE = "/aws/sagemaker/TrainingJobs"
PERIOD_S = 60
METRICS = ("GPUUtilization", "GPUMemoryUtilization", "CPUUtilization", "MemoryUtilization", "DiskUtilization")
MAX_QUERIES = 500  # GetMetricData limit per request
VIRTUAL_GPU = "gpu-mean"
VIRTUAL_CORE = "cpu-mean"

# GPUs per instance size of the NVIDIA GPU families used for training. Families not listed here (new ones such as
# ml.g7 and ml.g7e, or sizes added later) are looked up with EC2 DescribeInstanceTypes, else the count is inferred
# from the metrics: a host that reports GPUUtilization has GPUs, whatever its name.
_GPUS = {
    "p2": {"xlarge": 1, "8xlarge": 8, "16xlarge": 16},
    "p3": {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8},
    "p3dn": {"24xlarge": 8},
    "p4d": {"24xlarge": 8},
    "p4de": {"24xlarge": 8},
    "p5": {"4xlarge": 1, "48xlarge": 8},
    "p5e": {"48xlarge": 8},
    "p5en": {"48xlarge": 8},
    "p6-b200": {"48xlarge": 8},
    "p6-b300": {"48xlarge": 8},
    "g4dn": {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 4, "16xlarge": 1},
    "g5": {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 4, "16xlarge": 1, "24xlarge": 4,
           "48xlarge": 8},
}
_GPUS["g6"] = _GPUS["g5"]
_GPUS["g6e"] = _GPUS["g5"]
#: Training instance families with no NVIDIA GPU (general purpose, compute, memory, burstable; Trainium and
#: Inferentia accelerators report no GPUUtilization either). Only the dashboard asks: the evaluator never needs to.
CPU_ONLY_FAMILIES = frozenset({"m4", "m5", "m5d", "m6i", "m6id", "m7i", "c4", "c5", "c5d", "c5n", "c6i", "c6id", "c7i",
                               "r5", "r5d", "r6i", "r7i", "t2", "t3", "trn1", "trn1n", "trn2", "inf1", "inf2"})
_INSTANCE = re.compile(r"^ml\.([a-z0-9-]+)\.(\d*)(x?large|metal)$")
_EC2_DEVICES: dict[str, tuple[int | None, int | None]] = {}  # per Lambda container: one lookup per instance type


def source_label(job_name: str) -> str:
    """How reports name this source, so a reader knows the verdicts rest on per-minute host averages."""
    return f"CloudWatch {NAMESPACE} (Host={job_name}/algo-*)"


def instance_devices(instance_type: str | None) -> tuple[int | None, int | None]:
    """(GPUs, vCPUs) of an ``ml.*`` instance type from the built-in table; None where unknown (never 0: a family
    missing from the table may well have GPUs)."""
    if not instance_type:
        return None, None
    match = _INSTANCE.match(instance_type)
    if not match:
        return None, None
    family, size_n, size = match.group(1), match.group(2), match.group(3)
    size_name = f"{size_n}{size}"
    vcpus = 2 if size_name == "large" else 4 if size_name == "xlarge" else (4 * int(size_n) if size_n else None)
    return _GPUS.get(family, {}).get(size_name), vcpus


def known_without_gpu(instance_type: str | None) -> bool:
    """True for an ``ml.*`` instance type of a family known to have no NVIDIA GPU."""
    match = _INSTANCE.match(instance_type or "")
    return bool(match) and match.group(1) in CPU_ONLY_FAMILIES


def ec2_devices(ec2: Any, instance_type: str) -> tuple[int | None, int | None]:
    """(GPUs, vCPUs) from EC2 DescribeInstanceTypes, which knows every current type; (None, None) when the call fails
    (no permission, an ml-only type)."""
    name = instance_type.removeprefix("ml.")
    if name not in _EC2_DEVICES:
        try:
            info = ec2.describe_instance_types(InstanceTypes=[name])["InstanceTypes"][0]
            gpus = sum(int(g.get("Count", 0)) for g in (info.get("GpuInfo") or {}).get("Gpus", []))
            vcpus = (info.get("VCpuInfo") or {}).get("DefaultVCpus")
            _EC2_DEVICES[name] = (gpus or None, int(vcpus) if vcpus else None)
        except Exception:  # best effort: the metrics still tell how many GPUs there are at least
            _EC2_DEVICES[name] = (None, None)
    return _EC2_DEVICES[name]


@dataclass(frozen=True)
class HostPlan:
    host: str  # "<job>/algo-<n>"
    node: str  # "algo-<n>"
    gpus: int | None
    vcpus: int | None


def hosts_for(job_name: str, instance_count: int, instance_type: str | None, ec2: Any = None) -> list[HostPlan]:
    gpus, vcpus = instance_devices(instance_type)
    if gpus is None and instance_type and ec2 is not None:
        found_gpus, found_vcpus = ec2_devices(ec2, instance_type)
        gpus, vcpus = found_gpus, found_vcpus or vcpus
    return [HostPlan(f"{job_name}/algo-{i}", f"algo-{i}", gpus, vcpus) for i in range(1, max(instance_count, 1) + 1)]


def metric_queries(plans: list[HostPlan]) -> list[dict[str, Any]]:
    queries = []
    for h, plan in enumerate(plans):
        for m, metric in enumerate(METRICS):
            queries.append({
                "Id": f"m{h}_{m}",
                "MetricStat": {
                    "Metric": {"Namespace": NAMESPACE, "MetricName": metric,
                               "Dimensions": [{"Name": "Host", "Value": plan.host}]},
                    "Period": PERIOD_S,
                    "Stat": "Average",
                },
                "ReturnData": True,
            })
    return queries


def fetch(cloudwatch: Any, plans: list[HostPlan], start_s: int, end_s: int) -> dict[str, dict[str, dict[int, float]]]:
    """``{node: {metric: {minute epoch seconds: value}}}`` for [start_s, end_s)."""
    out: dict[str, dict[str, dict[int, float]]] = {p.node: {} for p in plans}
    queries = metric_queries(plans)
    lookup = {q["Id"]: (plans[int(q["Id"][1:].split("_")[0])].node, METRICS[int(q["Id"].split("_")[1])])
              for q in queries}
    for offset in range(0, len(queries), MAX_QUERIES):
        kwargs: dict[str, Any] = {
            "MetricDataQueries": queries[offset : offset + MAX_QUERIES],
            "StartTime": datetime.fromtimestamp(start_s, tz=timezone.utc),
            "EndTime": datetime.fromtimestamp(end_s, tz=timezone.utc),
            "ScanBy": "TimestampAscending",
        }
        while True:
            page = cloudwatch.get_metric_data(**kwargs)
            for result in page.get("MetricDataResults", []):
                node, metric = lookup[result["Id"]]
                values = out[node].setdefault(metric, {})
                for stamp, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
                    values[int(stamp.timestamp()) // PERIOD_S * PERIOD_S] = float(value)
            token = page.get("NextToken")
            if not token:
                break
            kwargs["NextToken"] = token
    return out


def _divisor(known: int | None, values: Iterable[float]) -> int:
    if known:
        return known
    peak = max(values, default=0.0)
    return max(1, int(-(-peak // 100)))  # at most 100 % per device


def minute_files(job_name: str, plans: list[HostPlan], data: dict[str, dict[str, dict[int, float]]],
                 notes: list[str] | None = None) -> list[tuple[SystemFile, list[dict[str, Any]]]]:
    """Profiler-shaped records, one "file" per host and minute, stamped mid-minute so no record sits on a window edge.

    A host whose GPU count is unknown but which reports GPU metrics is divided by the count its largest value
    implies (at most 100 % per GPU: a lower bound), and ``notes`` says so.
    """
    files = []
    for plan in plans:
        metrics = data.get(plan.node, {})
        minutes = sorted({m for series in metrics.values() for m in series})
        gpu_values = [*metrics.get("GPUUtilization", {}).values(), *metrics.get("GPUMemoryUtilization", {}).values()]
        gpu_div = _divisor(plan.gpus, gpu_values)
        if gpu_values and not plan.gpus and notes is not None:
            notes.append(f"{plan.host}: GPU count of the instance type unknown; {gpu_div} GPU(s) inferred from the "
                         "largest GPU metric (at most 100 % per GPU, so a lower bound: per-GPU values may be too high)")
        cpu_div = _divisor(plan.vcpus, metrics.get("CPUUtilization", {}).values())
        for minute in minutes:
            ts = minute + 30.0
            recs: list[dict[str, Any]] = []
            cpu = metrics.get("CPUUtilization", {}).get(minute)
            if cpu is not None:
                recs.append({"Type": "cpu", "Name": VIRTUAL_CORE, "Dimension": "CPUUtilization", "Value": cpu / cpu_div,
                             "NodeId": plan.node, "Timestamp": ts})
            mem = metrics.get("MemoryUtilization", {}).get(minute)
            if mem is not None:
                recs.append({"Type": "memory", "Name": "MemoryUsedPercent", "Dimension": "", "Value": mem,
                             "NodeId": plan.node, "Timestamp": ts})
            if gpu_div:
                gpu = metrics.get("GPUUtilization", {}).get(minute)
                if gpu is not None:
                    recs.append({"Type": "gpu", "Name": VIRTUAL_GPU, "Dimension": "GPUUtilization",
                                 "Value": gpu / gpu_div, "NodeId": plan.node, "Timestamp": ts})
                gmem = metrics.get("GPUMemoryUtilization", {}).get(minute)
                if gmem is not None:
                    recs.append({"Type": "gpu", "Name": VIRTUAL_GPU, "Dimension": "GPUMemoryUtilization",
                                 "Value": gmem / gpu_div, "NodeId": plan.node, "Timestamp": ts})
            if recs:
                files.append((SystemFile(minute * 1_000_000, f"cloudwatch/{job_name}/{minute}.{plan.node}",
                                         plan.node), recs))
    files.sort(key=lambda item: item[0])
    return files
