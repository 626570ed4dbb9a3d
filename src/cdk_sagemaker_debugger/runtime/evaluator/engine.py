"""The window loop: files stream in once, in time order, and every rule sees each 60-second window exactly once.

The managed rules re-read about seven minutes of files for every window; this engine reads each file once, keeps only
the windows that are still open, and hands each closed window to every configured rule. Its whole state (rule state,
open windows, clock) is JSON, so a Lambda can stop after any window and carry on in the next run.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .codec import decode, encode
from .contract_shared import machine_reported
from .progress import Progress
from .readers import (
    FrameworkFile,
    ParseStats,
    SystemFile,
    TraceEvent,
    label_key,
)
from .rules import (
    DATALOADER_PHASES,
    PROFILER_REPORT,
    REPORT_RULES,
    STEP_MARKER,
    Facts,
    ProfilerRule,
    RuleConfigError,
    coerce_parameter,
    rule_class,
    split_report_overrides,
)
from .timeline import Timeline
from .window import IO_COLUMN, SystemWindow, WindowContext, WindowTests, window_tests

DEFAULT_SCAN_INTERVAL_US = 60_000_000
# A window shorter than a second holds at most a few samples and multiplies the per-window work; one longer than a day
# leaves most jobs without a single complete window.
MIN_SCAN_INTERVAL_US = 1_000_000
MAX_SCAN_INTERVAL_US = 86_400_000_000
# Runs of empty windows longer than this (a gap in the data, or a file named with a far-off time) are jumped over.
MAX_EMPTY_RUN_US = 600_000_000
# Records further than this from their file's minute belong to no window the managed rules would read them in.
MAX_RECORD_DRIFT_US = 300_000_000
# No instance has more than 16 GPUs; LoadBalancing compares every pair of a node's GPUs.
MAX_GPUS_PER_NODE = 64
# A node whose newest system record is this far behind the newest of another node is reported as silent.
SILENT_NODE_S = 300.0
FRAMEWORK_LOOKAHEAD_US = 180_000_000  # the reference reader looks 3 minutes past a window for framework files
# While a job runs, a window closes only once system files 3 minutes past its end have been read: the managed rules
# read +-3 minutes of files around each window, so records filed up to 3 minutes after their own minute count.
SYSTEM_LOOKAHEAD_US = 180_000_000
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
        scan_interval_us(config)  # validated here so that a bad value fails like any other bad parameter
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
                self.failed = f"{type(exc).__name__}: {rule.name} failed in window {index}: {machine_reported(exc)}"
                return
            if fired and self.first_trigger is None and rule.gap(facts) is None:
                self.first_trigger = index

    def observe(self, progress: Progress) -> None:
        """Hand the progress of every rank and node to the rules that judge it (TrainingHang) before a verdict."""
        for rule in self.rules:
            observe = getattr(rule, "observe", None)
            if observe is not None and not self.failed:
                try:
                    observe(progress)
                except Exception as exc:  # a rule bug must not take the other rules down
                    self.failed = f"{type(exc).__name__}: {rule.name} failed: {machine_reported(exc)}"

    def result(self, facts: Facts, windows: int, final: bool) -> RuleResult:
        subs = []
        for rule in self.rules:
            if not self.failed:
                try:
                    rule.settle()
                except Exception as exc:  # as in evaluate(): a rule bug must not take the other rules down
                    self.failed = (f"{type(exc).__name__}: {rule.name} failed summarising its report: "
                                   f"{machine_reported(exc)}")
            reason = rule.gap(facts)
            if reason:
                subs.append(SubRuleResult(rule.name, VERDICT_NOT_APPLICABLE, reason, not_applicable_report(rule.report),
                                          rule.summary))
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
    def broken(cls, config: RuleConfig, reason: str) -> RuleRun:
        """A configured rule that cannot run (bad name or parameter): it reports Error with the reason."""
        run = cls.__new__(cls)
        run.config, run.rules, run.in_report, run.first_trigger, run.failed = config, [], False, None, reason
        return run

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RuleRun:
        config = RuleConfig.from_dict(state["config"])
        if state["failed"] and not state["rules"]:
            return cls.broken(config, state["failed"])
        run = cls(config)
        for rule, rule_state in zip(run.rules, state["rules"], strict=True):
            rule.load_state(rule_state)
        run.first_trigger = state["first_trigger"]
        run.failed = state["failed"]
        return run


def scan_interval_us(config: RuleConfig) -> int:
    """The configured window length, validated: a whole number of microseconds from 1 s to 1 day."""
    raw = config.parameters.get("scan_interval_us", DEFAULT_SCAN_INTERVAL_US)
    value = coerce_parameter(raw)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if (not isinstance(value, int) or isinstance(value, bool)
            or not MIN_SCAN_INTERVAL_US <= value <= MAX_SCAN_INTERVAL_US):
        raise RuleConfigError(
            f"{config.configuration_name}: scan_interval_us={raw!r} is not usable; it must be a whole number of "
            f"microseconds from {MIN_SCAN_INTERVAL_US:,} (1 s) to {MAX_SCAN_INTERVAL_US:,} (1 day). The default, "
            f"{DEFAULT_SCAN_INTERVAL_US:,} (60 s), is what the managed rules use.")
    return value


def not_applicable_report(report: dict[str, Any]) -> dict[str, Any]:
    """The report of a rule that cannot judge the job: what it counted on data the job never produced is no finding,
    so ``RuleTriggered`` and ``Violations`` are 0 (MaxInitializationTime without framework traces counted a
    violation per window and wrote ``RuleTriggered`` 9 next to the verdict NotApplicable)."""
    return {**report, "RuleTriggered": 0, "Violations": 0}


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
    """Window loop over system records and framework events for one or more configured rules.

    ``strict`` (the CLI): a configured rule with a bad name or parameter raises ``RuleConfigError``. Not strict (the
    Lambda, whose rules come from a job it cannot change): that configured rule reports Error with the reason, and
    the others are evaluated.
    """

    def __init__(self, configs: Iterable[RuleConfig], *, scan_interval_us: int | None = None, strict: bool = True):
        configs = list(configs)
        if not configs and strict:  # the Lambda may run metric rules only (metric_rules.py): then no profiler rule
            raise RuleConfigError("no rule to evaluate")
        self.runs = [_rule_run(c, strict) for c in configs]
        if scan_interval_us is None:
            scan_interval_us = _one_scan_interval(self.runs, strict)
        self.scan_us = int(scan_interval_us)
        self.window_tests = _window_tests(self.runs)
        self.origin_us: int | None = None
        self.next_window = 0
        self.pending_system: dict[int, SystemWindow] = {}
        self.pending_framework: dict[int, list[TraceEvent]] = {}
        self.facts = Facts()
        self.stats = ParseStats()
        self.late_records = 0
        self.early_records = 0
        self.misplaced_records = 0
        self._misplaced: dict[SystemFile, int] = {}
        self._late: dict[str, int] = {}  # records and events that came too late for their window, per file
        self.skipped_windows = 0
        self.newest_system_us: int | None = None
        self.newest_framework_us: int | None = None
        self.ended = False
        self.out_of_time = False  # the last process() stopped at its deadline with windows left to evaluate
        self.timeline = Timeline()
        self.progress = Progress()

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
        """L: the newest system file time; while the job runs, the newest framework file time when that is earlier.

        The managed rules keep the minimum after the job ended too, so when framework traces stop early (profiling
        only some steps) the system metrics after the last trace are never evaluated. Here, once the job has ended,
        the windows run to the end of the system metrics.
        """
        if self.newest_system_us is None:
            return None
        if self.newest_framework_us is not None and not self.ended:
            return min(self.newest_system_us, self.newest_framework_us)
        return self.newest_system_us

    def _window_bounds(self, index: int) -> tuple[int, int]:
        if self.origin_us is None:
            raise RuntimeError("the evaluation has no time origin yet")
        start = self.origin_us + index * self.scan_us
        return start, start + self.scan_us

    # ---- input
    def add_system_records(self, file: SystemFile, records: list[dict[str, Any]]) -> None:
        """Add decoded records of ``file`` (all of it or one chunk of it, in file order)."""
        if self.origin_us is None:
            raise RuntimeError("set_origin() must be called before records are added")
        origin, scan = self.origin_us, self.scan_us
        self.progress.add_system(file.node, records)
        file_index = max((file.timestamp_us - origin) // scan, 0)
        rest = records
        if file_index >= self.next_window:
            start, end = self._window_bounds(file_index)
            before = len(records)
            rest = self._window(file_index).add(records, start / 1e6, end / 1e6)
            self.facts.system_records += before - len(rest)
        if rest:
            self._add_outside(file, file_index, rest)

    def _add_outside(self, file: SystemFile, file_index: int, rest: list[dict[str, Any]]) -> None:
        """The few records outside the file's own window (or exactly on its edges): bucketed one by one."""
        origin, scan = self.origin_us or 0, self.scan_us
        low, high = file.timestamp_us - MAX_RECORD_DRIFT_US, file.timestamp_us + 60_000_000 + MAX_RECORD_DRIFT_US
        buckets: dict[int, list[dict[str, Any]]] = {}
        misplaced = 0
        for r in rest:
            ts_us = r["Timestamp"] * 1e6
            if not low <= ts_us <= high:
                misplaced += 1
                continue
            offset = ts_us - origin
            if offset < 0:
                self.early_records += 1
                continue
            k = int(offset // scan)
            self.facts.system_records += 1
            for target in ([k - 1, k] if k > 0 and offset == k * scan else [k]):
                if target != file_index or file_index < self.next_window:
                    buckets.setdefault(target, []).append(r)
        for k, recs in buckets.items():
            if k < self.next_window:
                self.late_records += len(recs)
                self._late[file.key] = self._late.get(file.key, 0) + len(recs)
            else:
                self._window(k).add(recs)
        if misplaced:
            self.misplaced_records += misplaced
            self.stats.bad_lines += misplaced
            self._misplaced[file] = self._misplaced.get(file, 0) + misplaced

    def flush_problems(self) -> None:
        """Report the misplaced records of the files read so far, one problem per file (they arrive by chunks)."""
        for file, count in self._misplaced.items():
            self.stats.note(f"{label_key(file.key)}: skipped {count} record(s) whose Timestamp is more than "
                            f"{MAX_RECORD_DRIFT_US // 60_000_000} minutes away from the file's minute "
                            f"({iso_us(file.timestamp_us)}); the managed rules never read them either")
        self._misplaced.clear()
        for key, count in self._late.items():
            self.stats.note(f"{label_key(key)}: skipped {count} record(s) or event(s) for windows already evaluated (more than "
                            f"{SYSTEM_LOOKAHEAD_US // 60_000_000} minutes behind the file's minute); not evaluated")
        self._late.clear()

    def _window(self, k: int) -> SystemWindow:
        window = self.pending_system.get(k)
        if window is None:
            start, end = self._window_bounds(k)
            window = self.pending_system[k] = SystemWindow(k, start, end, self.window_tests)
        return window

    def add_framework_events(self, file: FrameworkFile, events: list[TraceEvent]) -> None:
        if self.origin_us is None:
            raise RuntimeError("set_origin() must be called before events are added")
        self.facts.framework_files += 1
        self.facts.framework_events += len(events)
        self.progress.add_events(events)
        for ev in events:
            # each event belongs to the one window in which it ends (the reference counts straddlers twice)
            k = max((ev.end_us - self.origin_us) // self.scan_us, 0)
            if k < self.next_window:
                self.late_records += 1
                self._late[file.key] = self._late.get(file.key, 0) + 1
                continue
            self.pending_framework.setdefault(int(k), []).append(ev)

    # ---- the loop
    def process(self, *, system_through_us: float, framework_through_us: float, ended: bool,
                deadline: float | None = None) -> int:
        """Evaluate every window that is complete, until ``deadline`` (``time.monotonic()``). Returns how many were
        evaluated; ``out_of_time`` says whether complete windows were left for the next run."""
        self.out_of_time = False
        if self.origin_us is None or self.latest_us is None:
            return 0
        self.ended = self.ended or ended
        horizon = (system_through_us, framework_through_us)
        done = 0
        while self._closable(self.next_window, horizon):
            if deadline is not None and time.monotonic() > deadline:
                self.out_of_time = True
                break
            k = self.next_window
            if self._jump_empty_run(k, horizon):
                continue
            start, end = self._window_bounds(k)
            self._evaluate_window(k, start, end)
            done += 1
        return done

    def _closable(self, k: int, horizon: tuple[float, float]) -> bool:
        """Whether window k has all its data (what the managed rule's wait_for_data waits for)."""
        start, end = self._window_bounds(k)
        latest = self.latest_us
        if latest is None or start >= latest:
            return False
        if end >= latest and not self.ended:
            return False  # the managed rule waits for more data here
        return end + SYSTEM_LOOKAHEAD_US <= horizon[0] and end + FRAMEWORK_LOOKAHEAD_US <= horizon[1]

    def _jump_empty_run(self, k: int, horizon: tuple[float, float]) -> bool:
        """Jump over a long run of windows without any data, from k to the next window with data (or to the first
        window that is not complete yet). Short runs are evaluated window by window, as the managed rules do."""
        if k in self.pending_system or k in self.pending_framework:
            return False
        ahead = [j for j in (*self.pending_system, *self.pending_framework) if j > k]
        target = min(ahead) if ahead else self._first_open_window(k, horizon)
        if (target - k) * self.scan_us <= MAX_EMPTY_RUN_US:
            return False
        self.next_window = target
        self.skipped_windows += target - k
        start, _ = self._window_bounds(k)
        end, _ = self._window_bounds(target)
        self.stats.note(f"no data from {iso_us(start)} to {iso_us(end)}: {target - k} empty window(s) skipped, "
                        "not evaluated (a gap in the profiler output, or a file named with a far-off time)")
        return True

    def _first_open_window(self, k: int, horizon: tuple[float, float]) -> int:
        """The first window from k on that cannot be closed yet (closability only ever turns false)."""
        step = 1
        while self._closable(k + step, horizon):
            step *= 2
        low, high = k + step // 2, k + step  # closable(low) (or low == k), not closable(high)
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if self._closable(mid, horizon) else (low, mid)
        return high

    def _cap_gpus(self, system: SystemWindow) -> None:
        """At most MAX_GPUS_PER_NODE GPU series per node (the first ones seen): the pairwise LoadBalancing test is
        quadratic in them, so a file naming thousands of "GPUs" would stall every run."""
        for series in (system.gpu_util, system.gpu_mem):
            for node, gpus in series.items():
                if len(gpus) <= MAX_GPUS_PER_NODE:
                    continue
                known = {g for n, g in self.facts.gpus if n == node}
                for gpu in list(gpus):
                    if gpu not in known and len(known) >= MAX_GPUS_PER_NODE:
                        self.stats.bad_lines += len(gpus.pop(gpu))
                        self.stats.note(f"{node}: more than {MAX_GPUS_PER_NODE} GPU names in the system metrics; the "
                                        "records of the GPUs after the first 64 are skipped")
                    else:
                        known.add(gpu)

    def _evaluate_window(self, k: int, start: int, end: int) -> None:
        system = self.pending_system.pop(k, None) or SystemWindow(k, start, end, self.window_tests)
        system.finalize()
        self._cap_gpus(system)
        self.progress.add_window(system)
        framework = self.pending_framework.pop(k, [])
        framework.sort(key=lambda ev: ev.order)
        facts = self.facts
        for node, gpus in system.gpu_util.items():
            facts.gpus.update((node, g) for g in gpus)
        for node, gpus in system.gpu_mem.items():
            facts.gpu_memory.update((node, g) for g in gpus)
        facts.io_wait_records += sum(run[IO_COLUMN][0] for run in system.runs)
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
        self.flush_problems()
        progress = self.progress.with_windows(list(self.pending_system.values()))
        for run in self.runs:
            run.observe(progress)
        self._note_silent_nodes()
        results = [run.result(self.facts, self.next_window, final) for run in self.runs]
        gap = self.input_gap() if final else None
        if gap:
            status, details = gap
            for result in results:
                if result.status not in (STATUS_ERROR, STATUS_ISSUES):
                    result.status, result.status_details = status, details
        return results

    def _note_silent_nodes(self) -> None:
        """A node that stopped writing system metrics while others go on is a problem of the run, reported."""
        newest = self.progress.newest_s()
        for node, last in sorted(self.progress.nodes.items()):
            if newest is not None and newest - last > SILENT_NODE_S:
                self.stats.note(f"{node} stopped writing system metrics at {iso_us(last * 1e6)}, "
                                f"{(newest - last) / 60:.1f} minutes before the newest sample of another node")

    def input_gap(self) -> tuple[str, str] | None:
        """A final verdict the data cannot support: (status, details) that replace NoIssuesFound, or None."""
        facts, stats = self.facts, self.stats
        if facts.system_files and not facts.system_records:
            return STATUS_ERROR, (
                f"EvaluationInputError: none of the {facts.system_files} system metrics file(s) held a usable record "
                f"({stats.bad_lines} damaged line(s), {stats.bad_files} unreadable or invalid file(s)); "
                f"first problem, {machine_reported(stats.problems[0]) if stats.problems else 'none recorded'}")
        if facts.system_records and self.next_window == 0:
            return STATUS_NO_ISSUES, (
                f"NotApplicable: no complete {self.scan_us / 1e6:g}-second window of system metrics was evaluated "
                "(the last, partial minute of a job is never evaluated, as in the managed rules)")
        return None

    def diagnostics(self) -> dict[str, Any]:
        self.flush_problems()
        return {
            "windows": self.next_window,
            "origin_us": self.origin_us,
            "latest_us": self.latest_us,
            "late_records": self.late_records,
            "records_before_origin": self.early_records,
            "misplaced_records": self.misplaced_records,
            "skipped_windows": self.skipped_windows,
            **self.stats.to_dict(),
        }

    # ---- persistence
    def to_state(self) -> dict[str, Any]:
        self.flush_problems()
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
            "misplaced_records": self.misplaced_records,
            "skipped_windows": self.skipped_windows,
            "newest_system_us": self.newest_system_us,
            "newest_framework_us": self.newest_framework_us,
            "ended": self.ended,
            "timeline": self.timeline.to_state(),
            "progress": self.progress.to_state(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Evaluator:
        runs = [RuleRun.from_state(decode(r)) for r in state["runs"]]
        ev = cls([r.config for r in runs], scan_interval_us=state["scan_us"], strict=False)
        ev.runs = runs
        ev.origin_us = state["origin_us"]
        ev.next_window = state["next_window"]
        ev.pending_system = {w["index"]: SystemWindow.from_state(w, ev.window_tests) for w in state["pending_system"]}
        ev.pending_framework = {int(k): [_event_from_state(e) for e in evs]
                                for k, evs in state["pending_framework"].items()}
        ev.facts = Facts.from_state(state["facts"])
        ev.stats = ParseStats.from_dict(state["stats"])
        ev.late_records = state["late_records"]
        ev.early_records = state["early_records"]
        ev.misplaced_records = state.get("misplaced_records", 0)
        ev.skipped_windows = state.get("skipped_windows", 0)
        ev.newest_system_us = state["newest_system_us"]
        ev.newest_framework_us = state["newest_framework_us"]
        ev.ended = state["ended"]
        ev.timeline = Timeline.from_state(state.get("timeline"))
        ev.progress = Progress.from_state(state.get("progress"))
        return ev


def _rule_run(config: RuleConfig, strict: bool) -> RuleRun:
    try:
        return RuleRun(config)
    except RuleConfigError as exc:
        if strict:
            raise
        return RuleRun.broken(config, f"RuleConfigError: {exc}")


def _window_tests(runs: list[RuleRun]) -> WindowTests:
    """The value counts the configured rules read from each closed run of a window (``ProfilerRule.window_tests``)."""
    return window_tests([test for run in runs for rule in run.rules for test in rule.window_tests()])


def _scan_interval(run: RuleRun) -> int:
    return scan_interval_us(run.config)


def _one_scan_interval(runs: list[RuleRun], strict: bool) -> int:
    """The window length of the evaluation: one for all configured rules, because one window loop feeds them all.

    Rules configured with different ``scan_interval_us`` values cannot share it; evaluating one at another's interval
    would change its per-window counts without saying so. Strict (the CLI): refused, naming each value. Otherwise
    (the Lambda): the first usable configured rule's interval is used, and each rule configured with another one
    reports Error saying so; the others are evaluated."""
    usable = [run for run in runs if not (run.failed and not run.rules)]
    if not usable:
        return DEFAULT_SCAN_INTERVAL_US
    chosen = _scan_interval(usable[0])
    odd = [run for run in usable if _scan_interval(run) != chosen]
    if not odd:
        return chosen
    listed = ", ".join(f"{run.config.configuration_name}={_scan_interval(run):,}" for run in usable)
    fix = "configure the same scan_interval_us for every rule (the default, 60,000,000, is what the managed rules use)"
    if strict:
        raise RuleConfigError(f"the rules have different scan_interval_us values ({listed} us), but one evaluation "
                              f"has one window length: {fix}, or evaluate them in separate runs.")
    for run in odd:
        index = runs.index(run)
        runs[index] = RuleRun.broken(run.config, (
            f"RuleConfigError: {run.config.configuration_name}: scan_interval_us={_scan_interval(run):,} differs from "
            f"{chosen:,} of {usable[0].config.configuration_name}, with which it is evaluated; it was not evaluated "
            f"at another window length. {fix[0].upper()}{fix[1:]}."))
    return chosen


def iso_us(us: float) -> str:  # also the reader's (reading.py)
    try:
        return datetime.fromtimestamp(us / 1e6, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"{us / 1e6:.0f} s since the epoch"


# The store reader moved to reading.py; imports of its names from here keep working (PEP 562).
_MOVED_TO_READING = frozenset({"Cursor", "Listing", "RunOutcome", "evaluate_store", "feed", "list_new_files",
                               "store_problems", "FUTURE_TOLERANCE_US", "MAX_FILE_BYTES", "MAX_ORIGIN_LEAD_US",
                               "PREFETCH_BUDGET_BYTES"})


def __getattr__(name: str) -> Any:
    if name in _MOVED_TO_READING:
        from . import reading

        return getattr(reading, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
