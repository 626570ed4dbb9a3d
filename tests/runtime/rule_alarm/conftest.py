"""Fixtures for the RuleAlarm runtime tests: one moto mock per module, shared clients, fresh tables per scenario."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from moto import mock_aws
from rule_alarm_world import AwsClients, Harness


@pytest.fixture(scope="module")
def aws() -> Iterator[AwsClients]:
    saved = {
        name: os.environ.get(name) for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")
    }
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    with mock_aws():
        yield AwsClients()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def harness(aws: AwsClients) -> Iterator[Harness]:
    with Harness(aws, settings={"stop_prefix": "exp-"}) as running:
        yield running
