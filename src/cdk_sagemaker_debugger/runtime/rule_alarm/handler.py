"""Lambda entry point ``rule_alarm.handler.handler`` for training-job state changes, evaluator status changes and the
every-minute sweep."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import boto3
from botocore.config import Config

from .alarm import RuleAlarmProcessor
from .settings import Settings

# Throttling and transient errors are retried with exponential backoff and jitter by botocore's "standard" mode;
# what still fails is raised, so Lambda's asynchronous retries and then the dead-letter queue keep the event.
RETRY_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 6}, connect_timeout=5, read_timeout=20)

_processor: RuleAlarmProcessor | None = None


def build_processor(environ: Mapping[str, str] | None = None, session: Any = None) -> RuleAlarmProcessor:
    """Create the processor with retrying clients; the settings come from the environment the construct sets."""
    settings = Settings.from_environment(os.environ if environ is None else environ)
    session = session or boto3.session.Session()
    return RuleAlarmProcessor(
        settings,
        sagemaker=session.client("sagemaker", config=RETRY_CONFIG),
        sns=session.client("sns", config=RETRY_CONFIG),
        events=session.client("events", config=RETRY_CONFIG),
        dynamodb=session.client("dynamodb", config=RETRY_CONFIG),
        s3=session.client("s3", config=RETRY_CONFIG),
    )


def handler(event: Any, context: Any) -> dict[str, Any]:
    global _processor
    if _processor is None:  # once per Lambda instance: clients are reused across invocations
        _processor = build_processor()
    return _processor.handle(event, context)
