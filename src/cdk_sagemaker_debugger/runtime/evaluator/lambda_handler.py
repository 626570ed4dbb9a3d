"""Lambda entry point of the RuleEvaluator: ``evaluator.lambda_handler.handler``.

Invoked every minute (evaluates every InProgress job whose name starts with the configured prefix), on each training
job state change to a final status (one last evaluation), and by its own continuation events when a run ran out of
time. Each run reads only files it has not read, evaluates the windows that became complete, writes the reports next
to where the managed rule would, publishes status changes and EMF metrics, then commits its state with a conditional
write. A crash before the commit loses nothing: the next run starts again from the last committed state.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from . import cloudwatch, dispatch, fanout, mlflow_export
from .caps import CapExceeded, Caps, instance_count
from .contract_shared import DEFAULT_NAMESPACE, JOB_FAMILY_ENV, EvaluatorEnvironment, JobFamily, job_tags
from .engine import PROFILER_REPORT, Evaluator, RuleConfig, RuleResult, RuleRun
from .html_report import render
from .lease import LEASE_SUFFIX, Lease
from .metric_rules import MetricEvaluation, is_metric_rule
from .metric_rules import render_html as render_metric_html
from .metric_rules import source_label as metric_source_label
from .publish import continuation_event, emf_lines, emit_emf, put_events, status_change_event
from .reading import Cursor, feed, list_new_files, prepare
from .report import HTML_NAME, SUMMARY_NAME, report_files, summary
from .rules import MaxInitializationTime, epoch_seconds
from .state import ConcurrentUpdateError, DamagedStateError, S3StateStore, state_key
from .storage import S3Store, job_profiler_store, split_s3_uri
from .tensor_evaluation import TensorEvaluation, is_tensor_rule

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
    #: Which jobs are evaluated (the construct's TrainingJobs).
    family: JobFamily
    rules: list[RuleConfig] = field(default_factory=list)
    source: str = "AUTO"
    event_bus: str = "default"
    namespace: str = DEFAULT_NAMESPACE
    safety_margin_s: float = 30.0
    read_workers: int = 4
    #: Where the jobs' profiler files are (``<uri>/<job>/profiler-output/``) when a job has no ProfilerConfig: the
    #: sampler's location, set by the construct. Empty: only a job's own ProfilerConfig counts.
    profiler_s3_uri: str = ""
    #: The queue of job messages (dispatch.py); empty: the invocation evaluates every job itself, one after another.
    queue_url: str = ""
    #: What one job's evaluation may cost (caps.py); past a cap that job's rules report Error.
    caps: Caps = field(default_factory=Caps)
    #: A run whose new system metrics files are more than this many bytes, of more than one node, reads them in node
    #: shards in parallel (fanout.py); 0: never.
    fanout_bytes: int = fanout.FANOUT_BYTES
    #: At most this many bytes of whole nodes' files per shard.
    shard_bytes: int = fanout.SHARD_BYTES

    @property
    def evaluator_id(self) -> str:
        """Names this evaluator's state: a fingerprint of what it evaluates and where it publishes, so two
        evaluators over the same jobs (other rules, another bus) never share a state, and a redeployment with other
        rules starts its jobs afresh rather than continuing the old rules."""
        identity = json.dumps([self.family.to_json(), [r.to_dict() for r in self.rules], self.source, self.event_bus,
                               self.namespace, self.profiler_s3_uri], sort_keys=True)
        return hashlib.sha256(identity.encode()).hexdigest()[:16]

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        names = EvaluatorEnvironment
        if not env.get(JOB_FAMILY_ENV):
            raise ValueError(f"{JOB_FAMILY_ENV} is not set; the evaluator would otherwise read every training job")
        family = JobFamily.from_json(env[JOB_FAMILY_ENV])
        rules = [RuleConfig.from_dict(r) for r in json.loads(env.get(names.RULES, "[]"))]
        source = env.get(names.SOURCE, "AUTO").upper()
        if source not in SOURCES:
            raise ValueError(f"{names.SOURCE}={source!r}; expected one of {', '.join(SOURCES)}")
        return cls(family, rules, source, env.get(names.EVENT_BUS_NAME, "default"),
                   env.get(names.METRIC_NAMESPACE, DEFAULT_NAMESPACE),
                   float(env.get(names.SAFETY_MARGIN_SECONDS, "30")), int(env.get(names.READ_WORKERS, "4")),
                   env.get(names.PROFILER_S3_URI, ""), env.get(names.JOB_QUEUE_URL, ""),
                   fanout_bytes=int(env.get(names.FANOUT_BYTES, fanout.FANOUT_BYTES)),
                   shard_bytes=int(env.get(names.SHARD_BYTES, fanout.SHARD_BYTES)))


class Clients:
    """boto3 clients, created on first use (tests pass stubbed ones)."""

    def __init__(self, **clients: Any):
        self._clients = dict(clients)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._clients:
            import boto3

            service = {"sagemaker": "sagemaker", "s3": "s3", "events": "events", "cloudwatch": "cloudwatch",
                       "ec2": "ec2", "sqs": "sqs"}[name]
            self._clients[name] = boto3.client(service)
        return self._clients[name]


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def jobs_for_event(event: dict[str, Any], settings: Settings, clients: Clients) -> list[str]:
    """Which jobs this invocation may evaluate: those whose name may belong to the family (:func:`evaluate_job`
    checks the rest, tags included, before it reads anything)."""
    family = settings.family
    detail = event.get("detail") if isinstance(event.get("detail"), dict) else {}
    name = detail.get("TrainingJobName") or event.get("TrainingJobName")
    if isinstance(name, str) and name:
        return [name] if family.name_may_belong(name) else []
    jobs: list[str] = []
    kwargs: dict[str, Any] = {"StatusEquals": "InProgress", "MaxResults": 100}
    if family.list_filter:
        kwargs["NameContains"] = family.list_filter
    while True:
        page = clients.sagemaker.list_training_jobs(**kwargs)
        jobs += [j["TrainingJobName"] for j in page.get("TrainingJobSummaries", [])
                 if family.name_may_belong(j["TrainingJobName"])]
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


def tensor_store(description: dict[str, Any], s3: Any, default_uri: str = "") -> S3Store | None:
    """``<uri>/<job>/tensor-output/``, next to the profiler files (the same location rules as profiler_store)."""
    store = profiler_store(description, s3, default_uri)
    if store is None:
        return None
    return S3Store(store.bucket, store.prefix.rstrip("/").rsplit("/", 1)[0] + "/tensor-output", s3)


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
            return epoch_seconds(transition.get("StartTime"))
    return None


@dataclass
class JobRun:
    job: str
    evaluator: Evaluator
    state: dict[str, Any]
    final: bool = False
    complete: bool = True
    windows: int = 0
    restored: bool = False  # continues a committed state (rather than starting afresh)
    results: list[RuleResult] = field(default_factory=list)
    snapshot: dict[str, Any] = field(default_factory=dict)  # the evaluator's state to commit
    reports: list[tuple[str, bytes, str]] | None = None  # rendered when due: written after the commit
    metrics: MetricEvaluation | None = None  # the rules on the job's algorithm metrics (metric_rules.py)
    tensors: TensorEvaluation | None = None  # the tensor rules on the collector's files (tensor_evaluation.py)


def run_profiler(run: JobRun, store: S3Store, terminal: bool, deadline: float, settings: Settings,
                 nodes: int | None = None, fan_out: fanout.Starter | None = None) -> None:
    """Read the job's new profiler files (of its ``nodes`` instances only) and evaluate; CapExceeded past a cap.
    ``fan_out``: how node shards are started when there are many."""
    state = run.state
    sys_cursor = Cursor.from_state(state.get("system_cursor"))
    fw_cursor = Cursor.from_state(state.get("framework_cursor"))
    listing = list_new_files(store, sys_cursor, fw_cursor, nodes=nodes)
    split = fanout.split_listing(listing, fanout_bytes=settings.fanout_bytes,
                                 shard_bytes=settings.shard_bytes) if fan_out is not None else None
    left_for_later = bool(split and split[1])  # a fanned-out run takes a few minutes of files; the rest comes next
    ended = (terminal or listing.ended) and not left_for_later
    prepare(run.evaluator, listing)
    digests = fan_out(run.evaluator, listing, split[0]) if fan_out is not None and split is not None else None
    outcome = feed(run.evaluator, store, listing, final=ended, deadline=deadline, read_workers=settings.read_workers,
                   caps=settings.caps, digests=digests, prepared=True)
    sys_cursor.advance(outcome.system_consumed, versions=outcome.versions)
    fw_cursor.advance(outcome.framework_consumed, versions=outcome.versions)
    # files named in the future are reported once and never read; they must not move the cursors' time
    sys_cursor.seen.update((k, None) for k in outcome.ignored if k.startswith("system/"))
    fw_cursor.seen.update((k, None) for k in outcome.ignored if not k.startswith("system/"))
    state["system_cursor"] = sys_cursor.to_state()
    state["framework_cursor"] = fw_cursor.to_state()
    run.windows = outcome.windows
    run.complete = outcome.complete and not left_for_later
    # A job that ended without writing any profiler data is final too: its rules say "not applicable".
    run.final = ended and outcome.complete and (run.evaluator.origin_us is not None or terminal)


def run_cloudwatch(run: JobRun, description: dict[str, Any], clients: Clients, terminal: bool, now: float,
                   deadline: float | None = None) -> None:
    state = run.state
    evaluator = run.evaluator
    resources = description.get("ResourceConfig") or {}
    groups = resources.get("InstanceGroups") or []
    count = instance_count(description)
    instance_type = resources.get("InstanceType") or (groups[0].get("InstanceType") if groups else None)
    known = cloudwatch.instance_devices(instance_type)[0] is not None
    plans = cloudwatch.hosts_for(description["TrainingJobName"], count, instance_type,
                                 ec2=None if known else clients.ec2)
    started = epoch_seconds(description.get("TrainingStartTime")) or epoch_seconds(description.get("CreationTime")) or now
    origin_minute = int(started // 60 * 60)
    through = int(state.get("cloudwatch_through", origin_minute - 60))
    ended_at = epoch_seconds(description.get("TrainingEndTime"))
    limit = (ended_at + 60) if (terminal and ended_at) else now - cloudwatch.PERIOD_S - CLOUDWATCH_DELAY_S
    last_minute = int(limit // 60 * 60)
    if evaluator.origin_us is None:
        evaluator.set_origin(origin_minute * 1_000_000)
    if last_minute > through:
        data = cloudwatch.fetch(clients.cloudwatch, plans, through + 60, last_minute + 60)
        notes: list[str] = []
        files = cloudwatch.minute_files(description["TrainingJobName"], plans, data, notes)
        for note in notes:
            evaluator.stats.note(note)
        for file, records in files:
            evaluator.add_system_records(file, records)
            evaluator.stats.files += 1
            evaluator.stats.records += len(records)
        if files:
            evaluator.note_listing(max(f.timestamp_us for f, _ in files), None)
        state["cloudwatch_through"] = last_minute
    ended = terminal and (ended_at is None or last_minute >= int(ended_at // 60 * 60))
    run.windows = evaluator.process(system_through_us=math.inf, framework_through_us=math.inf, ended=ended,
                                    deadline=deadline)
    for rule_run in evaluator.runs:
        for rule in rule_run.rules:
            if isinstance(rule, MaxInitializationTime):
                rule.apply_status_transitions(description.get("SecondaryStatusTransitions") or [], now)
    run.complete = not evaluator.out_of_time
    run.final = ended and run.complete


def new_evaluator(configs: list[RuleConfig], source: str) -> Evaluator:
    """A configured rule with a bad name or parameter reports Error with the reason (the job cannot be changed, and
    failing every run would only fill the dead-letter queue); the other rules are evaluated."""
    evaluator = Evaluator(configs, strict=False)
    if source == "CLOUDWATCH":
        for rule_run in evaluator.runs:
            for rule in rule_run.rules:
                rule.use_cloudwatch(PROFILER_SECONDS_PER_SAMPLE, cloudwatch.PERIOD_S)
    return evaluator


def render_reports(base: str, results: list[RuleResult], evaluator: Evaluator, job: str, source_label: str,
                   metrics: MetricEvaluation | None = None) -> list[tuple[str, bytes, str]]:
    """(key, body, content type) of every report object: rendered before the commit, written after it."""
    diagnostics = evaluator.diagnostics()
    reports = []
    metric_rules = {r.config.configuration_name for r in metrics.runs} if metrics is not None else set()
    for result in results:
        folder = f"{base}/{result.configuration_name}/{REPORT_FOLDER}"
        for relative, text in report_files([result]).items():
            reports.append((f"{folder}/{relative}", text.encode(), "application/json"))
        reports.append((f"{folder}/{SUMMARY_NAME}", json.dumps(summary([result], diagnostics), indent=2).encode(),
                        "application/json"))
        title = f"{result.configuration_name} for {job}"
        if metrics is not None and result.configuration_name in metric_rules:
            html = render_metric_html(result, metrics, title=title, source=metric_source_label(job))
        else:
            html = render([result], evaluator.timeline, diagnostics, title=title, source=source_label)
        reports.append((f"{folder}/{HTML_NAME}", html.encode(), "text/html"))
    return reports


def write_reports(s3: Any, bucket: str, reports: list[tuple[str, bytes, str]]) -> None:
    for key, body, content_type in reports:
        s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type)


@dataclass
class StoredState:
    """The job's committed state as this run found it (None: no run has committed yet, or it was damaged)."""

    store: S3StateStore
    state: dict[str, Any] | None
    etag: str | None
    problem: str | None = None  # a damaged state that was set aside

    def set_aside(self, job: str, damaged: DamagedStateError) -> None:
        """Log the damaged object's exact key, copy it aside and start over: the next commit replaces it (If-Match
        on its ETag), so one damaged object never fails every run forever."""
        kept = self.store.quarantine(damaged)
        LOG.error("%s: %s; %s; evaluating the job again from the start", job, damaged,
                  f"copied to {kept}" if kept else "copying it aside failed, so the next commit replaces it")
        self.problem = (f"{damaged}; {f'kept as {kept}' if kept else 'it could not be copied aside'}; the job was "
                        "evaluated again from the start (status events may repeat)")
        self.state = None
        self.etag = damaged.etag

    def restore(self, job: str) -> Evaluator | None:
        """The committed evaluator, or None (no state, or a damaged one, which is then set aside)."""
        if self.state is None:
            return None
        try:
            return restore(self.state, self.store.location, self.etag)
        except DamagedStateError as damaged:
            self.set_aside(job, damaged)
            return None


