"""Structured JSON logging: one JSON object per line, so CloudWatch Logs Insights can filter on ``job`` and ``rule``."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

LOGGER_NAME = "rule_alarm"
_MAX_FIELD_CHARS = 2048

# attributes every LogRecord has; anything else was passed through ``extra=`` and belongs in the JSON object
_STANDARD_ATTRIBUTES = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Render a record as a single JSON line with its ``extra`` fields at the top level."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRIBUTES and not key.startswith("_"):
                entry[key] = _bounded(value)
        if record.exc_info and record.exc_info[0] is not None:
            entry["error"] = _bounded(self.formatException(record.exc_info))
        return json.dumps(entry, default=str, ensure_ascii=False)


def _bounded(value: Any) -> Any:
    """Keep one log line readable: long strings (e.g. a huge malformed event) are cut, with the original length noted."""
    if isinstance(value, str) and len(value) > _MAX_FIELD_CHARS:
        return f"{value[:_MAX_FIELD_CHARS]}... [{len(value)} chars]"
    return value


class _StdoutHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stdout`` is at emit time (Lambda's stream, or a test's capture)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stdout

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def get_logger() -> logging.Logger:
    """The package logger, writing JSON lines to stdout (which Lambda forwards to CloudWatch Logs)."""
    logger = logging.getLogger(LOGGER_NAME)
    if not any(isinstance(h.formatter, JsonFormatter) for h in logger.handlers):
        stream = _StdoutHandler()
        stream.setFormatter(JsonFormatter())
        logger.addHandler(stream)
        logger.setLevel(logging.INFO)
        # the Lambda runtime installs its own root handler; propagating would print every line twice
        logger.propagate = False
    return logger
