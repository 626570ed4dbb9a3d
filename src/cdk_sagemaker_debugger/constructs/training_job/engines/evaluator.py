"""RuleEngine.EVALUATOR: the sampler in every training container (an input channel and its environment), the
refusals of what needs SageMaker Debugger, and the RuleEvaluator that evaluates the job's rules."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk

from ....model.contract import PIPELINE_JOB_NAME_PREFIX
from ....model.debug_hook import DebugHookConfig
from ....model.debugger_request import resolve_debug_hook
from ....model.debugger_rules import Rule
from ....model.errors import ConfigurationError, ConfigurationTypeError
from ....model.evaluator_tensor_rules import EvaluatorTensorRule
from ....model.health_rules import is_health_rule
from ....model.metric_rules import MetricRule, check_metric_names
from ....model.parameters import is_token
from ....model.profiler_catalog import PROFILER_REPORT, PROFILER_RULE_SPECS
from ....model.profiler_config import ProfilerConfig
from ....model.profiler_rules import ProfilerRule
from ....model.rule_engine import RuleEngine
from ....runtime.sampler import contract as sampler_contract
from ..._tensor_rules import EvaluatorTensorRules
from ...rule_evaluator import RuleEvaluator
from ...sampler import DEFAULT_SAMPLER, Sampler, bundle_object_arn
from .._shared import WARNING_PREFIX
from .base import RuleEngineBinding

__all__ = ["EvaluatorBinding"]


class EvaluatorBinding(RuleEngineBinding):
    """Our own sampler and RuleEvaluator: no Debugger member in the request, so it works in every account."""

    engine = RuleEngine.EVALUATOR

    def __init__(self, job: Any) -> None:
        super().__init__(job)
        #: The debugger rules this engine evaluates from the tensor collector's files (constructs/_tensor_rules.py).
        self._tensor_rules = EvaluatorTensorRules()

    def profiler(self, given: Any, instance_type: str) -> Any:
        """Debugger's profiler is off and never sent: the sampler takes its place; a ProfilerConfig is refused."""
        if given is None:
            return ProfilerConfig(disable_profiler=True)
        raise ConfigurationError(
            "configures SageMaker Debugger's profiler, which RuleEngine.EVALUATOR (the default) does not use. "
            "Set the sampling with sampler=Sampler(interval_millis=...), turn profiling off with sampler=None, or "
            "pass rule_engine=RuleEngine.DEBUGGER in an account that still has Debugger.",
            where=self._job._where, field="profiler", value=given)

    def sampler(self, sampler: Sampler) -> Sampler | None:
        """The sampler, where its containers can start and upload it. Where they cannot, the default sampler steps
        aside with a note; a sampler asked for explicitly is an error."""
        job = self._job
        asked = sampler is not DEFAULT_SAMPLER
        reason = self._sampler_cannot_run()
        if reason is None:
            self._check_sampler_environment()
            return sampler
        if asked:
            raise ConfigurationError(f"the sampler cannot run here: {reason} Pass sampler=None; the rules are then "
                                     "evaluated from SageMaker's CloudWatch metrics.", where=job._where,
                                     field="sampler", value=sampler)
        cdk.Annotations.of(job).add_info(f"No sampler: {reason} The rules are evaluated from SageMaker's CloudWatch "
                                         "metrics.")
        return None

    def _sampler_cannot_run(self) -> str | None:
        if self._job.algorithm_name is not None:
            return ("a SageMaker algorithm accepts only the input channels it declares, and may not run Python with "
                    "PYTHONPATH.")
        if self._job.enable_network_isolation:
            return "with enable_network_isolation=True the container cannot upload to S3."
        return None

    def _check_sampler_environment(self) -> None:
        job = self._job
        for level, note_id, message in Sampler.notes(job._environment,
                                                     job.request_members.algorithm.get("ContainerEntrypoint")):
            if level == "warning":
                cdk.Annotations.of(job).add_warning_v2(f"{WARNING_PREFIX}:{note_id}", message)
            else:
                cdk.Annotations.of(job).add_info(f"Sampler: {message}")
        taken = sorted(k for k in self._job._environment or {} if k in sampler_contract.environment("s3://b"))
        if taken:
            raise ConfigurationError(
                f"{', '.join(taken)} belong to the sampler and are set from sampler=Sampler(...); remove them from "
                "environment= (set CDK_SAGEMAKER_SAMPLER_DISABLED=1 to switch the sampler off in one run).",
                where=self._job._where, field="environment", value=taken)

    def sampling_interval_ms(self) -> int | None:
        """The sampler's interval."""
        return self._job.sampler.interval_millis if self._job.sampler is not None else None

    def check_metric_rule(self, rule: MetricRule) -> None:
        """A metric rule runs on metrics this job's MetricDefinitions produce."""
        job = self._job
        names = [d["Name"] for d in job.request_members.algorithm.get("MetricDefinitions") or ()]
        if not any(is_token(name) for name in names):
            check_metric_names(rule, names, where=job._where)  # type: ignore[arg-type]

    # -- debugger rules from the tensor collector; what needs Debugger itself ------------------------------------------
    def add_initial_debugger_rules(self, rules: Sequence[Rule]) -> None:
        self._tensor_rules.check(self._job, rules, self._refuse_debugger_features)
        self._tensor_rules.add(self._job, rules)

    def add_debugger_rule(self, rule: Rule) -> Rule:
        self._tensor_rules.check(self._job, [rule], self._refuse_debugger_features)
        self._tensor_rules.add(self._job, [rule])
        return rule

    def _refuse_debugger_features(self, rules: Sequence[Rule], debug_hook: DebugHookConfig | bool | None) -> None:
        """Debugger (tensor) rules, the hook and TensorBoard output need SageMaker Debugger itself."""
        for field, used in (("debugger_rules", bool(rules)),
                            ("debug_hook", resolve_debug_hook(debug_hook, bool(rules)) is not None),
                            ("tensorboard", self._job.tensorboard is not None)):
            if used:
                raise ConfigurationError(
                    "needs SageMaker Debugger's hook and rule containers, which RuleEngine.EVALUATOR (the default) "
                    "does not use. Pass rule_engine=RuleEngine.DEBUGGER in an account that still has Debugger (closed "
                    "to new customers since 2026-07-30), or watch training health with CloudWatch metrics the script "
                    "logs instead.", where=self._job._where, field=field)

    def _refuse_custom_rule(self, rule: ProfilerRule) -> None:
        if isinstance(rule, (MetricRule, EvaluatorTensorRule)) or is_health_rule(rule):
            return
        if rule.rule_to_invoke != PROFILER_REPORT and rule.rule_to_invoke not in PROFILER_RULE_SPECS:
            raise ConfigurationError(
                f"custom profiler rule {rule.name!r} runs in Debugger's rule container; RuleEngine.EVALUATOR (the "
                "default) evaluates the built-in rules only. Pass rule_engine=RuleEngine.DEBUGGER for custom rules.",
                where=self._job._where, field="rule_set", value=rule.name)

    # -- the request ---------------------------------------------------------------------------------------------------
    def request(self, channels: list[dict[str, Any]], environment: Mapping[str, str] | None, *,
                job_name: str | None) -> tuple[list[dict[str, Any]], Mapping[str, str] | None, dict[str, Any]]:
        """The sampler's channel and environment; no member of Debugger."""
        job = self._job
        if job.sampler is not None and job.sampler_bundle is not None:
            channels.append(job.sampler.channel(job.sampler_bundle))
            environment = dict(environment or {})
            environment.update(job.sampler.environment(job.sampler_bundle, job.profiler_s3_uri, environment))
            environment.update(self._tensor_rules.environment())
        return channels, environment, {}

    # -- grants ---------------------------------------------------------------------------------------------------------
    def bind_rule_set(self) -> None:
        if self._job.rule_set is not None:
            self._job.rule_set.on_rule_added(self._refuse_custom_rule)

    def grant_initial(self, policy: Any) -> None:
        """SageMaker downloads the bundle with the execution role; the sampler uploads with it, only to
        profiler-output/ of this construct's runs."""
        bundle = self._job.sampler_bundle
        if bundle is None:
            return
        policy.allow({"Effect": "Allow", "Action": "s3:GetObject", "Resource": bundle_object_arn(bundle)})
        uploads = policy.upload_prefix(f"{self._job.job_name_prefix}-")
        policy.allow({"Effect": "Allow", "Action": "s3:PutObject", "Resource": uploads})
        policy.acknowledge({f"Resource::{uploads}": "The sampler uploads each run's profiler files to "
                            "<job>/profiler-output/, whose job name is generated per run; scoped to this prefix."})
        self._tensor_rules.grant_uploads(self._job, policy)

    def grant_pipeline_runs(self) -> None:
        _ = self._pipeline_sampler_uploads

    @functools.cached_property
    def _pipeline_sampler_uploads(self) -> str | None:
        """Once: let the execution role this construct created upload the sampler files of pipeline runs."""
        job = self._job
        policy = job._policy
        if job.sampler_bundle is None or policy.owned_role is None:
            return None
        uploads = policy.upload_prefix(PIPELINE_JOB_NAME_PREFIX)
        policy.allow({"Effect": "Allow", "Action": "s3:PutObject", "Resource": uploads})
        policy.acknowledge({f"Resource::{uploads}": "The sampler of a SageMaker Pipelines run uploads its profiler "
                            "files to <job>/profiler-output/, and Pipelines names each job pipelines-<execution>-"
                            "<step>-..."})
        return uploads

    # -- the evaluator --------------------------------------------------------------------------------------------------
    def attach(self, evaluator: Any) -> Any:
        """The given RuleEvaluator (it must cover this job), or a new one for the job's rule set."""
        job = self._job
        if evaluator is not None:
            if not isinstance(evaluator, RuleEvaluator):
                raise ConfigurationTypeError(f"expected a RuleEvaluator, got {type(evaluator).__name__}.",
                                             where=job._where, field="evaluator", value=evaluator)
            evaluator.check_covers(job.training_jobs, where=job._where)
            return evaluator
        if job.rule_set is None:
            return None
        return RuleEvaluator(job, "Evaluator", training_jobs=job.training_jobs, rules=job.rule_set)