def open_state(job: str, clients: Clients, bucket: str, key: str) -> StoredState:
    """Load the job's state object; an unreadable one (not gzip, not JSON) is set aside."""
    stored = StoredState(S3StateStore(clients.s3, bucket, key), None, None)
    try:
        stored.state, stored.etag = stored.store.load()
    except DamagedStateError as damaged:
        stored.set_aside(job, damaged)
    return stored


def restore(state: dict[str, Any], location: str, etag: str | None) -> Evaluator:
    """The evaluator of a committed state, checking every part this module reads; DamagedStateError if unusable."""
    try:
        if state.get("source") not in SOURCES[1:]:
            raise ValueError(f"source {state.get('source')!r} is not one of {', '.join(SOURCES[1:])}")
        for name, kind in (("published", dict), ("outbox", list)):
            if not isinstance(state.get(name, kind()), kind):
                raise TypeError(f"{name} is not a JSON {kind.__name__}")
        Cursor.from_state(state.get("system_cursor"))
        Cursor.from_state(state.get("framework_cursor"))
        int(state.get("cloudwatch_through", 0))
        if state.get("metrics") is not None:
            MetricEvaluation.from_state(state["metrics"])
        if state.get("tensors") is not None:
            TensorEvaluation.from_state(state["tensors"])
        return Evaluator.from_state(state["evaluator"])
    except Exception as exc:  # any way of not being our state is damage, reported with the key
        raise DamagedStateError(location, f"{type(exc).__name__}: {exc}", etag) from exc


