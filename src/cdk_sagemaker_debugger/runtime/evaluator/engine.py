"""The window loop: files stream in once, in time order, and every rule sees each 60-second window exactly once.

The managed rules re-read about seven minutes of files for every window; this engine reads each file once, keeps only
the windows that are still open, and hands each closed window to every configured rule. Its whole state (rule state,
open windows, clock) is JSON, so a Lambda can stop after any window and carry on in the next run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .codec import decode, encode
from .readers import (
    END_MARKERS,
    FrameworkFile,
    ParseStats,
    SystemFile,
    TraceEvent,
    parse_framework_key,
    parse_system_key,
    parse_system_lines,
    parse_trace,
)
from .rules import (
    DATALOADER_PHASES,
    PROFILER_REPORT,
    REPORT_RULES,
    STEP_MARKER,
    Facts,
    ProfilerRule,
    RuleConfigError,
    rule_class,
    split_report_overrides,
)
from .storage import EvaluationInputError, Store
from .timeline import Timeline
from .window import SystemWindow, WindowContext

DEFAULT_SCAN_INTERVAL_US = 60_000_000
FRAMEWORK_LOOKAHEAD_US = 180_000_000  # the reference reader looks 3 minutes past a window for framework files
STATUS_IN_PROGRESS = "InProgress"
STATUS_ISSUES = "IssuesFound"
STATUS_NO_ISSUES = "NoIssuesFound"
STATUS_ERROR = "Error"
VERDICT_NOT_APPLICABLE = "NotApplicable"


@dataclass(frozen=True)
class RuleConfig:
    """One configured rule: what the training job's ProfilerRuleConfigurations entry says."""

    configuration_name: str
    rule_to_invoke: str
    parameters: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_rule_parameters(cls, configuration_name: str, rule_parameters: dict[str, Any]) -> RuleConfig:
        params = dict(rule_parameters)
        invoke = str(params.pop("rule_to_invoke", configuration_name))
        return cls(configuration_name, invoke, params)

    def to_dict(self) -> dict[str, Any]:
        return {"configuration_name": self.configuration_name, "rule_to_invoke": self.rule_to_invoke,
                "parameters": dict(self.parameters)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RuleConfig:
        return cls(data["configuration_name"], data["rule_to_invoke"], dict(data.get("parameters", {})))


@dataclass
class SubRuleResult:
    name: str
    verdict: str  # IssuesFound | NoIssuesFound | NotApplicable
    reason: str
    report: dict[str, Any]
    summary: str


@dataclass
class RuleResult:
    configuration_name: str
    rule_to_invoke: str
    status: str
    status_details: str | None
    rules: list[SubRuleResult]

    def to_status(self, last_modified: str | None = None, rule_evaluation_job_arn: str | None = None) -> dict[str, Any]:
        """Shaped like an element of DescribeTrainingJob's ProfilerRuleEvaluationStatuses."""
        status: dict[str, Any] = {"RuleConfigurationName": self.configuration_name}
        if rule_evaluation_job_arn:
            status["RuleEvaluationJobArn"] = rule_evaluation_job_arn
        status["RuleEvaluationStatus"] = self.status
        if self.status_details:
            status["StatusDetails"] = self.status_details[:1024]
        if last_modified:
            status["LastModifiedTime"] = last_modified
        return status


def condition_met_details(rule: str, step: int) -> str:
    return f"RuleEvaluationConditionMet: Evaluation of the rule {rule} at step {step} resulted in the condition being met\n"


class RuleRun:
    """A configured rule as it runs: ProfilerReport with its eleven sub-rules, or one rule standalone."""

    def __init__(self, config: RuleConfig):
        self.config = config
        if config.rule_to_invoke == PROFILER_REPORT:
            overrides = split_report_overrides(config.parameters)
            self.rules: list[ProfilerRule] = [cls(**overrides.get(cls.name, {})) for cls in REPORT_RULES]
            self.in_report = True
        else:
            self.rules = [rule_class(config.rule_to_invoke)(**config.parameters)]
            self.in_report = False
        self.first_trigger: int | None = None
        self.failed: str | None = None

    def evaluate(self, index: int, start_us: int, end_us: int, origin_us: int, system: SystemWindow,
                 framework: list[TraceEvent], facts: Facts) -> None:
        if self.failed:
            return
        ctx = WindowContext(index, start_us, end_us, origin_us, system, framework, self.in_report)
        for rule in self.rules:
            try:
                fired = rule.evaluate(ctx)
            except Exception as exc:  # a rule bug must not take the other rules down
                self.failed = f"{type(exc).__name__}: {rule.name} failed in window {index}: {exc}"
                return
            if fired and self.first_trigger is None and rule.gap(facts) is None:
                self.first_trigger = index

    def result(self, facts: Facts, windows: int, final: bool) -> RuleResult:
        subs = []
        for rule in self.rules:
            reason = rule.gap(facts)
            if reason:
                subs.append(SubRuleResult(rule.name, VERDICT_NOT_APPLICABLE, reason, rule.report, rule.summary))
            elif rule.triggered():
                subs.append(SubRuleResult(rule.name, STATUS_ISSUES, describe_trigger(rule), rule.report, rule.summary))
            else:
                subs.append(SubRuleResult(rule.name, STATUS_NO_ISSUES, describe_quiet(rule), rule.report, rule.summary))
        name = self.config.rule_to_invoke
        if self.failed:
            return RuleResult(self.config.configuration_name, name, STATUS_ERROR, self.failed, subs)
        issues = any(s.verdict == STATUS_ISSUES for s in subs)
        if issues:
            step = windows if self.in_report else (self.first_trigger if self.first_trigger is not None else windows)
            status, details = STATUS_ISSUES, condition_met_details(name, step)
        elif not final:
            status, details = STATUS_IN_PROGRESS, None
        elif all(s.verdict == VERDICT_NOT_APPLICABLE for s in subs):
            status, details = STATUS_NO_ISSUES, "NotApplicable: " + "; ".join(sorted({s.reason for s in subs}))
        else:
            status, details = STATUS_NO_ISSUES, None
        return RuleResult(self.config.configuration_name, name, status, details, subs)

    def to_state(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "rules": [r.to_state() for r in self.rules],
            "first_trigger": self.first_trigger,
            "failed": self.failed,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RuleRun:
        run = cls(RuleConfig.from_dict(state["config"]))
        for rule, rule_state in zip(run.rules, state["rules"], strict=True):
            rule.load_state(rule_state)
        run.first_trigger = state["first_trigger"]
        run.failed = state["failed"]
        return run


def describe_trigger(rule: ProfilerRule) -> str:
    r = rule.report
    counts = f"condition met in {r['RuleTriggered']} window(s), {r['Violations']} violation(s)"
    try:
        why = rule.explain()
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        why = None
    return f"{why} ({counts})" if why else f"{rule.summary}: {counts} over {r['Datapoints']} datapoints"


def describe_quiet(rule: ProfilerRule) -> str:
    r = rule.report
    if r["RuleTriggered"] == 0 and r["Violations"]:
        return f"{r['Violations']} violation(s) over {r['Datapoints']} datapoints, below the rule's threshold"
    return f"no issue over {r['Datapoints']} datapoints"


def _event_to_state(ev: TraceEvent) -> list[Any]:
    return [ev.phase, ev.name, ev.start_us, ev.end_us, ev.node, ev.args, ev.file_type, list(ev.order)]


def _event_from_state(s: list[Any]) -> TraceEvent:
    return TraceEvent(s[0], s[1], s[2], s[3], s[4], s[5], s[6], tuple(s[7]))


class Evaluator:
    """Window loop over system records and framework events for one or more configured rules."""

    def __init__(self, configs: Iterable[RuleConfig], *, scan_interval_us: int | None = None):
        self.runs = [RuleRun(c) for c in configs]
        if not self.runs:
            raise RuleConfigError("no rule to evaluate")
        if scan_interval_us is None:
            intervals = {int(float(c.parameters.get("scan_interval_us", DEFAULT_SCAN_INTERVAL_US))) for c in configs}
            scan_interval_us = min(intervals) if intervals else DEFAULT_SCAN_INTERVAL_US
        self.scan_us = int(scan_interval_us)
        self.origin_us: int | None = None
        self.next_window = 0
        self.pending_system: dict[int, SystemWindow] = {}
        self.pending_framework: dict[int, list[TraceEvent]] = {}
        self.facts = Facts()
        self.stats = ParseStats()
        self.late_records = 0
        self.early_records = 0
        self.newest_system_us: int | None = None
        self.newest_framework_us: int | None = None
        self.ended = False
        self.timeline = Timeline()

    # ---- clock
    def set_origin(self, first_system_us: int, first_framework_us: int | None = None) -> None:
        """T0: the first system file's minute, or the first framework file's time when that is earlier."""
        if self.origin_us is not None:
            return
        origin = first_system_us
        if first_framework_us and first_framework_us < origin:
            origin = first_framework_us
        self.origin_us = int(origin)

    def note_listing(self, newest_system_us: int | None, newest_framework_us: int | None) -> None:
        if newest_system_us is not None:
            self.newest_system_us = max(self.newest_system_us or 0, newest_system_us)
        if newest_framework_us is not None:
            self.newest_framework_us = max(self.newest_framework_us or 0, newest_framework_us)

    @property
    def latest_us(self) -> int | None:
        """L: the newest system file time, or the newest framework file time when that is earlier."""
        if self.newest_system_us is None:
            return None
        if self.newest_framework_us is not None:
            return min(self.newest_system_us, self.newest_framework_us)
        return self.newest_system_us

    def _window_bounds(self, index: int) -> tuple[int, int]:
        if self.origin_us is None:
            raise RuntimeError("the evaluation has no time origin yet")
        start = self.origin_us + index * self.scan_us
        return start, start + self.scan_us

    # ---- input
    def add_system_records(self, file: SystemFile, records: list[dict[str, Any]]) -> None:
        if self.origin_us is None:
            raise RuntimeError("set_origin() must be called before records are added")
        origin, scan = self.origin_us, self.scan_us
        self.facts.system_records += len(records)
        file_index = max((file.timestamp_us - origin) // scan, 0)
        if file_index >= self.next_window:
            start, end = self._window_bounds(file_index)
            window = self._window(file_index)
            rest = window.add(records, start / 1e6, end / 1e6)
        else:
            rest = records
        if not rest:
            return
        # The few records outside the file's own minute (or exactly on its edges): bucket them one by one.
        buckets: dict[int, list[dict[str, Any]]] = {}
        for r in rest:
            offset = r["Timestamp"] * 1e6 - origin
            if offset < 0:
                self.early_records += 1
                continue
            k = int(offset // scan)
            targets = [k - 1, k] if k > 0 and offset == k * scan else [k]
            for target in targets:
                if target != file_index or file_index < self.next_window:
                    buckets.setdefault(target, []).append(r)
        for k, recs in buckets.items():
            if k < self.next_window:
                self.late_records += len(recs)
            else:
                self._window(k).add(recs)

    def _window(self, k: int) -> SystemWindow:
        window = self.pending_system.get(k)
        if window is None:
            start, end = self._window_bounds(k)
            window = self.pending_system[k] = SystemWindow(k, start, end)
        return window

    def add_framework_events(self, file: FrameworkFile, events: list[TraceEvent]) -> None:
        if self.origin_us is None:
            raise RuntimeError("set_origin() must be called before events are added")
        self.facts.framework_files += 1
        self.facts.framework_events += len(events)
        for ev in events:
            # each event belongs to the one window in which it ends (the reference counts straddlers twice)
            k = max((ev.end_us - self.origin_us) // self.scan_us, 0)
            if k < self.next_window:
                self.late_records += 1
                continue
            self.pending_framework.setdefault(int(k), []).append(ev)

    # ---- the loop
    def process(self, *, system_through_us: float, framework_through_us: float, ended: bool,
                deadline: float | None = None) -> int:
        """Evaluate every window that is complete. Returns how many were evaluated."""
        if self.origin_us is None or self.latest_us is None:
            return 0
        self.ended = self.ended or ended
        done = 0
        while True:
            if deadline is not None and time.monotonic() > deadline:
                break
            k = self.next_window
            start, end = self._window_bounds(k)
            latest = self.latest_us
            if start >= latest:
                break
            if end >= latest and not self.ended:
                break  # the managed rule waits for more data here
            if end > system_through_us:
                break
            if end + FRAMEWORK_LOOKAHEAD_US > framework_through_us:
                break
            self._evaluate_window(k, start, end)
            done += 1
        return done

    def _evaluate_window(self, k: int, start: int, end: int) -> None:
        system = self.pending_system.pop(k, None) or SystemWindow(k, start, end)
        system.finalize()
        framework = self.pending_framework.pop(k, [])
        framework.sort(key=lambda ev: ev.order)
        facts = self.facts
        for node, gpus in system.gpu_util.items():
            facts.gpus.update((node, g) for g in gpus)
        for node, gpus in system.gpu_mem.items():
            facts.gpu_memory.update((node, g) for g in gpus)
        facts.io_wait_records += sum(len(run[3]) for run in system.runs)
        for ev in framework:
            if STEP_MARKER in ev.name:
                facts.step_events += 1
            if ev.phase in DATALOADER_PHASES:
                facts.dataloader_events += 1
        origin = self.origin_us if self.origin_us is not None else start
        for run in self.runs:
            run.evaluate(k, start, end, origin, system, framework, facts)
        self.timeline.add_window(system, framework)
        self.next_window = k + 1

    @property
    def windows_evaluated(self) -> int:
        return self.next_window

    def results(self, *, final: bool) -> list[RuleResult]:
        return [run.result(self.facts, self.next_window, final) for run in self.runs]

    def diagnostics(self) -> dict[str, Any]:
        return {
            "windows": self.next_window,
            "origin_us": self.origin_us,
            "latest_us": self.latest_us,
            "late_records": self.late_records,
            "records_before_origin": self.early_records,
            **self.stats.to_dict(),
        }

    # ---- persistence
    def to_state(self) -> dict[str, Any]:
        return {
            "version": 1,
            "scan_us": self.scan_us,
            "origin_us": self.origin_us,
            "next_window": self.next_window,
            "runs": [encode(r.to_state()) for r in self.runs],
            "pending_system": [w.to_state() for w in self.pending_system.values()],
            "pending_framework": {str(k): [_event_to_state(e) for e in evs] for k, evs in self.pending_framework.items()},
            "facts": self.facts.to_state(),
            "stats": self.stats.to_dict(),
            "late_records": self.late_records,
            "early_records": self.early_records,
            "newest_system_us": self.newest_system_us,
            "newest_framework_us": self.newest_framework_us,
            "ended": self.ended,
            "timeline": self.timeline.to_state(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Evaluator:
        runs = [RuleRun.from_state(decode(r)) for r in state["runs"]]
        ev = cls([r.config for r in runs], scan_interval_us=state["scan_us"])
        ev.runs = runs
        ev.origin_us = state["origin_us"]
        ev.next_window = state["next_window"]
        ev.pending_system = {w["index"]: SystemWindow.from_state(w) for w in state["pending_system"]}
        ev.pending_framework = {int(k): [_event_from_state(e) for e in evs]
                                for k, evs in state["pending_framework"].items()}
        ev.facts = Facts.from_state(state["facts"])
        stats = state["stats"]
        ev.stats = ParseStats(stats["files"], stats["bytes"], stats["records"], stats["bad_lines"], stats["bad_files"],
                              list(stats["problems"]))
        ev.late_records = state["late_records"]
        ev.early_records = state["early_records"]
        ev.newest_system_us = state["newest_system_us"]
        ev.newest_framework_us = state["newest_framework_us"]
        ev.ended = state["ended"]
        ev.timeline = Timeline.from_state(state.get("timeline"))
        return ev


# ---------------------------------------------------------------------------------------------------------------------
# Reading a store: listing with a cursor, prefetching reads, feeding the evaluator in time order.


@dataclass
class Cursor:
    """Which keys under one prefix were consumed: everything up to ``start_after`` plus the ``seen`` keys after it.

    Listing restarts a few minutes behind the newest key, so files that arrive late for another node are still found.
    """

    start_after: str | None = None
    seen: set[str] = field(default_factory=set)

    def to_state(self) -> dict[str, Any]:
        return {"start_after": self.start_after, "seen": sorted(self.seen)}

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> Cursor:
        if not state:
            return cls()
        return cls(state.get("start_after"), set(state.get("seen", [])))

    def advance(self, consumed: list[tuple[int, str]], trailing_us: int = 300_000_000) -> None:
        """``consumed``: (timestamp, key) pairs read in this run, in order."""
        self.seen.update(key for _, key in consumed)
        if not consumed:
            return
        newest = max(ts for ts, _ in consumed)
        keep_from = newest - trailing_us
        behind = sorted(key for ts, key in consumed if ts <= keep_from)
        if behind:
            candidate = behind[-1]
            if self.start_after is None or candidate > self.start_after:
                self.start_after = candidate
        if self.start_after is not None:
            self.seen = {k for k in self.seen if k > self.start_after}


@dataclass
class Listing:
    system: list[SystemFile]
    framework: list[FrameworkFile]
    ended: bool


def list_new_files(store: Store, system_cursor: Cursor, framework_cursor: Cursor) -> Listing:
    system = []
    for obj in store.list("system/", system_cursor.start_after):
        parsed = parse_system_key(obj.key)
        if parsed and obj.key not in system_cursor.seen:
            system.append(parsed)
    framework = []
    for obj in store.list("framework/pevents/", framework_cursor.start_after):
        parsed_fw = parse_framework_key(obj.key)
        if parsed_fw and obj.key not in framework_cursor.seen:
            framework.append(parsed_fw)
    system.sort()
    framework.sort()
    ended = any(store.exists(marker) for marker in END_MARKERS)
    return Listing(system, framework, ended)


def _prefetch(store: Store, keys: list[str], workers: int) -> Iterator[tuple[str, bytes | Exception]]:
    """Read keys in order with a few reads in flight (S3 latency dominates small files)."""
    if workers <= 1:
        for key in keys:
            try:
                yield key, store.read(key)
            except Exception as exc:  # reported per file, never fatal
                yield key, exc
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        inflight: list[tuple[str, Future[bytes]]] = []
        it = iter(keys)
        for key in it:
            inflight.append((key, pool.submit(store.read, key)))
            if len(inflight) >= workers * 2:
                break
        while inflight:
            key, fut = inflight.pop(0)
            try:
                yield key, fut.result()
            except Exception as exc:
                yield key, exc
            nxt = next(it, None)
            if nxt is not None:
                inflight.append((nxt, pool.submit(store.read, nxt)))


@dataclass
class RunOutcome:
    complete: bool  # every listed file was consumed
    windows: int
    system_consumed: list[tuple[int, str]]
    framework_consumed: list[tuple[int, str]]


#: ``progress(files done, files listed, counters so far)``: the counters give bytes and records read for a progress bar.
ProgressCallback = Callable[[int, int, ParseStats], None]


def feed(evaluator: Evaluator, store: Store, listing: Listing, *, final: bool, deadline: float | None = None,
         progress: ProgressCallback | None = None, read_workers: int = 4) -> RunOutcome:
    """Read the listed files in time order into ``evaluator`` and evaluate every window that becomes complete.

    ``final`` says no more files will ever come (a post-hoc run, or training has ended).
    """
    system, framework = listing.system, listing.framework
    evaluator.note_listing(system[-1].timestamp_us if system else None,
                           framework[-1].timestamp_us if framework else None)
    ended = final or listing.ended
    if evaluator.origin_us is None:
        if not system:
            return RunOutcome(True, 0, [], [])
        evaluator.set_origin(system[0].timestamp_us, framework[0].timestamp_us if framework else None)
    latest = evaluator.latest_us
    # Files past L are never analysed (L's own file is the partial last minute), so they are not even read.
    if latest is not None and ended:
        system = [f for f in system if f.timestamp_us <= latest]
    # Interleave: framework files are read up to four minutes ahead of the system clock.
    order: list[tuple[int, int, Any]] = [(f.timestamp_us, 1, f) for f in system]
    order += [(f.timestamp_us - FRAMEWORK_LOOKAHEAD_US - 60_000_000, 0, f) for f in framework]
    order.sort(key=lambda item: (item[0], item[1], item[2].key))
    total = len(order)
    remaining_system = [f.timestamp_us for f in system]
    remaining_framework = [f.timestamp_us for f in framework]
    sys_pos = fw_pos = 0
    no_framework_ever = evaluator.newest_framework_us is None

    def horizons() -> tuple[float, float]:
        if sys_pos < len(remaining_system):
            sys_through: float = remaining_system[sys_pos] - 1
        else:
            sys_through = math.inf if ended else (evaluator.newest_system_us or 0)
        if fw_pos < len(remaining_framework):
            fw_through: float = remaining_framework[fw_pos] - 1
        elif ended or no_framework_ever:
            fw_through = math.inf
        else:
            fw_through = evaluator.newest_framework_us or 0
        return sys_through, fw_through

    consumed_sys: list[tuple[int, str]] = []
    consumed_fw: list[tuple[int, str]] = []
    windows = 0
    stats = evaluator.stats
    complete = True
    for done, (key, data) in enumerate(_prefetch(store, [item[2].key for item in order], read_workers)):
        item = order[done][2]
        if isinstance(data, Exception):
            stats.bad_files += 1
            stats.note(f"{key}: could not be read ({type(data).__name__}: {data})")
        elif isinstance(item, SystemFile):
            evaluator.add_system_records(item, parse_system_lines(data, key, stats))
        else:
            evaluator.add_framework_events(item, parse_trace(data, item, stats))
        if isinstance(item, SystemFile):
            sys_pos += 1
            consumed_sys.append((item.timestamp_us, item.key))
        else:
            fw_pos += 1
            consumed_fw.append((item.timestamp_us, item.key))
        sys_through, fw_through = horizons()
        windows += evaluator.process(system_through_us=sys_through, framework_through_us=fw_through, ended=False)
        if progress:
            progress(done + 1, total, stats)
        if deadline is not None and time.monotonic() > deadline and done + 1 < total:
            complete = False
            break
    sys_through, fw_through = horizons()
    windows += evaluator.process(system_through_us=sys_through, framework_through_us=fw_through,
                                 ended=ended and complete, deadline=deadline)
    return RunOutcome(complete, windows, consumed_sys, consumed_fw)


def evaluate_store(store: Store, configs: Iterable[RuleConfig], *, progress: ProgressCallback | None = None,
                   read_workers: int = 4) -> Evaluator:
    """Evaluate a finished (or still running) job's profiler output in one pass, as the CLI does."""
    evaluator = Evaluator(list(configs))
    listing = list_new_files(store, Cursor(), Cursor())
    if not listing.system:
        if listing.framework:
            raise EvaluationInputError(
                f"{store.describe()}: framework traces but no system metrics (system/incremental/...); the rules "
                "measure time from the first system metrics file, so there is nothing to evaluate"
            )
        raise EvaluationInputError(
            f"{store.describe()}: no profiler output found (expected system/incremental/<hour>/<epoch>.algo-<n>.json "
            "files). Pass the profiler-output/ folder of a training job, or check that the profiler was enabled."
        )
    feed(evaluator, store, listing, final=True, progress=progress, read_workers=read_workers)
    stats = evaluator.stats
    if stats.files == 0 and stats.bad_files:  # every read failed: verdicts on no data would pass for a clean run
        raise EvaluationInputError(
            f"{store.describe()}: none of the {stats.bad_files} profiler files could be read; the first failure: "
            f"{stats.problems[0] if stats.problems else 'unknown'}"
        )
    return evaluator
