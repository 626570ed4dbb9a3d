"""The rule engines of a ProfiledTrainingJob, one binding each: ``.evaluator`` (the sampler and the RuleEvaluator,
the default) and ``.debugger`` (SageMaker Debugger's profiler, rules, hook and rule containers). The only place
that asks which engine a job uses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....model.errors import ConfigurationTypeError
from ....model.rule_engine import RuleEngine
from .base import RuleEngineBinding
from .debugger import DebuggerBinding
from .evaluator import EvaluatorBinding

if TYPE_CHECKING:  # pragma: no cover
    from .._parts import JobParts

__all__ = ["RuleEngineBinding", "bind"]

_BINDINGS: dict[RuleEngine, type[RuleEngineBinding]] = {
    RuleEngine.EVALUATOR: EvaluatorBinding,
    RuleEngine.DEBUGGER: DebuggerBinding,
}


def bind(rule_engine: Any, job: JobParts) -> RuleEngineBinding:
    """The binding of ``rule_engine`` to ``job`` (a clear error for anything but a RuleEngine)."""
    if not isinstance(rule_engine, RuleEngine):
        raise ConfigurationTypeError(
            f"expected RuleEngine.EVALUATOR or RuleEngine.DEBUGGER, got {rule_engine!r}.",
            where=job._where, field="rule_engine", value=rule_engine)
    return _BINDINGS[rule_engine](job)
