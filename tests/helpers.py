"""Helpers shared by the tests (importable as ``helpers``: pytest puts tests/ on the path)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
#: The project's shared reference material and fixtures (laid beside the clone, also in CI).
SHARED = ROOT.parent / "shared"

_ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def scrub(template: Any) -> Any:
    """Replace asset hashes (they change with every edit of a handler or asset) so snapshots stay stable."""
    text = json.dumps(template, sort_keys=True)
    return json.loads(_ASSET_HASH.sub("<asset-hash>", text))
