"""Moved to ``cdk_sagemaker_debugger.model.rules.debugger``; this name stays importable as the same module."""

import sys

from .rules import debugger as _moved

sys.modules[__name__] = _moved
