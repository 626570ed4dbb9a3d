"""The evaluator at cluster scale: the deployed invocation model, run locally against a moto S3 server.

    python benchmarks/evaluator_scale.py [--nodes 1,4,16] [--cores 8] [--gpus 8] [--interval-ms 100] [--minutes 6]
                                         [--age-minutes 20] [--memory-mb 1769] [--full]
                                         [--day] [--cluster-hours 2 --cluster-cores 48]

For each cluster size it simulates a training job minute by minute: every node uploads its minute file, then one
scheduled invocation evaluates the job (``lambda_handler.evaluate_job``, the real handler code, with SageMaker's
DescribeTrainingJob stubbed) in a child process of its own, as Lambda runs each invocation; its CPU and peak RSS come
from that child's rusage (``os.wait4``), its S3 requests from botocore's event hooks. It prints, per size, the wall and
CPU per training minute per invocation, the peak RSS, the number of invocations, whether it keeps up (CPU per minute
under 60 s and peak RSS under the function's memory), and the cost per job-hour at list prices (Lambda arm64 GB-s and
requests, S3 PUT/LIST and GET), with ratios against the 1-node figure measured in the same run.

``--age-minutes N`` then runs a 1-node job for N minutes and prints the per-minute cost at its start and at its end
(flat: a ratio near 1). ``--day`` measures a 24-hour job of one 192-core node, ``--cluster-hours H`` an H-hour job of
16 nodes (``--cluster-cores`` each): the real handler runs minutes 0-11 and six minutes at each checkpoint (hour 1, 6,
12, 24; every hour for the cluster), and the minutes between are evaluated in a child process without files
(``FastForward``), so a day takes minutes; each checkpoint prints the CPU per minute against minute 10, the peak RSS
and the committed state's size. The minute files carry values at the resolution real files have (one decimal per
core, whole GPU percentages), so the rules' histories grow as a real job's do. ``--full`` is the issue's size: 1, 16 and 64 nodes of 192 cores and 8 GPUs at 100 ms for 10
minutes, and a 24-hour job (hours of CPU on a small machine). The defaults keep a run within a few minutes on two cores.
Absolute seconds on a shared machine are noisy; the ratios are the figures to compare.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

# List prices, us-east-1 (2026): Lambda arm64 per GB-second and per request; S3 Standard per request.
LAMBDA_GB_S = 0.0000133334
LAMBDA_REQUEST = 0.20 / 1_000_000
S3_PUT_OR_LIST = 0.005 / 1000
S3_GET = 0.0004 / 1000
REGION = "us-east-1"
BUCKET = "bench-output"
START = 1_764_400_020  # a minute boundary


@dataclass
class Invocation:
    wall_s: float
    cpu_s: float
    rss_mb: float
    puts: int
    gets: int
    result: str


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _spread(node: int, device: int, sample: int, salt: int) -> int:
    """A reproducible pseudo-random integer 0-999 per (device, sample)."""
    return ((sample * 2654435761 + device * 40503 + salt * 97) >> 7) % 1000


def realistic_spec(cores: int, gpus: int, interval_ms: int) -> Any:
    """One minute of busy but uneven training at the resolution real files have: CPU and I/O wait per core with one
    decimal (so per-timestamp sums over the cores are floating-point sums with rounding, as in real data), GPU
    utilisation and memory as whole percentages."""
    from cdk_sagemaker_debugger.runtime.evaluator.synthetic import JobSpec

    return JobSpec(nodes=1, minutes=1, cores=cores, gpus=gpus, interval_ms=interval_ms, start=START,
                   partial_last_minute_s=0, end_marker=False,
                   cpu_util=lambda n, c, s, t: 20 + _spread(n, c, s, 1) // 2 / 10,  # 20.0 .. 69.9
                   io_wait=lambda n, c, s, t: _spread(n, c, s, 2) % 100 / 10,
                   gpu_util=lambda n, g, s, t: float(60 + _spread(n, g, s, 3) % 40),
                   gpu_memory=lambda n, g, s, t: float(30 + _spread(n, g, s // 600, 4) % 10),
                   memory_used=lambda n, c, s, t: 12 + _spread(n, 0, s, 5) / 100,
                   network=lambda n, c, s, t: float(1000 + _spread(n, 0, s, 6)))


def minute_template(cores: int, gpus: int, interval_ms: int) -> bytes:
    """One node's minute file (algo-1, minute 0), written by the project's synthetic job writer."""
    from cdk_sagemaker_debugger.runtime.evaluator.synthetic import write_job

    with tempfile.TemporaryDirectory() as tmp:
        root = write_job(Path(tmp) / "po", realistic_spec(cores, gpus, interval_ms))
        [path] = list(root.rglob("*.algo-1.json"))
        return path.read_bytes()


def minute_file(template: bytes, node: int, minute: int) -> bytes:
    """The template moved to ``minute`` and ``algo-<node>`` (timestamps shifted second by second, newest first,
    so a shifted second is never shifted again)."""
    body = template.replace(b'"algo-1"', f'"algo-{node}"'.encode()) if node != 1 else template
    if minute:
        for second in range(59, -1, -1):
            body = body.replace(f'"Timestamp":{START + second}.'.encode(),
                                f'"Timestamp":{START + 60 * minute + second}.'.encode())
    return body


def key_for(job: str, node: int, minute: int) -> str:
    epoch = START + 60 * minute
    hour = datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y%m%d%H")
    return f"profiler/{job}/profiler-output/system/incremental/{hour}/{epoch}.algo-{node}.json"


def describe(job: str, nodes: int, status: str) -> dict[str, Any]:
    start = datetime.fromtimestamp(START, tz=timezone.utc)
    response = {
        "TrainingJobName": job, "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{job}",
        "TrainingJobStatus": status, "SecondaryStatus": "Training",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "123.dkr.ecr.us-east-1.amazonaws.com/t"},
        "ModelArtifacts": {"S3ModelArtifacts": f"s3://{BUCKET}/output/{job}/output/model.tar.gz"},
        "ResourceConfig": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": nodes, "VolumeSizeInGB": 50},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400}, "CreationTime": start - timedelta(minutes=3),
        "TrainingStartTime": start, "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/output"},
        "ProfilerConfig": {"S3OutputPath": f"s3://{BUCKET}/profiler", "ProfilingIntervalInMilliseconds": 100},
    }
    if status != "InProgress":
        response["TrainingEndTime"] = start + timedelta(hours=1)
    return response


def invoke(endpoint: str, job: str, nodes: int, status: str) -> Invocation:
    """One invocation in a child process: the real evaluate_job, its rusage measured by the parent."""
    read_fd, write_fd = os.pipe()
    began = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the invocation
        os.close(read_fd)
        code = 0
        try:
            report = child(endpoint, job, nodes, status)
        except BaseException as exc:  # reported to the parent, which fails the benchmark
            report, code = {"result": f"failed: {type(exc).__name__}: {exc}", "puts": 0, "gets": 0}, 1
        os.write(write_fd, json.dumps(report).encode())
        os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        report = json.loads(pipe.read() or '{"result": "no report", "puts": 0, "gets": 0}')
    _, status_code, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - began
    if status_code:
        raise SystemExit(f"the invocation failed: {report['result']}")
    return Invocation(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, report["puts"], report["gets"],
                      report["result"])


def child(endpoint: str, job: str, nodes: int, status: str) -> dict[str, Any]:
    import boto3
    from botocore.stub import Stubber

    from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
    from cdk_sagemaker_debugger.runtime.evaluator.contract_shared import JobFamily

    counts = {"puts": 0, "gets": 0}

    def count(event_name: str, **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        counts["gets" if operation in ("GetObject", "HeadObject") else "puts"] += 1

    s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint)
    s3.meta.events.register("before-call.s3", count)
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    stub = Stubber(sagemaker)
    stub.add_response("describe_training_job", describe(job, nodes, status), {"TrainingJobName": job})
    stub.activate()
    events = boto3.client("events", region_name=REGION, endpoint_url=endpoint)
    settings = lh.Settings(family=JobFamily(job_name_prefix="bench-"), read_workers=4)
    clients = lh.Clients(s3=s3, sagemaker=sagemaker, events=events)
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # the EMF lines
        outcome = lh.evaluate_job(job, settings, clients, deadline=time.monotonic() + 270)
    return {"result": outcome["result"], **counts}


def new_job(nodes: int) -> str:
    return f"bench-{nodes}n-{int(time.time() * 1000) % 10**9}"


def simulate(endpoint: str, s3: Any, nodes: int, args: argparse.Namespace, minutes: int, *, job: str | None = None,
             first: int = 0, template: bytes | None = None) -> list[Invocation]:
    """Minutes ``first`` .. ``first + minutes - 1`` of the job: each node uploads its file, then one invocation."""
    job = job or new_job(nodes)
    template = template or minute_template(args.cores, args.gpus, args.interval_ms)
    runs = []
    for minute in range(first, first + minutes):
        for node in range(1, nodes + 1):
            s3.put_object(Bucket=BUCKET, Key=key_for(job, node, minute), Body=minute_file(template, node, minute))
        runs.append(invoke(endpoint, job, nodes, "InProgress"))
        for node in range(1, nodes + 1):  # keep the server's memory bounded: consumed minutes are never read again
            if minute - first >= 8:
                s3.delete_object(Bucket=BUCKET, Key=key_for(job, node, minute - 8))
    for minute in range(max(first, first + minutes - 8), first + minutes):
        for node in range(1, nodes + 1):
            s3.delete_object(Bucket=BUCKET, Key=key_for(job, node, minute))
    return runs


def state_object(job: str) -> str:
    """The key of the job's evaluator state, as the handler names it."""
    from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
    from cdk_sagemaker_debugger.runtime.evaluator.contract_shared import JobFamily

    settings = lh.Settings(family=JobFamily(job_name_prefix="bench-"), read_workers=4)
    return lh.state_key(f"output/{job}/rule-output", settings.evaluator_id)


