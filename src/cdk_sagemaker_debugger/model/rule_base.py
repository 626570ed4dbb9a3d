"""Moved to ``cdk_sagemaker_debugger.model.rules.base``; this name stays importable as the same module."""

import sys

from .rules import base as _moved

sys.modules[__name__] = _moved
