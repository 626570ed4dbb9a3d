"""Lambda entry point of the RuleEvaluator: ``evaluator.lambda_handler.handler``.

Invoked every minute (evaluates every InProgress job whose name starts with the configured prefix), on each training
job state change to a final status (one last evaluation), and by its own continuation events when a run ran out of
time. Each run reads only files it has not read, evaluates the windows that became complete, writes the reports next
to where the managed rule would, publishes status changes and EMF metrics, then commits its state with a conditional
write. A crash before the commit loses nothing: the next run starts again from the last committed state.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from . import cloudwatch
from .engine import (
    PROFILER_REPORT,
    Cursor,
    Evaluator,
    RuleConfig,
    RuleResult,
    feed,
    list_new_files,
)
from .html_report import render
from .publish import continuation_event, emf_lines, emit_emf, put_events, status_change_event
from .report import HTML_NAME, SUMMARY_NAME, report_files, summary
from .rules import MaxInitializationTime
from .state import STATE_FILE, ConcurrentUpdateError, S3StateStore
from .storage import S3Store, job_profiler_store, split_s3_uri

LOG = logging.getLogger(__name__)
LOG.setLevel(logging.INFO)

TERMINAL = ("Completed", "Failed", "Stopped")
SOURCES = ("AUTO", "PROFILER", "CLOUDWATCH")
REPORT_FOLDER = "evaluator-output"
PROFILER_SECONDS_PER_SAMPLE = 0.5  # the profiler's default interval: counts configured in samples keep their duration
CLOUDWATCH_DELAY_S = 120  # CloudWatch minutes are complete about two minutes later
# How long AUTO waits for profiler output before falling back to CloudWatch, counted from the job's "Training" secondary
# status (the container runs from then on; the sampler's first upload comes about a minute after it starts).
AUTO_WAIT_FOR_PROFILER_S = 300


@dataclass
class Settings:
    job_name_prefix: str
    rules: list[RuleConfig] = field(default_factory=list)
    source: str = "AUTO"
    event_bus: str = "default"
    namespace: str = "CdkSageMakerDebugger"
    safety_margin_s: float = 30.0
    read_workers: int = 4
    #: Where the jobs' profiler files are (``<uri>/<job>/profiler-output/``) when a job has no ProfilerConfig: the
    #: sampler's location, set by the construct. Empty: only a job's own ProfilerConfig counts.
    profiler_s3_uri: str = ""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        prefix = env.get("JOB_NAME_PREFIX", "")
        if not prefix:
            raise ValueError("JOB_NAME_PREFIX is not set; the evaluator would otherwise read every training job")
        rules = [RuleConfig.from_dict(r) for r in json.loads(env.get("RULES", "[]"))]
        source = env.get("SOURCE", "AUTO").upper()
        if source not in SOURCES:
            raise ValueError(f"SOURCE={source!r}; expected one of {', '.join(SOURCES)}")
        return cls(prefix, rules, source, env.get("EVENT_BUS_NAME", "default"),
                   env.get("METRIC_NAMESPACE", "CdkSageMakerDebugger"),
                   float(env.get("SAFETY_MARGIN_SECONDS", "30")), int(env.get("READ_WORKERS", "4")),
                   env.get("PROFILER_S3_URI", ""))


class Clients:
    """boto3 clients, created on first use (tests pass stubbed ones)."""

    def __init__(self, **clients: Any):
        self._clients = dict(clients)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._clients:
            import boto3

            service = {"sagemaker": "sagemaker", "s3": "s3", "events": "events", "cloudwatch": "cloudwatch"}[name]
            self._clients[name] = boto3.client(service)
        return self._clients[name]


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def _epoch(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    return float(value)


def jobs_for_event(event: dict[str, Any], settings: Settings, clients: Clients) -> list[str]:
    """Which jobs this invocation evaluates."""
    detail = event.get("detail") if isinstance(event.get("detail"), dict) else {}
    name = detail.get("TrainingJobName") or event.get("TrainingJobName")
    if isinstance(name, str) and name:
        return [name] if name.startswith(settings.job_name_prefix) else []
    jobs: list[str] = []
    kwargs: dict[str, Any] = {"StatusEquals": "InProgress", "NameContains": settings.job_name_prefix,
                              "MaxResults": 100}
    while True:
        page = clients.sagemaker.list_training_jobs(**kwargs)
        jobs += [j["TrainingJobName"] for j in page.get("TrainingJobSummaries", [])
                 if j["TrainingJobName"].startswith(settings.job_name_prefix)]
        if not page.get("NextToken"):
            return jobs
        kwargs["NextToken"] = page["NextToken"]


def configs_for(description: dict[str, Any], settings: Settings) -> list[RuleConfig]:
    if settings.rules:
        return settings.rules
    configs = [RuleConfig.from_rule_parameters(c["RuleConfigurationName"], c.get("RuleParameters") or {})
               for c in description.get("ProfilerRuleConfigurations") or []]
    return configs or [RuleConfig(PROFILER_REPORT, PROFILER_REPORT, {})]


def profiler_store(description: dict[str, Any], s3: Any, default_uri: str = "") -> S3Store | None:
    """Debugger's profiler location from the job's ProfilerConfig; else the configured (sampler) location; else None.
    The configured location comes from the deployment, never from the job's own environment, which its creator wrote."""
    config = description.get("ProfilerConfig") or {}
    uri = config.get("S3OutputPath") if not config.get("DisableProfiler") else None
    uri = uri or default_uri
    if not uri:
        return None
    return job_profiler_store(uri, description["TrainingJobName"], s3)


