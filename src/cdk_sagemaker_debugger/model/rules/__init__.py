"""The rule catalogs of the model layer, one concept per module, on one parameter vocabulary (``parameters.py``).

- ``parameters``: ``Param``, what a rule parameter may be, and its validation (every rule kind uses it).
- ``base``: what profiler and debugger rule configurations share (name, output, limits, custom-rule fields).
- ``profiler_catalog`` / ``profiler``: the built-in profiler rules as data, and the rule classes.
- ``health``: the training-health rules on the sampler's output (RuleEvaluator only).
- ``metric``: the training-health rules on the job's algorithm metrics (RuleEvaluator only).
- ``debugger_catalog`` / ``debugger``: the built-in Debugger (tensor) rules as data, and the rule classes.
- ``evaluator_tensor``: which Debugger rules the RuleEvaluator runs on the tensor collector's output.

Users import the rules from ``cdk_sagemaker_debugger.rules`` and ``cdk_sagemaker_debugger.debugger_rules``.
"""
