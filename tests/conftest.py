"""Shared fixtures. Importing ``stacks`` first points jsii at a supported Node.js before aws_cdk loads."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

import stacks  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
SHARED = ROOT.parent / "shared"
if not SHARED.exists():  # CI lays shared/ beside the clone
    SHARED = Path(os.environ.get("CDK_SAGEMAKER_DEBUGGER_SHARED", ROOT.parent / "shared"))

_ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def scrub(template: Any) -> Any:
    """Replace asset hashes (they change with every edit of a handler or asset) so snapshots stay stable."""
    text = json.dumps(template, sort_keys=True)
    return json.loads(_ASSET_HASH.sub("<asset-hash>", text))


@pytest.fixture(scope="session")
def sdk_profiler_data() -> dict[str, Any]:
    return json.loads((DATA / "sdk_profiler_rules.json").read_text())