def state_size(s3: Any, job: str) -> tuple[int, int]:
    """(gzip, JSON) bytes of the job's committed state."""
    body = s3.get_object(Bucket=BUCKET, Key=state_object(job))["Body"].read()
    return len(body), len(gzip.decompress(body))


class FastForward:
    """Windows evaluated in this process, without files, to bring a job's committed state to a later minute.

    Each simulated window is the template minute's window (its records read by the real reader and window, once per
    node) moved to its minute, with fresh per-timestamp CPU and I/O-wait sums drawn the way real sums arise: each the
    floating-point sum of one random one-decimal value per core. So the rules' histories grow as a real job's do.
    The state is then committed where the handler finds it, with the cursor after the last simulated minute, and the
    next invocations (the real handler, measured) read real files from there on.
    """

    def __init__(self, template: bytes, nodes: int, cores: int, seed: int = 7):
        import random

        from cdk_sagemaker_debugger.runtime.evaluator.engine import Evaluator, RuleConfig
        from cdk_sagemaker_debugger.runtime.evaluator.readers import ParseStats, parse_system_lines
        from cdk_sagemaker_debugger.runtime.evaluator.window import SystemWindow

        tests = Evaluator([RuleConfig("ProfilerReport", "ProfilerReport")]).window_tests
        self.window = SystemWindow(0, START * 1_000_000, (START + 60) * 1_000_000, tests)
        for node in range(1, nodes + 1):
            self.window.add(parse_system_lines(minute_file(template, node, 0), "template", ParseStats()))
        self.window.finalize()
        self.rnd = random.Random(seed)
        self.cores = cores
        self.cpu_values = [float(f"{20 + i / 10:.1f}") for i in range(500)]
        self.io_values = [float(f"{i / 10:.1f}") for i in range(100)]

    def _window(self, k: int, start_us: int, end_us: int) -> Any:
        from cdk_sagemaker_debugger.runtime.evaluator.window import USAGE_METRICS, SystemWindow

        t, dt = self.window, 60.0 * k
        w = SystemWindow(k, start_us, end_us, t.tests)
        w.runs = [[r[0] + dt, r[1], r[2], r[3], r[4], r[5]] for r in t.runs]
        for metric in USAGE_METRICS:
            w.sums[metric] = {node: {ts + dt: v for ts, v in d.items()} for node, d in t.sums[metric].items()}
        choices, cores = self.rnd.choices, self.cores
        for metric, values in (("CPU", self.cpu_values), ("I/O", self.io_values)):
            for d in w.sums[metric].values():
                for ts in d:
                    d[ts] = sum(choices(values, k=cores), 0.0)
        w.gpu_util = {node: {g: list(v) for g, v in gpus.items()} for node, gpus in t.gpu_util.items()}
        w.gpu_mem = {node: {g: list(v) for g, v in gpus.items()} for node, gpus in t.gpu_mem.items()}
        w.cpu_names, w.gpu_names = set(t.cpu_names), set(t.gpu_names)
        w.min_ts, w.max_ts, w.records = (t.min_ts or 0) + dt, (t.max_ts or 0) + dt, t.records
        return w

    def to_minute(self, s3: Any, job: str, minute: int) -> int:
        """Evaluate every window before ``minute`` and commit; returns how many windows were simulated."""
        from cdk_sagemaker_debugger.runtime.evaluator.engine import Evaluator
        from cdk_sagemaker_debugger.runtime.evaluator.reading import Cursor
        from cdk_sagemaker_debugger.runtime.evaluator.state import S3StateStore

        store = S3StateStore(s3, BUCKET, state_object(job))
        state, etag = store.load()
        if state is None:
            raise SystemExit(f"{job}: no committed state to fast-forward")
        ev = Evaluator.from_state(state["evaluator"])
        simulated = 0
        for k in range(ev.next_window, minute):
            start, end = ev._window_bounds(k)
            if k not in ev.pending_system:  # the windows the real invocations left open are evaluated as they are
                ev.pending_system[k] = self._window(k, start, end)
                simulated += 1
            ev._evaluate_window(k, start, end)
        ev.pending_framework.clear()
        ev.newest_system_us = (START + 60 * (minute - 1)) * 1_000_000
        for node in list(ev.progress.nodes):
            ev.progress.nodes[node] = START + 60 * minute - 0.1
        relative = key_for(job, 1, minute - 1).split("profiler-output/", 1)[1]
        state["system_cursor"] = Cursor(start_after=relative.rsplit(".algo-", 1)[0] + ".~").to_state()
        state["evaluator"] = ev.to_state()
        store.save(state, etag)
        return simulated