def choose_source(settings: Settings, description: dict[str, Any], store: S3Store | None, now: float) -> str | None:
    """PROFILER when the job writes profiler output, else CLOUDWATCH; None while AUTO still waits for the first file."""
    if settings.source == "PROFILER":
        return "PROFILER"
    if settings.source == "CLOUDWATCH" or store is None:
        return "CLOUDWATCH"
    if next(store.list("system/"), None) is not None:
        return "PROFILER"
    if description.get("TrainingJobStatus") in TERMINAL:
        return "CLOUDWATCH"
    training_since = training_started(description)
    if training_since is not None and now - training_since > AUTO_WAIT_FOR_PROFILER_S:
        return "CLOUDWATCH"
    return None


def training_started(description: dict[str, Any]) -> float | None:
    """When the job's containers started running the training code: the start of its first ``Training`` secondary
    status (None while it is still starting, downloading or waiting for spot capacity)."""
    for transition in description.get("SecondaryStatusTransitions") or []:
        if isinstance(transition, dict) and transition.get("Status") == "Training":
            return _epoch(transition.get("StartTime"))
    return None


@dataclass
class JobRun:
    job: str
    evaluator: Evaluator
    state: dict[str, Any]
    final: bool = False
    complete: bool = True
    windows: int = 0


def run_profiler(run: JobRun, store: S3Store, terminal: bool, deadline: float, settings: Settings) -> None:
    state = run.state
    sys_cursor = Cursor.from_state(state.get("system_cursor"))
    fw_cursor = Cursor.from_state(state.get("framework_cursor"))
    listing = list_new_files(store, sys_cursor, fw_cursor)
    ended = terminal or listing.ended
    outcome = feed(run.evaluator, store, listing, final=ended, deadline=deadline, read_workers=settings.read_workers)
    sys_cursor.advance(outcome.system_consumed)
    fw_cursor.advance(outcome.framework_consumed)
    state["system_cursor"] = sys_cursor.to_state()
    state["framework_cursor"] = fw_cursor.to_state()
    run.windows = outcome.windows
    run.complete = outcome.complete
    # A job that ended without writing any profiler data is final too: its rules say "not applicable".
    run.final = ended and outcome.complete and (run.evaluator.origin_us is not None or terminal)