class ConfigurationError(RuntimeError):
    """The job cannot be evaluated the way the evaluator is configured (not a damaged state)."""


# What evaluating from a state that passed restore() raises when its contents are damaged deep inside.
STATE_SHAPE_ERRORS = (TypeError, KeyError, ValueError, AttributeError, IndexError, ZeroDivisionError, OverflowError)


@dataclass
class JobContext:
    job: str
    description: dict[str, Any]
    terminal: bool
    store: S3Store | None
    now: float
    deadline: float
    fan_out: fanout.Starter | None = None


def job_not_found(exc: BaseException) -> bool:
    """DescribeTrainingJob's answer for a job that does not exist: ValidationException "Requested resource not
    found" (or ResourceNotFound)."""
    error = getattr(exc, "response", None)
    error = error.get("Error", {}) if isinstance(error, dict) else {}
    code, message = str(error.get("Code", "")), str(error.get("Message", "")).lower()
    return code in ("ResourceNotFound", "ResourceNotFoundException") or (
        code == "ValidationException" and ("not found" in message or "could not find" in message))


def family_refusal(job: str, description: dict[str, Any], settings: Settings, clients: Clients) -> str | None:
    """Why the described job is not one of the family's (None when it is): its name, the role it runs as and, where
    tags decide, its tags (read here)."""
    family = settings.family
    tags = job_tags(clients.sagemaker, description["TrainingJobArn"]) if family.needs_tags else None
    role_arn, job_arn = description.get("RoleArn"), description.get("TrainingJobArn")
    return family.refusal(job, tags, role_arn=role_arn, job_arn=job_arn)


