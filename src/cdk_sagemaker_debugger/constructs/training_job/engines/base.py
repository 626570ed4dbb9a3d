"""RuleEngineBinding: what a rule engine adds to a ProfiledTrainingJob. ``RuleEngine.EVALUATOR`` and
``RuleEngine.DEBUGGER`` resolve to one binding each (like aws-cdk's ``LambdaInsightsVersion._bind``), so the job
itself never asks which engine it runs: it checks its props, renders its request, grants its role and attaches its
evaluator through the binding."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets

from ....model.debugger_rules import Rule
from ....model.metric_rules import MetricRule
from ....model.profiler_rules import ProfilerRule
from ....model.rule_engine import RuleEngine

if TYPE_CHECKING:  # pragma: no cover
    from ...sampler import Sampler
    from .._parts import JobParts
    from ..execution_role import ExecutionPolicy

__all__ = ["RuleEngineBinding"]


class RuleEngineBinding(abc.ABC):
    """One rule engine bound to one job: checks, request members, grants and the evaluator it attaches."""

    #: The engine this binding implements.
    engine: RuleEngine

    def __init__(self, job: JobParts) -> None:
        self._job = job

    # -- checks while the job is built -----------------------------------------------------------------------------
    @abc.abstractmethod
    def profiler(self, given: Any, instance_type: str) -> Any:
        """Debugger's ProfilerConfig for the job: the given one, or the engine's default."""

    def check_rule_set(self, rule_set: Any) -> None:  # noqa: B027 (optional: nothing by default)
        """What the engine needs of the rule set before anything is built."""

    def check_profiler_features(self) -> None:  # noqa: B027 (optional: nothing by default)
        """The profiler features the job uses, once the framework is known."""

    @abc.abstractmethod
    def sampler(self, sampler: Sampler) -> Sampler | None:
        """The in-container sampler the job runs (given a Sampler), or None."""

    @abc.abstractmethod
    def check_metric_rule(self, rule: MetricRule) -> None:
        """A metric rule added to the job's rule set."""

    def check_health_rule(self, rule: ProfilerRule) -> None:
        """A health rule (TrainingHang, Straggler, GPUHealth, DataWait) added to the job's rule set; the evaluator
        runs them, so nothing to check by default."""
        return None

    @abc.abstractmethod
    def add_initial_debugger_rules(self, rules: Sequence[Rule]) -> None:
        """Debugger's rules, hook and TensorBoard output given to the constructor."""

    @abc.abstractmethod
    def add_debugger_rule(self, rule: Rule) -> Rule:
        """A debugger rule added after construction."""

    @property
    def debugger_rules(self) -> tuple[Rule, ...]:
        """The debugger (tensor) rules, in the order they are sent."""
        return ()

    @property
    def debugger_rule_list(self) -> Sequence[Rule]:
        """The job's own list of debugger rules (rules added later appear in it), for the job's family."""
        return ()

    @property
    def debugger_rule_source_assets(self) -> tuple[s3_assets.Asset, ...]:
        """S3 assets made from the custom debugger rules' local source files."""
        return ()

    @property
    def rule_actions_policy(self) -> iam.Policy | None:
        """The execution role's policy for rule actions, or None."""
        return None

    @abc.abstractmethod
    def sampling_interval_ms(self) -> int | None:
        """How often the job's rules get a sample; None when nothing samples (the evaluator then reads CloudWatch
        minutes and rescales the counts itself)."""

    def problems(self) -> list[str]:
        """What is wrong with the job at synth (rules added after construction)."""
        return []

    # -- the request ---------------------------------------------------------------------------------------------------
    @abc.abstractmethod
    def request(self, channels: list[dict[str, Any]], environment: Mapping[str, str] | None, *,
                job_name: str | None) -> tuple[list[dict[str, Any]], Mapping[str, str] | None, dict[str, Any]]:
        """The input channels, the environment and the engine's own request members."""

    # -- grants ---------------------------------------------------------------------------------------------------------
    def written_locations(self) -> list[tuple[str | None, str]]:
        """S3 locations (URI, label) the engine's parts write to, beyond the job's output."""
        return []

    @abc.abstractmethod
    def bind_rule_set(self) -> None:
        """Watch the rule set: what each of its rules needs (now and when added later)."""

    def grant_initial(self, policy: ExecutionPolicy) -> None:  # noqa: B027 (optional: nothing by default)
        """Statements of the execution role this construct creates, before the role exists."""

    def grant_on_role(self, role: iam.Role) -> None:  # noqa: B027 (optional: nothing by default)
        """Grants that need the role itself."""

    def grant_pipeline_runs(self) -> None:  # noqa: B027 (optional: nothing by default)
        """What a pipeline run of the job's request needs beyond the job's own runs."""

    # -- after the state machine --------------------------------------------------------------------------------------
    @abc.abstractmethod
    def attach(self, evaluator: Any) -> Any:
        """The RuleEvaluator that evaluates the job's rules (the given one, or a new one), or None."""

    def rule_report_location(self) -> str | None:
        """Where the engine writes its profiler report, for people reading a dashboard; None when the evaluator's
        own reports are the place to look."""
        return None
