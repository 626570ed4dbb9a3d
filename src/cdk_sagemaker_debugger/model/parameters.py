"""Moved to ``cdk_sagemaker_debugger.model.rules.parameters``; this name stays importable as the same module."""

import sys

from .rules import parameters as _moved

sys.modules[__name__] = _moved
