"""The tensor rules of one job: read the collector's step files once, combine each step, judge the steps in order.

A step is judged once every process that records has written it or a later step (or the job ended), so the partial sums
of FSDP shards are complete when a rule sees them. Its whole state is JSON, so the Lambda continues where it stopped.
"""

from __future__ import annotations

import math
from typing import Any

from .activation_rules import (
    CheckInputImages,
    DeadRelu,
    NLPSequenceRatio,
    PoorWeightInitialization,
    SaturatedActivation,
)
from .engine import (
    STATUS_ERROR,
    STATUS_IN_PROGRESS,
    STATUS_ISSUES,
    STATUS_NO_ISSUES,
    VERDICT_NOT_APPLICABLE,
    RuleConfig,
    RuleResult,
    SubRuleResult,
    condition_met_details,
)
from .label_rules import ClassImbalance, Confusion
from .readers import ParseStats
from .rules import RuleConfigError
from .storage import Store
from .tensor_data import combine, parse_step_lines, step_of
from .tensor_rules import (
    AllZero,
    ExplodingTensor,
    TensorRule,
    TensorVariance,
    UnchangedTensor,
    VanishingGradient,
    WeightUpdateRatio,
)

#: The debugger rules the evaluator runs on the tensor collector's files, by rule_to_invoke.
TENSOR_RULES: dict[str, type[TensorRule]] = {cls.name: cls for cls in (
    VanishingGradient, ExplodingTensor, WeightUpdateRatio, AllZero, TensorVariance, UnchangedTensor, DeadRelu,
    SaturatedActivation, PoorWeightInitialization, CheckInputImages, NLPSequenceRatio, ClassImbalance, Confusion)}
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_DETAILS = 20


def is_tensor_rule(config: RuleConfig) -> bool:
    return config.rule_to_invoke in TENSOR_RULES


class TensorRuleRun:
    def __init__(self, config: RuleConfig):
        self.config = config
        self.rule: TensorRule | None = None
        self.failed: str | None = None
        self.first_step: int | None = None
        self.findings: list[str] = []
        self.steps = 0
        try:
            self.rule = TENSOR_RULES[config.rule_to_invoke](config.configuration_name, dict(config.parameters))
        except RuleConfigError as exc:
            self.failed = f"RuleConfigError: {exc}"

    def judge(self, data: Any) -> None:
        if self.rule is None or self.failed or self.first_step is not None:
            return  # Debugger's rules stop at the first step where the condition holds
        try:
            found = self.rule.check(data)
        except RuleConfigError as exc:
            self.failed = f"RuleConfigError: {exc}"
            return
        self.steps += 1
        if found:
            self.first_step, self.findings = data.step, found[:MAX_DETAILS]

    def to_state(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "failed": self.failed, "first_step": self.first_step,
                "findings": self.findings, "steps": self.steps,
                "rule": self.rule.to_state() if self.rule is not None else None}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> TensorRuleRun:
        run = cls(RuleConfig.from_dict(state["config"]))
        run.failed = state.get("failed") or run.failed
        run.first_step, run.findings, run.steps = state.get("first_step"), list(state.get("findings", [])), int(
            state.get("steps", 0))
        if run.rule is not None and state.get("rule"):
            run.rule.load_state(state["rule"])
        return run


class TensorEvaluation:
    def __init__(self, configs: list[RuleConfig]):
        self.runs = [TensorRuleRun(c) for c in configs]
        self.read: list[str] = []  # keys already read (sorted listing: start_after the last one is not enough with
        self.pending: dict[int, list[list[Any]]] = {}  # several sources; kept as a list)
        self.latest: dict[str, int] = {}  # "node/rank" -> newest step written
        self.judged_through = -1
        self.stats = ParseStats()
        self.read_new = False

    # ---- reading
    def update(self, store: Store, *, final: bool) -> None:
        """Read the step files not read before and judge every step that is complete (all of them when final)."""
        read = set(self.read)
        self.read_new = False
        for item in store.list(""):
            if item.key in read:
                continue
            found = step_of(item.key)
            if found is None:
                continue
            (node, rank), step = found
            read.add(item.key)
            self.read_new = True
            if step <= self.judged_through:
                self.stats.note(f"{item.key}: step {step} arrived after later steps were judged; not evaluated")
                continue
            if item.size > MAX_FILE_BYTES:
                self.stats.note(f"{item.key}: {item.size} bytes is over {MAX_FILE_BYTES}; skipped")
                continue
            records = parse_step_lines(store.read(item.key), item.key, self.stats)
            self.stats.files += 1
            self.stats.records += len(records)
            self.pending.setdefault(step, []).append([node, rank, records])
            source = f"{node}/{rank}"
            self.latest[source] = max(self.latest.get(source, -1), step)
        self.read = sorted(read)
        self._judge(final)

    def _judge(self, final: bool) -> None:
        horizon = math.inf if final else min(self.latest.values(), default=-1)
        for step in sorted(self.pending):
            if step > horizon:  # some process has not written this step yet (its files are whole: written, renamed)
                break
            files = [((node, rank), records) for node, rank, records in self.pending.pop(step)]
            data = combine(step, files, self.stats)
            for run in self.runs:
                run.judge(data)
            self.judged_through = step

    # ---- verdicts
    def results(self, final: bool) -> list[RuleResult]:
        return [self._result(run, final) for run in self.runs]

    def _result(self, run: TensorRuleRun, final: bool) -> RuleResult:
        name, invoke = run.config.configuration_name, run.config.rule_to_invoke
        if run.failed:
            return RuleResult(name, invoke, STATUS_ERROR, run.failed, [])
        summary = run.rule.summary if run.rule else ""
        report = {"RuleTriggered": 1 if run.first_step is not None else 0, "Violations": len(run.findings),
                  "Details": run.findings,
                  "Datapoints": run.steps, "FirstStep": run.first_step,
                  "RuleParameters": "\n".join(f"{k}:{v}" for k, v in (run.rule.p if run.rule else {}).items())}
        if run.first_step is not None:
            sub = SubRuleResult(invoke, STATUS_ISSUES, "; ".join(run.findings[:3]), report, summary)
            return RuleResult(name, invoke, STATUS_ISSUES, condition_met_details(invoke, run.first_step), [sub])
        reason = run.rule.finish() if run.rule else None
        if not run.steps:
            reason = "no tensor data: the job recorded no step (is the tensor collector configured and torch used?)"
        verdict = VERDICT_NOT_APPLICABLE if reason else STATUS_NO_ISSUES
        sub = SubRuleResult(invoke, verdict, reason or f"no issue over {run.steps} recorded steps", report, summary)
        if not final:
            return RuleResult(name, invoke, STATUS_IN_PROGRESS, None, [sub])
        return RuleResult(name, invoke, STATUS_NO_ISSUES, f"NotApplicable: {reason}" if reason else None, [sub])

    # ---- persistence
    def to_state(self) -> dict[str, Any]:
        return {"runs": [r.to_state() for r in self.runs], "read": self.read, "latest": self.latest,
                "pending": {str(k): v for k, v in self.pending.items()}, "judged_through": self.judged_through,
                "stats": self.stats.to_dict()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> TensorEvaluation:
        evaluation = cls([])
        evaluation.runs = [TensorRuleRun.from_state(r) for r in state["runs"]]
        evaluation.read = [str(k) for k in state.get("read", [])]
        evaluation.latest = {str(k): int(v) for k, v in dict(state.get("latest", {})).items()}
        evaluation.pending = {int(k): list(v) for k, v in dict(state.get("pending", {})).items()}
        evaluation.judged_through = int(state.get("judged_through", -1))
        return evaluation
