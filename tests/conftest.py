"""Shared fixtures. Importing ``stacks`` first points jsii at a supported Node.js before aws_cdk loads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import DATA

import stacks  # noqa: F401


@pytest.fixture(scope="session")
def sdk_profiler_data() -> dict[str, Any]:
    return json.loads((DATA / "sdk_profiler_rules.json").read_text())
