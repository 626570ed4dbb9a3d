"""Debugger (tensor) rules on ``RuleEngine.EVALUATOR``: a binding ``ProfiledTrainingJob`` calls at a few points.

The job's ``debugger_rules`` become members of its rule set (as ``EvaluatorTensorRule``), so the RuleEvaluator
evaluates them and their verdicts flow like the profiler rules'; the collector is configured through the job's
environment and may upload to ``<job>/tensor-output/``. What each rule needs is the model's table
(``model/evaluator_tensor_rules.py``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..model.debugger_request import DebuggerRequest
from ..model.debugger_rules import Rule, RulePermissions
from ..model.errors import ConfigurationError
from ..model.evaluator_tensor_rules import EvaluatorTensorRule, check_evaluator_rule, collector_environment
from ..model.parameters import is_token

_S3_URI = re.compile(r"^s3://(?P<bucket>[^/]+)/?(?P<key>.*)$")


class EvaluatorTensorRules:
    """The evaluator engine's handling of a job's debugger rules."""

    def __init__(self) -> None:
        self.rules: list[Rule] = []
        self._granted = False

    def check(self, job: Any, rules: Sequence[Rule]) -> DebuggerRequest:
        """Raise unless the evaluator runs every rule (the error names the alternative); nothing of Debugger's hook or
        TensorBoard output is sent, so both stay refused."""
        job._refuse_debugger_features(())
        for rule in rules:
            check_evaluator_rule(rule, where=job._where)
        if rules and job.sampler is None:
            raise ConfigurationError(
                "debugger rules on RuleEngine.EVALUATOR need the tensor collector, which ships in the sampler bundle; "
                "keep the default sampler (remove sampler=None) or use RuleEngine.DEBUGGER.",
                where=job._where, field="debugger_rules")
        return DebuggerRequest({}, [], RulePermissions())

    def add(self, job: Any, rules: Sequence[Rule]) -> list[EvaluatorTensorRule]:
        """Put the rules in the job's rule set (created when the job has none); returns what was added."""
        from .rule_set import ProfilerRuleSet

        if not rules:
            return []
        if job.rule_set is None:
            job.rule_set = ProfilerRuleSet(job, "TensorRules")
        added = [job.rule_set.add_rule(EvaluatorTensorRule(rule)) for rule in rules]
        self.rules.extend(rules)
        if getattr(job, "_owned_role", None) is not None:
            self.grant_uploads(job)
        return added

    def environment(self) -> dict[str, str]:
        return collector_environment(self.rules)

    def grant_uploads(self, job: Any) -> None:
        """The collector uploads each run's files to <job>/tensor-output/ with the execution role, as the sampler
        does to profiler-output/."""
        if self._granted or not self.rules or job.sampler_bundle is None:
            return
        self._granted = True
        match = _S3_URI.match(job.profiler_s3_uri) if not is_token(job.profiler_s3_uri) else None
        key = match["key"].strip("/") if match else job.output_prefix
        bucket_arn = f"arn:{job._partition}:s3:::{match['bucket']}" if match else job._output_bucket_arn
        uploads = f"{bucket_arn}/{key + '/' if key else ''}{job.job_name_prefix}-*/tensor-output/*"
        job._allow({"Effect": "Allow", "Action": "s3:PutObject", "Resource": uploads})
        job._acknowledge({f"Resource::{uploads}": "The tensor collector uploads each run's files to "
                          "<job>/tensor-output/, whose job name is generated per run; scoped to this prefix."})