#: How many times a run of an ended job starts again from the state another run committed before it.
FINAL_ATTEMPTS = 5
MAX_RUN_S = 900.0  # Lambda's longest invocation: no lease outlives it (plus the commit margin)


def evaluate_job(job: str, settings: Settings, clients: Clients, deadline: float, now: float | None = None
                 ) -> dict[str, Any]:
    """Evaluate one job under its lease. The run of an ended job always ends in its final evaluation: it waits for
    a run that holds the lease, starts again from the state of a run that committed first, and asks for a
    continuation when it runs out of time (so a final evaluation is never lost to a scheduled run in flight)."""
    now = time.time() if now is None else now
    try:
        description = clients.sagemaker.describe_training_job(TrainingJobName=job)
    except Exception as exc:
        if not job_not_found(exc):
            raise
        # an event can name a job that does not exist (deleted, another account's, or made up by whoever can put
        # events on the bus): nothing to evaluate, and no reason to fail the invocation into the dead-letter queue
        LOG.warning("%s: not evaluated: no such training job (%s)", job, exc)
        return {"job": job, "result": "no such job"}
    refusal = family_refusal(job, description, settings, clients)
    if refusal is not None:
        LOG.warning("%s: not evaluated: %s", job, refusal)
        return {"job": job, "result": "not in the family", "reason": refusal}
    bucket, prefix = split_s3_uri(description["OutputDataConfig"]["S3OutputPath"])
    base = f"{prefix.strip('/')}/{job}/rule-output".lstrip("/")
    key = state_key(base, settings.evaluator_id)
    terminal = description.get("TrainingJobStatus") in TERMINAL
    lease = Lease(clients.s3, bucket, key + LEASE_SUFFIX)
    give_up_at = time.time() + min(max(deadline - time.monotonic(), 0.0), MAX_RUN_S)
    until = give_up_at + settings.safety_margin_s
    if not lease.acquire(until):
        if not terminal:
            return {"job": job, "result": "busy", "reason": "another run of this job holds its lease"}
        if not lease.wait(until, give_up_at):
            put_events(clients.events, [continuation_event(job, settings.event_bus)])
            return {"job": job, "result": "deferred", "reason": "another run of this job held its lease"}
    try:
        for _attempt in range(FINAL_ATTEMPTS if terminal else 1):
            outcome = evaluate_held(job, description, settings, clients, (bucket, base, key), deadline, now)
            if outcome["result"] != "conflict" or not terminal:
                return outcome
            LOG.warning("%s: the job ended and another run committed first; evaluating again from its state", job)
            now = time.time()
        put_events(clients.events, [continuation_event(job, settings.event_bus)])
        return outcome
    finally:
        lease.release()


