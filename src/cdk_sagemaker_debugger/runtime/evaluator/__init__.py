"""The profiler rule evaluator: readers, the window loop, the rules, reports, and the Lambda entry point.

Standard library and boto3 only; inside Lambda this folder is the top-level package ``evaluator``
(handler ``evaluator.lambda_handler.handler``), so every import here is relative.
"""
