"""Moved to ``cdk_sagemaker_debugger.model.request.training``; this name stays importable as the same module."""

import sys

from .request import training as _moved

sys.modules[__name__] = _moved
