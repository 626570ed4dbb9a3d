"""Moved to ``cdk_sagemaker_debugger.model.request.members``; this name stays importable as the same module."""

import sys

from .request import members as _moved

sys.modules[__name__] = _moved