def evaluate_held(job: str, description: dict[str, Any], settings: Settings, clients: Clients,
                  where: tuple[str, str, str], deadline: float, now: float) -> dict[str, Any]:
    """One evaluation of a job whose lease this run holds: read its state, evaluate what is new, commit, deliver."""
    bucket, base, key = where
    stored = open_state(job, clients, bucket, key)
    stored.store.max_bytes = settings.caps.state_bytes
    state = stored.state
    pending = bool(state and (state.get("outbox") or state.get("reports_due")))
    if state and state.get("final") and not pending:
        return {"job": job, "result": "already final"}
    store = profiler_store(description, clients.s3, settings.profiler_s3_uri)
    fan_out = None
    if store is not None and settings.queue_url and settings.fanout_bytes > 0:
        fan_out = fanout.starter(store, s3=clients.s3, sqs=clients.sqs, queue_url=settings.queue_url, job=job,
                                 bucket=bucket, state_key=key, read_workers=settings.read_workers)
    ctx = JobContext(job, description, description.get("TrainingJobStatus") in TERMINAL, store, now, deadline,
                     fan_out)
    while True:
        run = start_run(ctx, stored, settings)
        if run is None:
            return {"job": job, "result": "waiting for profiler output"}
        try:
            advance(run, ctx, settings, clients)
            new_metrics = (run.metrics is not None and run.metrics.read_new) or (
                run.tensors is not None and run.tensors.read_new)
            if run.windows or new_metrics or run.final or not run.restored or run.state.get("reports_due"):
                run.reports = render_reports(base, run.results, run.evaluator, job, _source_label(run, ctx),
                                             run.metrics)
            break
        except CapExceeded as exc:  # this job's data went past a cap: it alone ends in Error
            run = capped_run(ctx, run, settings, str(exc), base)
            break
        except STATE_SHAPE_ERRORS as exc:
            if not run.restored:
                raise  # a fresh evaluation failed: a bug to see, not a state to set aside
            LOG.exception("%s: evaluating from the committed state failed", job)
            stored.set_aside(job, DamagedStateError(stored.store.location, f"evaluating from it raised "
                                                    f"{type(exc).__name__}: {exc}", stored.etag))
    committed = {"published": dict(run.state.get("published", {})), "outbox": list(run.state.get("outbox", []))}
    try:
        return commit_and_deliver(run, stored, description, settings, clients, bucket)
    except CapExceeded as exc:  # the state to commit is over its cap (nothing was written)
        run.state.update(committed)
        return commit_and_deliver(capped_run(ctx, run, settings, str(exc), base), stored, description, settings,
                                  clients, bucket)


