"""Construct layer: CDK L3 constructs built on the model layer.

Lives inside the package (not a top-level ``constructs/``) because a top-level ``constructs`` package would shadow the
CDK's own ``constructs`` library.
"""
