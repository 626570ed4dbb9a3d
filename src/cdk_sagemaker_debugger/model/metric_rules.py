"""Moved to ``cdk_sagemaker_debugger.model.rules.metric``; this name stays importable as the same module."""

import sys

from .rules import metric as _moved

sys.modules[__name__] = _moved
