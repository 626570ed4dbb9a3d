"""Moved to ``cdk_sagemaker_debugger.model.rules.health``; this name stays importable as the same module."""

import sys

from .rules import health as _moved

sys.modules[__name__] = _moved
