"""Unresolved CDK tokens, recognized without importing aws_cdk (the model layer validates values that may be tokens)."""

from __future__ import annotations

__all__ = ["is_token"]


def is_token(value: object) -> bool:
    """True for unresolved CDK tokens (``${Token[...]}`` strings or the number encodings), without importing aws_cdk."""
    if isinstance(value, str):
        return "${Token[" in value or "#{Token[" in value
    if isinstance(value, float):
        # CDK encodes number tokens as special negative doubles around -1.8881545897087626e+289.
        return value < -1e280
    return False
