"""Runtime layer: Lambda handlers and the rule evaluator. Standard library and boto3 only, never aws_cdk or jsii.

Each subpackage is shipped as a Lambda asset whose root is this folder, so inside Lambda the subpackages are imported as
top-level packages (``rule_alarm.handler``, ``evaluator.lambda_handler``) and must only use relative imports.
"""