def client(endpoint: str) -> Any:
    import boto3
    from botocore.config import Config

    # a local moto server under load answers an occasional 500: retried, as the SDK retries S3's own
    return boto3.client("s3", region_name=REGION, endpoint_url=endpoint,
                        config=Config(retries={"max_attempts": 10, "mode": "standard"}))


def in_child(work: Any) -> None:
    """Run ``work()`` in a child process, so that what it allocates never counts in a later invocation's peak RSS
    (an invocation forks from this process)."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            work()
        except BaseException as exc:  # reported, and the benchmark fails
            print(f"fast-forward failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if status:
        raise SystemExit("the fast-forward failed")


def report_long(endpoint: str, s3: Any, args: argparse.Namespace, nodes: int, cores: int,
                checkpoints: list[int]) -> None:
    """A long job, measured with the real handler at minute 10 and at each checkpoint minute (FastForward between)."""
    job = new_job(nodes)
    template = minute_template(cores, args.gpus, args.interval_ms)
    scaled = argparse.Namespace(**{**vars(args), "cores": cores})
    runs = simulate(endpoint, s3, nodes, scaled, 12, job=job, template=template)
    base = per_minute(runs[10:12])
    gz, raw = state_size(s3, job)
    print(f"{nodes} node(s) x {cores} cores x {args.gpus} GPUs at {args.interval_ms} ms, {checkpoints[-1] // 60} h "
          "(the real handler at each minute shown; the minutes between evaluated in-process)")
    print(f"{'at':>9} {'CPU/min':>8} {'x min 10':>8} {'wall/min':>9} {'peak RSS':>9} {'state gz':>9} {'json':>9}")
    print(f"{'minute 10':>9} {base['cpu']:>7.2f}s {1.0:>7.2f}x {base['wall']:>8.2f}s {base['rss']:>7.0f}MB "
          f"{gz / 1e3:>7.0f}KB {raw / 1e6:>7.2f}MB")
    for minute in checkpoints:
        in_child(lambda minute=minute: FastForward(template, nodes, cores, seed=minute).to_minute(
            client(endpoint), job, minute))
        m = per_minute(simulate(endpoint, s3, nodes, scaled, 6, job=job, first=minute, template=template)[4:])
        gz, raw = state_size(s3, job)
        label = f"hour {minute // 60}" if minute % 60 == 0 else f"min {minute}"
        print(f"{label:>9} {m['cpu']:>7.2f}s {m['cpu'] / base['cpu']:>7.2f}x {m['wall']:>8.2f}s {m['rss']:>7.0f}MB "
              f"{gz / 1e3:>7.0f}KB {raw / 1e6:>7.2f}MB")


def empty_bucket(s3: Any) -> None:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for item in page.get("Contents", []):
            s3.delete_object(Bucket=BUCKET, Key=item["Key"])


def per_minute(runs: list[Invocation]) -> dict[str, float]:
    n = len(runs)
    return {"wall": sum(r.wall_s for r in runs) / n, "cpu": sum(r.cpu_s for r in runs) / n,
            "rss": max(r.rss_mb for r in runs), "puts": sum(r.puts for r in runs) / n,
            "gets": sum(r.gets for r in runs) / n}


def cost_per_job_hour(m: dict[str, float], memory_mb: int) -> float:
    """60 invocations an hour, billed for their CPU time (at 1,769 MB a Lambda has one vCPU: CPU time ~ duration)."""
    per_minute_cost = (m["cpu"] * memory_mb / 1024 * LAMBDA_GB_S + LAMBDA_REQUEST + m["puts"] * S3_PUT_OR_LIST
                       + m["gets"] * S3_GET)
    return 60 * per_minute_cost


def report_sizes(endpoint: str, s3: Any, args: argparse.Namespace) -> None:
    print(f"{args.cores} cores x {args.gpus} GPUs per node at {args.interval_ms} ms; {args.minutes} simulated minutes; "
          f"one invocation per minute ({args.memory_mb} MB)")
    print(f"{'nodes':>5} {'wall/min':>9} {'CPU/min':>8} {'x 1 node':>8} {'peak RSS':>9} {'calls':>5} {'keeps up':>8} "
          f"{'$/job-hour':>10} {'x 1 node':>8}")
    baseline: dict[str, float] | None = None
    for nodes in args.nodes:
        runs = simulate(endpoint, s3, nodes, args, args.minutes)
        empty_bucket(s3)
        m = per_minute(runs[len(runs) // 2 :])
        cost = cost_per_job_hour(m, args.memory_mb)
        baseline = baseline or {**m, "cost": cost}
        keeps_up = m["cpu"] < 60 and m["rss"] < args.memory_mb
        print(f"{nodes:>5} {m['wall']:>8.2f}s {m['cpu']:>7.2f}s {m['cpu'] / baseline['cpu']:>7.1f}x "
              f"{m['rss']:>7.0f}MB {args.minutes:>5} {'yes' if keeps_up else 'NO':>8} {cost:>10.4f} "
              f"{cost / baseline['cost']:>7.1f}x")


def report_age(endpoint: str, s3: Any, args: argparse.Namespace) -> None:
    runs = simulate(endpoint, s3, 1, args, args.age_minutes)
    span = max(3, len(runs) // 10)
    early, late = per_minute(runs[1 : 1 + span]), per_minute(runs[-span:])
    print(f"1 node for {args.age_minutes} minutes: CPU per invocation {early['cpu']:.2f} s at the start, "
          f"{late['cpu']:.2f} s at the end ({late['cpu'] / early['cpu']:.2f} x); peak RSS {early['rss']:.0f} -> "
          f"{late['rss']:.0f} MB; cost per job-hour ${cost_per_job_hour(early, args.memory_mb):.4f} -> "
          f"${cost_per_job_hour(late, args.memory_mb):.4f}")


# ---- node fan-out (fanout.py): the queue's model, one job message and its shard messages per minute ----------------

SQS_FIFO_REQUEST = 0.50 / 1_000_000
QUEUE = "bench-jobs.fifo"


@dataclass
class FanMinute:
    job_run: Invocation
    shards: list[Invocation]
    shard_messages: int


def fan_job_run(endpoint: str, queue_url: str, job: str, nodes: int, gate: str) -> dict[str, Any]:
    """The job message's invocation (the real handler, as the queue's event source mapping invokes it). It is held
    before it looks at any shard claim but shard 0's until ``gate`` exists: the shard invocations, which Lambda runs
    in parallel, take their shards first, as they do when the queue starts them at once."""
    import boto3
    from botocore.stub import Stubber

    from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
    from cdk_sagemaker_debugger.runtime.evaluator.contract_shared import JobFamily

    counts = {"puts": 0, "gets": 0}
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint)
    s3.meta.events.register("before-call.s3", _counter(counts))

    class HeldBeforeOtherClaims:
        def __init__(self, real: Any):
            self.real = real

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

        def get_object(self, **kwargs: Any) -> Any:
            if kwargs["Key"].endswith(".claim") and not kwargs["Key"].endswith("/0.claim"):
                Path(gate + ".held").touch()  # the shard messages are sent by now
                while not os.path.exists(gate):
                    time.sleep(0.05)
            return self.real.get_object(**kwargs)

    sagemaker = boto3.client("sagemaker", region_name=REGION)
    stub = Stubber(sagemaker)
    stub.add_response("describe_training_job", describe(job, nodes, "InProgress"), {"TrainingJobName": job})
    stub.activate()
    clients = lh.Clients(s3=HeldBeforeOtherClaims(s3), sagemaker=sagemaker,
                         sqs=boto3.client("sqs", region_name=REGION, endpoint_url=endpoint),
                         events=boto3.client("events", region_name=REGION, endpoint_url=endpoint))
    settings = lh.Settings(family=JobFamily(job_name_prefix="bench-"), read_workers=4, queue_url=queue_url)
    import contextlib
    import io

    record = {"eventSource": "aws:sqs", "messageId": "job", "body": json.dumps({"TrainingJobName": job})}
    with contextlib.redirect_stdout(io.StringIO()):  # the EMF lines
        outcome = lh.handler({"Records": [record]}, None, clients=clients, settings=settings)
    return {"result": outcome["jobs"][0]["result"], **counts}


def fan_shard_run(endpoint: str, body: str) -> dict[str, Any]:
    """One shard message's invocation (the real handler)."""
    import boto3

    from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
    from cdk_sagemaker_debugger.runtime.evaluator.contract_shared import JobFamily

    counts = {"puts": 0, "gets": 0}
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint)
    s3.meta.events.register("before-call.s3", _counter(counts))
    settings = lh.Settings(family=JobFamily(job_name_prefix="bench-"), read_workers=4, queue_url="unused")
    outcome = lh.handler({"Records": [{"eventSource": "aws:sqs", "messageId": "shard", "body": body}]}, None,
                         clients=lh.Clients(s3=s3), settings=settings)
    return {"result": outcome["jobs"][0]["result"], **counts}


