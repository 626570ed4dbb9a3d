"""Every reference stack by name: ``app.py`` synthesizes all of them; the tests snapshot each one."""

from __future__ import annotations

from collections.abc import Callable

import aws_cdk as cdk

from .alarm_stack import AlarmStack
from .dashboard_stack import DashboardStack
from .debugger_stacks import DebuggerRulesStack
from .evaluator_stack import EvaluatorStack
from .pipeline_stack import PipelineStack
from .training_stacks import (
    ContractStack,
    CustomRuleStack,
    DebuggerContractStack,
    china_contract_stack,
    us_east_1_contract_stack,
)

#: name -> function(app) creating the stack
REFERENCE_STACKS: dict[str, Callable[[cdk.App], cdk.Stack]] = {
    "Training": lambda app: ContractStack(app, "Training"),
    "TrainingUsEast1": us_east_1_contract_stack,
    "TrainingChina": china_contract_stack,
    "TrainingOnDebugger": lambda app: DebuggerContractStack(app, "TrainingOnDebugger"),
    "TrainingCustomRule": lambda app: CustomRuleStack(app, "TrainingCustomRule"),
    "TrainingDebugger": lambda app: DebuggerRulesStack(app, "TrainingDebugger"),
    "Evaluator": lambda app: EvaluatorStack(app, "Evaluator"),
    "Alarm": lambda app: AlarmStack(app, "Alarm"),
    "Pipeline": lambda app: PipelineStack(app, "Pipeline"),
    "Dashboard": lambda app: DashboardStack(app, "Dashboard"),
}


def build_app(app: cdk.App | None = None, *, names: list[str] | None = None, nag: bool = True) -> cdk.App:
    """Add the reference stacks (all, or ``names``) to ``app``, with cdk-nag AwsSolutions checks when ``nag``."""
    app = app or cdk.App()
    for name, factory in REFERENCE_STACKS.items():
        if names is None or name in names:
            factory(app)
    if nag:
        from cdk_nag import AwsSolutionsChecks

        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app