def _source_label(run: JobRun, ctx: JobContext) -> str:
    return (ctx.store.describe() if run.state.get("source") == "PROFILER" and ctx.store is not None
            else cloudwatch.source_label(ctx.job))


def capped_run(ctx: JobContext, run: JobRun, settings: Settings, reason: str, base: str) -> JobRun:
    """The run of a job whose data went past a cap (caps.py): every configured rule reports Error with ``reason``,
    and the evaluation is final, so later runs read nothing more of the job. Its state keeps the statuses published
    and owed, what was read before the cap (the counters and problems of the summary), and no data."""
    LOG.warning("%s: %s", ctx.job, reason)
    evaluator = Evaluator([], strict=False)
    evaluator.runs = [RuleRun.broken(config, reason) for config in configs_for(ctx.description, settings)]
    evaluator.stats = run.evaluator.stats
    state = {"version": 1, "job": ctx.job, "source": run.state.get("source") or "PROFILER",
             "published": dict(run.state.get("published", {})), "outbox": list(run.state.get("outbox", [])),
             "capped": reason}
    capped = JobRun(ctx.job, evaluator, state, final=True, restored=run.restored)
    capped.results = evaluator.results(final=True)
    capped.snapshot = evaluator.to_state()
    capped.reports = render_reports(base, capped.results, evaluator, ctx.job, _source_label(run, ctx))
    return capped


