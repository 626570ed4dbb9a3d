"""Debugger (tensor) rules on ``RuleEngine.EVALUATOR``: the part of the evaluator engine binding that handles them.

The job's ``debugger_rules`` become members of its rule set (as ``EvaluatorTensorRule``), so the RuleEvaluator
evaluates them and their verdicts flow like the profiler rules'; the collector is configured through the job's
environment and may upload to ``<job>/tensor-output/``. What each rule needs is the model's table
(``model/evaluator_tensor_rules.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..model.debugger_rules import Rule
from ..model.errors import ConfigurationError
from ..model.evaluator_tensor_rules import EvaluatorTensorRule, check_evaluator_rule, collector_environment


class EvaluatorTensorRules:
    """The evaluator engine's handling of a job's debugger rules."""

    def __init__(self) -> None:
        self.rules: list[Rule] = []
        self._granted = False

    def check(self, job: Any, rules: Sequence[Rule], refuse_debugger_features: Any) -> None:
        """Raise unless the evaluator runs every rule (the error names the alternative); nothing of Debugger's hook or
        TensorBoard output is sent, so both stay refused (``refuse_debugger_features``, the binding's check)."""
        refuse_debugger_features((), job.debug_hook_setting)
        for rule in rules:
            check_evaluator_rule(rule, where=job._where)
        if rules and job.sampler is None:
            raise ConfigurationError(
                "debugger rules on RuleEngine.EVALUATOR need the tensor collector, which ships in the sampler bundle; "
                "keep the default sampler (remove sampler=None) or use RuleEngine.DEBUGGER.",
                where=job._where, field="debugger_rules")

    def add(self, job: Any, rules: Sequence[Rule]) -> list[EvaluatorTensorRule]:
        """Put the rules in the job's rule set (created when the job has none); returns what was added."""
        from .rule_set import ProfilerRuleSet

        if not rules:
            return []
        if job.rule_set is None:
            job.rule_set = ProfilerRuleSet(job, "TensorRules")
        added = [job.rule_set.add_rule(EvaluatorTensorRule(rule)) for rule in rules]
        self.rules.extend(rules)
        policy = getattr(job, "_policy", None)
        if policy is not None:  # a rule added after the role: grant now
            self.grant_uploads(job, policy)
        return added

    def environment(self) -> dict[str, str]:
        return collector_environment(self.rules)

    def grant_uploads(self, job: Any, policy: Any) -> None:
        """The collector uploads each run's files to <job>/tensor-output/ with the execution role, as the sampler
        does to profiler-output/ (next to it)."""
        if self._granted or not self.rules or job.sampler_bundle is None:
            return
        self._granted = True
        uploads = policy.upload_prefix(f"{job.job_name_prefix}-").rsplit("/profiler-output/*", 1)[0] + "/tensor-output/*"
        policy.allow({"Effect": "Allow", "Action": "s3:PutObject", "Resource": uploads})
        policy.acknowledge({f"Resource::{uploads}": "The tensor collector uploads each run's files to "
                            "<job>/tensor-output/, whose job name is generated per run; scoped to this prefix."})
