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


#: The modules that take longest (real torchrun jobs, servers, property tests, full synths), longest first. make test
#: runs modules whole on each worker (--dist loadscope) in collection order, so these start first and the short ones
#: fill in around them, instead of one long module starting last and running alone.
LONGEST_FIRST = (
    "tests/runtime/test_health_scenarios.py",
    "tests/runtime/tensors/test_tensor_distributed.py",
    "tests/runtime/rule_alarm/test_rule_alarm_properties.py",
    "tests/runtime/evaluator/test_mlflow_export.py",
    "tests/runtime/evaluator/test_evaluator_race.py",
    "tests/test_reference_app.py",
    "tests/runtime/tensors/test_tensor_scenarios.py",
    "tests/toolkit/test_toolkit_run.py",
    "tests/test_benchmarks.py",
    "tests/test_dist.py",
    "tests/runtime/sampler/test_sampler_container.py",
    "tests/runtime/evaluator/test_evaluator_rules.py",
    "tests/runtime/evaluator/test_evaluator_lambda_versions.py",
    "tests/runtime/evaluator/test_evaluator_queue.py",
    "tests/test_docs.py",
    "tests/model/test_sdk_parity.py",
    "tests/test_cli.py",
    "tests/test_state_machine_interpreter.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules of :data:`LONGEST_FIRST` first, in that order; every other module after them, as collected."""
    rank = {module: position for position, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