def start_run(ctx: JobContext, stored: StoredState, settings: Settings) -> JobRun | None:
    """The run continues the committed state, or starts afresh (None while AUTO still waits for profiler output)."""
    evaluator = stored.restore(ctx.job)
    if stored.state is not None and evaluator is not None:
        run = JobRun(ctx.job, evaluator, stored.state, restored=True)
        run.final = bool(stored.state.get("final"))  # then only the last committed run's side effects are left
        if stored.state.get("metrics") is not None:
            run.metrics = MetricEvaluation.from_state(stored.state["metrics"])
        if stored.state.get("tensors") is not None:
            run.tensors = TensorEvaluation.from_state(stored.state["tensors"])
        return run
    configs = configs_for(ctx.description, settings)
    metric_configs = [c for c in configs if is_metric_rule(c)]
    tensor_configs = [c for c in configs if is_tensor_rule(c)]
    profiler_configs = [c for c in configs if not is_metric_rule(c) and not is_tensor_rule(c)]
    # Metric rules alone need no profiler output: nothing to wait for.
    source = choose_source(settings, ctx.description, ctx.store, ctx.now) if profiler_configs else "CLOUDWATCH"
    if source is None:
        return None
    evaluator = new_evaluator(profiler_configs, source)
    if stored.problem:
        evaluator.stats.note(stored.problem)
    run = JobRun(ctx.job, evaluator, {"version": 1, "job": ctx.job, "source": source, "published": {}})
    run.metrics = MetricEvaluation(metric_configs) if metric_configs else None
    run.tensors = TensorEvaluation(tensor_configs) if tensor_configs else None
    return run


def advance(run: JobRun, ctx: JobContext, settings: Settings, clients: Clients) -> None:
    """Read what is new, evaluate the windows that became complete, and take the results and the state to commit
    (all of which read the restored state, so all of it is where damage inside it shows)."""
    if not run.final:
        if not run.evaluator.runs:  # metric rules only: no profiler or instance metrics to read
            run.final = ctx.terminal
        elif run.state["source"] == "PROFILER":
            if ctx.store is None:
                raise ConfigurationError(f"{ctx.job}: SOURCE=PROFILER but neither the job's ProfilerConfig.S3OutputPath "
                                         "nor the evaluator's PROFILER_S3_URI says where its profiler files are")
            run_profiler(run, ctx.store, ctx.terminal, ctx.deadline, settings, nodes=instance_count(ctx.description),
                         fan_out=ctx.fan_out)
        else:
            run_cloudwatch(run, ctx.description, clients, ctx.terminal, ctx.now, ctx.deadline)
        if run.metrics is not None:
            ended = run.metrics.update(ctx.description, clients.cloudwatch, terminal=ctx.terminal, now=ctx.now)
            run.final = run.final and ended
            run.state["metrics"] = run.metrics.to_state()
        if run.tensors is not None:
            advance_tensors(run, ctx, settings, clients)
    run.results = run.evaluator.results(final=run.final)
    if run.metrics is not None:
        run.results += run.metrics.results(final=run.final)
    if run.tensors is not None:
        run.results += run.tensors.results(final=run.final)
    run.snapshot = run.evaluator.to_state()


def advance_tensors(run: JobRun, ctx: JobContext, settings: Settings, clients: Clients) -> None:
    """Read the collector's new step files; every step is judged once the job ended."""
    store = tensor_store(ctx.description, clients.s3, settings.profiler_s3_uri)
    if store is None:
        raise ConfigurationError(f"{ctx.job}: the job has tensor rules but neither its ProfilerConfig.S3OutputPath nor "
                                 "the evaluator's PROFILER_S3_URI says where its tensor-output/ files are")
    if run.tensors is None:
        return
    run.tensors.update(store, final=ctx.terminal)
    run.state["tensors"] = run.tensors.to_state()


