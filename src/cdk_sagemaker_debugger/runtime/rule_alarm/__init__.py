"""RuleAlarm runtime: turns rule-status changes of SageMaker training jobs into one notification (and at most one
StopTrainingJob call) per (job, rule, status) transition.

Shipped as a Lambda asset rooted at ``runtime/``, so inside Lambda this folder is the top-level package
``rule_alarm`` and the handler is ``rule_alarm.handler.handler``. Standard library and boto3 only.
"""
