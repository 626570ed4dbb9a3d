"""Lambda entry point ``gpu_watch.handler.handler``, invoked every minute by an EventBridge schedule."""

from __future__ import annotations

import os
import time
from typing import Any

import boto3
from botocore.config import Config

from .watch import Settings, emf_line, measure

RETRY_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 4}, connect_timeout=5, read_timeout=15)

_state: dict[str, Any] = {}  # settings and clients, once per Lambda instance


def handler(event: Any, context: Any) -> dict[str, Any]:
    if not _state:
        session = boto3.session.Session()
        _state.update(settings=Settings.from_environment(os.environ),
                      sagemaker=session.client("sagemaker", config=RETRY_CONFIG),
                      cloudwatch=session.client("cloudwatch", config=RETRY_CONFIG))
    settings = _state["settings"]
    measurement = measure(settings, _state["sagemaker"], _state["cloudwatch"])
    print(emf_line(settings, measurement, int(time.time() * 1000)))  # stdout: CloudWatch extracts the metrics
    lowest = measurement.lowest
    return {"trainingHosts": len(measurement.per_gpu), "lowestHost": lowest[0] if lowest else None,
            "lowestGpuUtilization": lowest[1] if lowest else None}
