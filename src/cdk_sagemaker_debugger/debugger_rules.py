"""Debugger (tensor) rules: ``debugger_rules.LossNotDecreasing(num_steps=20)``, ``debugger_rules.Rule.custom(...)``.

The 21 built-in rule classes are generated from the catalog in ``model/rules/debugger_catalog.py``. Actions and collections
are importable from here too, so one import covers a rule's whole configuration.
"""

from .model.actions import SMS, Action, ActionList, Email, StopTraining
from .model.debug_hook import CollectionConfig
from .model.rules.debugger import (
    DEBUGGER_RULE_SPECS,
    RULE_CLASSES,
    BuiltinRule,
    CustomRule,
    Rule,
    RulePermissions,
    RuleScope,
    from_name,
)

globals().update(RULE_CLASSES)

__all__ = [
    "Rule",
    "BuiltinRule",
    "CustomRule",
    "RuleScope",
    "RulePermissions",
    "DEBUGGER_RULE_SPECS",
    "from_name",
    "Action",
    "ActionList",
    "Email",
    "SMS",
    "StopTraining",
    "CollectionConfig",
    *RULE_CLASSES,
]
