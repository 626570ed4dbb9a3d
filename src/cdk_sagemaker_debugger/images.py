"""Rule evaluator images by region: ``builtin_rule_image(region)`` and ``custom_rule_image(region)``."""

from .model.errors import UnsupportedRegionError
from .model.images import (
    BUILTIN_RULE_ACCOUNTS,
    CUSTOM_RULE_ACCOUNTS,
    DEBUGGER_UNSUPPORTED_REGIONS,
    builtin_rule_image,
    custom_rule_image,
)

__all__ = [
    "BUILTIN_RULE_ACCOUNTS",
    "CUSTOM_RULE_ACCOUNTS",
    "DEBUGGER_UNSUPPORTED_REGIONS",
    "UnsupportedRegionError",
    "builtin_rule_image",
    "custom_rule_image",
]
