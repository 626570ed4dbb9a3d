"""Moved to ``cdk_sagemaker_debugger.model.rules.evaluator_tensor``; this name stays importable as the same module."""

import sys

from .rules import evaluator_tensor as _moved

sys.modules[__name__] = _moved