def _counter(counts: dict[str, int]) -> Any:
    def count(event_name: str, **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        counts["gets" if operation in ("GetObject", "HeadObject") else "puts"] += 1

    return count


def forked(run: Any, *args: Any) -> tuple[int, int]:
    """Start ``run(*args)`` in a child process (an invocation of its own); returns (pid, read end of its report)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        code = 0
        try:
            report = run(*args)
        except BaseException as exc:  # reported to the parent, which fails the benchmark
            report, code = {"result": f"failed: {type(exc).__name__}: {exc}", "puts": 0, "gets": 0}, 1
        os.write(write_fd, json.dumps(report).encode())
        os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def reaped(pid: int, read_fd: int, began: float) -> Invocation:
    with os.fdopen(read_fd) as pipe:
        report = json.loads(pipe.read() or '{"result": "no report", "puts": 0, "gets": 0}')
    _, status_code, usage = os.wait4(pid, 0)
    if status_code:
        raise SystemExit(f"an invocation failed: {report['result']}")
    return Invocation(time.perf_counter() - began, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
                      report["puts"], report["gets"], report["result"])


def fan_minute(endpoint: str, sqs: Any, queue_url: str, job: str, nodes: int) -> FanMinute:
    """One scheduled minute of the job: its job message's invocation, and one invocation per shard message it sent
    (each its own process; the shard invocations one after another, the machine has two cores)."""
    with tempfile.TemporaryDirectory() as tmp:
        gate = os.path.join(tmp, "go")
        began = time.perf_counter()
        job_pid, job_fd = forked(fan_job_run, endpoint, queue_url, job, nodes, gate)
        shards: list[Invocation] = []
        messages = 0
        while not os.path.exists(gate + ".held") and os.waitid(os.P_PID, job_pid, os.WEXITED | os.WNOHANG
                                                                 | os.WNOWAIT) is None:
            time.sleep(0.05)  # until the job's run waits for the shards, or ended without any
        if os.path.exists(gate + ".held"):
            while True:
                batch = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
                if not batch:
                    break
                for message in batch:
                    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
                    messages += 1
                    started = time.perf_counter()
                    pid, fd = forked(fan_shard_run, endpoint, message["Body"])
                    shards.append(reaped(pid, fd, started))
        Path(gate).touch()
        job_run = reaped(job_pid, job_fd, began)
    return FanMinute(job_run, shards, messages)


def simulate_fanout(endpoint: str, s3: Any, sqs: Any, queue_url: str, nodes: int, args: argparse.Namespace
                    ) -> list[FanMinute]:
    job = f"bench-fan-{nodes}n-{int(time.time() * 1000) % 10**9}"
    template = minute_template(args.cores, args.gpus, args.interval_ms)
    minutes = []
    suffix = ".gz" if args.fanout_gzip else ""
    for minute in range(args.fanout_minutes):
        for node in range(1, nodes + 1):
            body = minute_file(template, node, minute)
            s3.put_object(Bucket=BUCKET, Key=key_for(job, node, minute) + suffix,
                          Body=gzip.compress(body, compresslevel=1) if suffix else body)
        minutes.append(fan_minute(endpoint, sqs, queue_url, job, nodes))
        done = minutes[-1]
        print(f"  {nodes} nodes, minute {minute}: job run {done.job_run.cpu_s:.2f} s CPU, {done.job_run.rss_mb:.0f} MB; "
              f"{len(done.shards)} shard invocation(s), longest {max((i.cpu_s for i in done.shards), default=0):.2f} s "
              f"CPU, peak {max((i.rss_mb for i in done.shards), default=0):.0f} MB", flush=True)
        for node in range(1, nodes + 1):  # read once, never again: the server's memory stays one minute of files
            s3.delete_object(Bucket=BUCKET, Key=key_for(job, node, minute) + suffix)
    return minutes


def fan_figures(minutes: list[FanMinute], memory_mb: int) -> dict[str, float]:
    """Per training minute. The shard invocations run in parallel on Lambda, while the job's run reads shard 0 and
    then merges: the job's run finishes at most its own CPU time plus the longest shard's after the minute starts
    (at 1,769 MB a Lambda has one vCPU: its CPU time is its duration). Billed: the job's run for that span (it waits
    for the shards), each shard invocation for its CPU time."""
    n = len(minutes)
    job_cpu = sum(m.job_run.cpu_s for m in minutes) / n
    longest = [max((s.cpu_s for s in m.shards), default=0.0) for m in minutes]
    span = max(m.job_run.cpu_s + extra for m, extra in zip(minutes, longest, strict=True))
    billed = sum(m.job_run.cpu_s + extra + sum(s.cpu_s for s in m.shards)
                 for m, extra in zip(minutes, longest, strict=True)) / n
    # with the construct's default reserved concurrency (5: the job's run and at most 3 shard invocations besides the
    # schedule's), the shards are read three at a time next to the job's run, which also reads any left unclaimed
    limited = max(m.job_run.cpu_s + sum(s.cpu_s for s in m.shards) / 3 for m in minutes)
    invocations = sum(1 + len(m.shards) for m in minutes) / n
    puts = sum(m.job_run.puts + sum(s.puts for s in m.shards) for m in minutes) / n
    gets = sum(m.job_run.gets + sum(s.gets for s in m.shards) for m in minutes) / n
    messages = sum(m.shard_messages for m in minutes) / n
    per_minute = (billed * memory_mb / 1024 * LAMBDA_GB_S + invocations * LAMBDA_REQUEST + puts * S3_PUT_OR_LIST
                  + gets * S3_GET + messages * 3 * SQS_FIFO_REQUEST)  # send, receive, delete
    return {
        "job_cpu": job_cpu, "job_wall": sum(m.job_run.wall_s for m in minutes) / n,
        "shard_cpu": sum(sum(s.cpu_s for s in m.shards) for m in minutes) / max(1, sum(len(m.shards) for m in minutes)),
        "longest_shard": max(longest), "span": span, "limited": limited, "billed": billed, "invocations": invocations,
        "rss": max(max(s.rss_mb for s in m.shards) if m.shards else 0.0 for m in minutes),
        "job_rss": max(m.job_run.rss_mb for m in minutes), "cost": 60 * per_minute,
    }


def report_fanout(endpoint: str, s3: Any, args: argparse.Namespace) -> None:
    import boto3

    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=endpoint)
    queue_url = sqs.create_queue(QueueName=QUEUE, Attributes={"FifoQueue": "true"})["QueueUrl"]
    print(f"\nnode fan-out (the job queue's invocation model): {args.cores} cores x {args.gpus} GPUs per node at "
          f"{args.interval_ms} ms{' (.json.gz files)' if args.fanout_gzip else ''}; {args.fanout_minutes} simulated minutes, figures of the last "
          f"{args.fanout_minutes - args.fanout_minutes // 2}; {args.memory_mb} MB, one vCPU per invocation")
    print(f"{'nodes':>5} {'calls/min':>9} {'job CPU':>8} {'job RSS':>8} {'shard CPU':>9} {'shard RSS':>9} "
          f"{'span/min':>8} {'x 1 node':>8} {'span@5':>7} {'keeps up':>8} {'$/job-hour':>10} {'x 1 node':>8}")
    baseline: dict[str, float] | None = None
    for nodes in args.fanout_nodes:
        minutes = simulate_fanout(endpoint, s3, sqs, queue_url, nodes, args)
        empty_bucket(s3)
        f = fan_figures(minutes[args.fanout_minutes // 2 :], args.memory_mb)
        baseline = baseline or f
        keeps_up = f["span"] < 60 and max(f["rss"], f["job_rss"]) < args.memory_mb
        print(f"{nodes:>5} {f['invocations']:>9.1f} {f['job_cpu']:>7.2f}s {f['job_rss']:>6.0f}MB "
              f"{f['shard_cpu']:>8.2f}s {f['rss']:>7.0f}MB {f['span']:>7.2f}s {f['span'] / baseline['span']:>7.1f}x "
              f"{f['limited']:>6.1f}s {'yes' if keeps_up else 'NO':>8} {f['cost']:>10.4f} {f['cost'] / baseline['cost']:>7.1f}x")
    print("span/min: the longest minute's job run CPU plus its longest shard (shards run in parallel on Lambda; "
          "each invocation here ran in a process of its own, CPU from its rusage); span@5: the same with the default "
          "reserved concurrency of 5 (three shard invocations at a time); keeps up: span under 60 s and every "
          "invocation's peak RSS under the function's memory")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="1,4,16",
                        help="cluster sizes, comma-separated (default 1,4,16; --nodes 1,16,64 for the issue's sizes)")
    parser.add_argument("--cores", type=int, default=8, help="cores per node (default 8; the issue's size: 192)")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--minutes", type=int, default=6,
                        help="simulated minutes per size (default 6; the figures are those of the second half, once "
                        "windows close: a window waits for the 3 minutes of files after it)")
    parser.add_argument("--age-minutes", type=int, default=20, help="length of the 1-node flat-cost run (0: none)")
    parser.add_argument("--memory-mb", type=int, default=1769, help="the function's memory (default 1769)")
    parser.add_argument("--day", action="store_true",
                        help="a 24-hour 1-node job of 192 cores: per-minute cost at minute 10 and hours 1, 6, 12, 24")
    parser.add_argument("--cluster-hours", type=int, default=0,
                        help="a 16-node job of that many hours (--cluster-cores each): cost at minute 10 and each hour")
    parser.add_argument("--cluster-cores", type=int, default=48, help="cores per node of the long 16-node job")
    parser.add_argument("--fanout-nodes", default="",
                        help="cluster sizes for the node fan-out section, comma-separated (e.g. 1,16,64 with --cores "
                        "192; default: none)")
    parser.add_argument("--fanout-minutes", type=int, default=5,
                        help="simulated minutes per fan-out size (default 5: windows close from the fourth minute)")
    parser.add_argument("--fanout-gzip", action="store_true",
                        help="the fan-out section's minute files as .json.gz keys (the sampler's compressed upload; a "
                        "64-node minute of plain JSON, 1.9 GB, is more than a local moto server holds)")
    parser.add_argument("--skip-sizes", action="store_true", help="only the sections asked for by name")
    parser.add_argument("--full", action="store_true",
                        help="1, 16 and 64 nodes of 192 cores, 10 minutes per size, and a 24-hour job")
    args = parser.parse_args(argv)
    args.nodes = [int(n) for n in re.split(r"[, ]+", args.nodes) if n]
    args.fanout_nodes = [int(n) for n in re.split(r"[, ]+", args.fanout_nodes) if n]
    if args.full:
        args.nodes, args.cores, args.minutes, args.age_minutes = [1, 16, 64], 192, 10, 1440
    # imported before the invocations fork: like a warm Lambda, an invocation does not pay for its imports
    from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler  # noqa: F401

    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION=REGION)

    # moto in a process of its own: the invocations fork from this process, whose memory must stay small for their
    # peak RSS to be their own
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        s3 = client(endpoint)
        for _ in range(100):
            try:
                s3.create_bucket(Bucket=BUCKET)
                break
            except Exception:  # not listening yet
                time.sleep(0.2)
        if args.nodes and not args.skip_sizes:
            report_sizes(endpoint, s3, args)
        if args.age_minutes and not args.skip_sizes:
            report_age(endpoint, s3, args)
        if args.day:
            report_long(endpoint, s3, args, 1, 192, [60, 360, 720, 1440])
            empty_bucket(s3)
        if args.cluster_hours:
            report_long(endpoint, s3, args, 16, args.cluster_cores, [60 * h for h in range(1, args.cluster_hours + 1)])
            empty_bucket(s3)
        if args.fanout_nodes:
            report_fanout(endpoint, s3, args)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