def run_cloudwatch(run: JobRun, description: dict[str, Any], clients: Clients, terminal: bool, now: float) -> None:
    state = run.state
    evaluator = run.evaluator
    resources = description.get("ResourceConfig") or {}
    groups = resources.get("InstanceGroups") or []
    count = int(resources.get("InstanceCount") or sum(int(g.get("InstanceCount", 0)) for g in groups) or 1)
    instance_type = resources.get("InstanceType") or (groups[0].get("InstanceType") if groups else None)
    plans = cloudwatch.hosts_for(description["TrainingJobName"], count, instance_type)
    started = _epoch(description.get("TrainingStartTime")) or _epoch(description.get("CreationTime")) or now
    origin_minute = int(started // 60 * 60)
    through = int(state.get("cloudwatch_through", origin_minute - 60))
    ended_at = _epoch(description.get("TrainingEndTime"))
    limit = (ended_at + 60) if (terminal and ended_at) else now - cloudwatch.PERIOD_S - CLOUDWATCH_DELAY_S
    last_minute = int(limit // 60 * 60)
    if evaluator.origin_us is None:
        evaluator.set_origin(origin_minute * 1_000_000)
    if last_minute > through:
        data = cloudwatch.fetch(clients.cloudwatch, plans, through + 60, last_minute + 60)
        files = cloudwatch.minute_files(description["TrainingJobName"], plans, data)
        for file, records in files:
            evaluator.add_system_records(file, records)
            evaluator.stats.files += 1
            evaluator.stats.records += len(records)
        if files:
            evaluator.note_listing(max(f.timestamp_us for f, _ in files), None)
        state["cloudwatch_through"] = last_minute
    ended = terminal and (ended_at is None or last_minute >= int(ended_at // 60 * 60))
    run.windows = evaluator.process(system_through_us=math.inf, framework_through_us=math.inf, ended=ended)
    for rule_run in evaluator.runs:
        for rule in rule_run.rules:
            if isinstance(rule, MaxInitializationTime):
                rule.apply_status_transitions(description.get("SecondaryStatusTransitions") or [], now)
    run.final = ended


def new_evaluator(configs: list[RuleConfig], source: str) -> Evaluator:
    evaluator = Evaluator(configs)
    if source == "CLOUDWATCH":
        for rule_run in evaluator.runs:
            for rule in rule_run.rules:
                rule.use_cloudwatch(PROFILER_SECONDS_PER_SAMPLE, cloudwatch.PERIOD_S)
    return evaluator


def write_reports(s3: Any, bucket: str, base: str, results: list[RuleResult], evaluator: Evaluator, job: str,
                  source_label: str) -> None:
    diagnostics = evaluator.diagnostics()
    for result in results:
        folder = f"{base}/{result.configuration_name}/{REPORT_FOLDER}"
        for relative, text in report_files([result]).items():
            s3.put_object(Bucket=bucket, Key=f"{folder}/{relative}", Body=text.encode(), ContentType="application/json")
        s3.put_object(Bucket=bucket, Key=f"{folder}/{SUMMARY_NAME}",
                      Body=json.dumps(summary([result], diagnostics), indent=2).encode(), ContentType="application/json")
        html = render([result], evaluator.timeline, diagnostics, title=f"{result.configuration_name} for {job}",
                      source=source_label)
        s3.put_object(Bucket=bucket, Key=f"{folder}/{HTML_NAME}", Body=html.encode(), ContentType="text/html")


def evaluate_job(job: str, settings: Settings, clients: Clients, deadline: float, now: float | None = None
                 ) -> dict[str, Any]:
    now = time.time() if now is None else now
    description = clients.sagemaker.describe_training_job(TrainingJobName=job)
    terminal = description.get("TrainingJobStatus") in TERMINAL
    bucket, prefix = split_s3_uri(description["OutputDataConfig"]["S3OutputPath"])
    base = f"{prefix.strip('/')}/{job}/rule-output".lstrip("/")
    state_store = S3StateStore(clients.s3, bucket, f"{base}/{STATE_FILE}")
    state, etag = state_store.load()
    pending = bool(state and (state.get("outbox") or state.get("reports_due")))
    if state and state.get("final") and not pending:
        return {"job": job, "result": "already final"}
    store = profiler_store(description, clients.s3, settings.profiler_s3_uri)
    if state:
        source = state["source"]
        evaluator = Evaluator.from_state(state["evaluator"])
    else:
        source = choose_source(settings, description, store, now)
        if source is None:
            return {"job": job, "result": "waiting for profiler output"}
        evaluator = new_evaluator(configs_for(description, settings), source)
        state = {"version": 1, "job": job, "source": source, "published": {}}
    run = JobRun(job, evaluator, state)
    if state.get("final"):
        run.final = True  # only the side effects of the last committed run are left to do
    elif source == "PROFILER":
        if store is None:
            raise ValueError(f"{job}: SOURCE=PROFILER but neither the job's ProfilerConfig.S3OutputPath nor the "
                             "evaluator's PROFILER_S3_URI says where its profiler files are")
        run_profiler(run, store, terminal, deadline, settings)
    else:
        run_cloudwatch(run, description, clients, terminal, now)
    source_label = store.describe() if source == "PROFILER" and store is not None else cloudwatch.source_label(job)

    results = evaluator.results(final=run.final)
    # Deterministic time of the data the statuses rest on, so a retried run repeats the same event.
    data_time = (evaluator.origin_us or 0) / 1e6 + evaluator.windows_evaluated * evaluator.scan_us / 1e6
    published: dict[str, str] = state.setdefault("published", {})
    changed = []
    for result in results:
        if published.get(result.configuration_name) != result.status:
            changed.append(result.to_status(last_modified=_iso(data_time)))
            published[result.configuration_name] = result.status
    # Outbox: the events and reports this state owes are committed with it, then delivered. A run that loses the race
    # to a concurrent one therefore leaves no side effect behind, and a crash after the commit is made good by the next
    # run (events at least once, identical when repeated).
    outbox: list[dict[str, Any]] = [*state.get("outbox", []), *changed]
    reports_due = bool(run.windows or run.final or etag is None or state.get("reports_due"))
    state.update(evaluator=evaluator.to_state(), final=run.final, outbox=outbox, reports_due=reports_due)
    try:
        etag = state_store.save(state, etag)
    except ConcurrentUpdateError as exc:
        LOG.warning("%s: %s; the other run's state stands", job, exc)
        return {"job": job, "result": "conflict"}
    if reports_due:
        write_reports(clients.s3, bucket, base, results, evaluator, job, source_label)
        emit_emf(emf_lines(job, results, settings.namespace))
    if outbox:
        put_events(clients.events, [status_change_event(job, description["TrainingJobArn"], outbox, settings.event_bus)])
    if outbox or reports_due:
        state.update(outbox=[], reports_due=False)
        try:
            state_store.save(state, etag)
        except ConcurrentUpdateError as exc:  # a newer run took over; it delivers what it still finds owed
            LOG.warning("%s: %s after delivering; the newer run's state stands", job, exc)
    if not run.complete:
        put_events(clients.events, [continuation_event(job, settings.event_bus)])
    return {"job": job, "result": "final" if run.final else "in progress", "windows": run.windows,
            "statuses": {r.configuration_name: r.status for r in results}, "published": len(outbox)}


def handler(event: dict[str, Any], context: Any, *, clients: Clients | None = None,
            settings: Settings | None = None) -> dict[str, Any]:
    settings = settings or Settings.from_env()
    clients = clients or Clients()
    remaining = context.get_remaining_time_in_millis() / 1000 if context is not None else 900.0
    deadline = time.monotonic() + max(remaining - settings.safety_margin_s, 1.0)
    outcomes = []
    failed = []
    for job in jobs_for_event(event, settings, clients):
        if time.monotonic() > deadline:
            put_events(clients.events, [continuation_event(job, settings.event_bus)])
            outcomes.append({"job": job, "result": "deferred"})
            continue
        try:
            outcomes.append(evaluate_job(job, settings, clients, deadline))
        except Exception as exc:  # one job's failure must not starve the others; the invocation still fails
            LOG.exception("evaluation of %s failed", job)
            failed.append(f"{job}: {type(exc).__name__}: {exc}")
            outcomes.append({"job": job, "result": "failed"})
    LOG.info(json.dumps({"outcomes": outcomes}))
    if failed:
        raise RuntimeError("evaluation failed for " + "; ".join(failed))
    return {"jobs": outcomes}