def status_time(run: JobRun, description: dict[str, Any]) -> float:
    """The time the statuses rest on, deterministic so that a retried run repeats the same event: the end of the data
    evaluated; for a job without any (stopped before writing profiler data), the job's own end or last change, never
    the epoch (a status dated 1970-01-01)."""
    evaluator = run.evaluator
    times = []
    if evaluator.origin_us is not None:
        times.append(evaluator.origin_us / 1e6 + evaluator.windows_evaluated * evaluator.scan_us / 1e6)
    if run.metrics is not None and run.metrics.data_time():
        times.append(run.metrics.data_time())
    if times:
        return max(times)
    for name in ("TrainingEndTime", "LastModifiedTime", "TrainingStartTime", "CreationTime"):
        at = epoch_seconds(description.get(name))
        if at:
            return at
    return time.time()


def commit_and_deliver(run: JobRun, stored: StoredState, description: dict[str, Any], settings: Settings,
                       clients: Clients, bucket: str) -> dict[str, Any]:
    """Commit the state with the events and reports it owes (an outbox), then deliver them and clear the outbox."""
    job, state, etag = run.job, run.state, stored.etag
    results = run.results
    data_time = status_time(run, description)
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
    reports_due = run.reports is not None
    state.update(evaluator=run.snapshot, final=run.final, outbox=outbox, reports_due=reports_due)
    try:
        etag = stored.store.save(state, etag)
    except ConcurrentUpdateError as exc:
        LOG.warning("%s: %s; the other run's state stands", job, exc)
        return {"job": job, "result": "conflict"}
    if reports_due:
        write_reports(clients.s3, bucket, run.reports or [])
        emit_emf(emf_lines(job, results, settings.namespace))
        mlflow_note = mlflow_export.deliver(description, results, run.evaluator.windows_evaluated, run.reports or [],
                                            os.environ.get(EvaluatorEnvironment.MLFLOW_TRACKING_SERVER_ARN))
        if mlflow_note and os.environ.get(EvaluatorEnvironment.MLFLOW_TRACKING_SERVER_ARN):
            LOG.warning("%s: verdicts not written to MLflow: %s", job, mlflow_note)
    if outbox:
        put_events(clients.events, [status_change_event(job, description["TrainingJobArn"], outbox, settings.event_bus)])
    if outbox or reports_due:
        state.update(outbox=[], reports_due=False)
        try:
            stored.store.save(state, etag)
        except ConcurrentUpdateError as exc:  # a newer run took over; it delivers what it still finds owed
            LOG.warning("%s: %s after delivering; the newer run's state stands", job, exc)
    if not run.complete:
        put_events(clients.events, [continuation_event(job, settings.event_bus)])
    return {"job": job, "result": "final" if run.final else "in progress", "windows": run.windows,
            "statuses": {r.configuration_name: r.status for r in results}, "published": len(outbox)}


def handler(event: Any, context: Any, *, clients: Clients | None = None,
            settings: Settings | None = None) -> dict[str, Any]:
    if not isinstance(event, dict):  # EventBridge always sends an object; anything else is not ours to act on
        LOG.warning("ignoring an event that is not a JSON object: %.200r", event)
        return {"jobs": [], "ignored": f"the event is a {type(event).__name__}, not an object"}
    settings = settings or Settings.from_env()
    clients = clients or Clients()
    remaining = context.get_remaining_time_in_millis() / 1000 if context is not None else 900.0
    deadline = time.monotonic() + max(remaining - settings.safety_margin_s, 1.0)
    records = dispatch.sqs_records(event)
    if records is not None:  # one job per message: its own invocation
        return dispatch.evaluate_records(records, lambda job: evaluate_job(job, settings, clients, deadline),
                                         lambda shard: fanout.work_on_shards(shard, clients.s3, deadline,
                                                                             settings.read_workers))
    if settings.queue_url:  # list the jobs, queue one message each
        jobs = jobs_for_event(event, settings, clients)
        return {"jobs": dispatch.enqueue(clients.sqs, settings.queue_url, jobs, event, time.time())}
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
