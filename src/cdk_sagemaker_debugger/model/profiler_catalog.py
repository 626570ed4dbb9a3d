"""Moved to ``cdk_sagemaker_debugger.model.rules.profiler_catalog``; this name stays importable as the same module."""

import sys

from .rules import profiler_catalog as _moved

sys.modules[__name__] = _moved
