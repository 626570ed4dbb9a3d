"""Moved to ``cdk_sagemaker_debugger.model.rules.profiler``; this name stays importable as the same module."""

import sys

from .rules import profiler as _moved

sys.modules[__name__] = _moved
