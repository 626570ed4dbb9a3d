"""Handler configuration, read once from the environment the RuleAlarm construct sets."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from .events import RULE_STATUSES


class SettingsError(ValueError):
    """The function's environment is incomplete or inconsistent (a deployment problem, not an event problem)."""


@dataclass(frozen=True)
class Settings:
    table_name: str
    topic_arn: str
    job_name_prefix: str
    alarm_id: str
    statuses: frozenset[str] = frozenset({"IssuesFound"})
    rule_names: frozenset[str] | None = None  # None: every rule of the job
    stop_prefix: str | None = None  # None: StopTraining is not configured
    event_bus_name: str = "default"
    account_id: str | None = None  # events from other accounts are dropped; None only in tests
    execution_role_arn: str | None = None  # None: any job under the prefix counts as the family's
    known_rules: frozenset[str] | None = None  # rule names evaluator verdicts may carry (None: any)
    max_messages_per_job: int = 25
    transition_ttl_days: int = 90
    watch_ttl_days: int = 35
    lease_margin_seconds: int = 60
    default_lease_seconds: int = 960

    def __post_init__(self) -> None:
        if not self.job_name_prefix:
            raise SettingsError("JOB_NAME_PREFIX must not be empty: the alarm only acts on jobs under a prefix")
        unknown = sorted(self.statuses - RULE_STATUSES)
        if unknown or not self.statuses:
            raise SettingsError(f"STATUSES must be a non-empty subset of {sorted(RULE_STATUSES)}, got {unknown}")
        if self.max_messages_per_job < 1:
            raise SettingsError(f"MAX_MESSAGES_PER_JOB must be at least 1, got {self.max_messages_per_job}")
        if self.stop_prefix is not None and not self.stop_prefix.startswith(self.job_name_prefix):
            raise SettingsError(
                f"STOP_PREFIX {self.stop_prefix!r} must start with JOB_NAME_PREFIX {self.job_name_prefix!r}"
            )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Settings:
        def required(name: str) -> str:
            value = environ.get(name, "")
            if not value:
                raise SettingsError(f"environment variable {name} is not set")
            return value

        def string_list(name: str) -> list[str] | None:
            raw = environ.get(name, "")
            if not raw:
                return None
            try:
                values = json.loads(raw)
            except json.JSONDecodeError as error:
                raise SettingsError(f"{name} must be a JSON list of strings: {error}") from error
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise SettingsError(f"{name} must be a JSON list of strings, got {raw[:200]!r}")
            return values

        statuses = string_list("STATUSES")
        rule_names = string_list("RULE_NAMES")
        known_rules = string_list("KNOWN_RULES")
        return cls(
            table_name=required("TABLE_NAME"),
            topic_arn=required("TOPIC_ARN"),
            job_name_prefix=required("JOB_NAME_PREFIX"),
            alarm_id=required("ALARM_ID"),
            statuses=frozenset(statuses) if statuses is not None else frozenset({"IssuesFound"}),
            rule_names=frozenset(rule_names) if rule_names is not None else None,
            stop_prefix=environ.get("STOP_PREFIX") or None,
            event_bus_name=environ.get("EVENT_BUS_NAME") or "default",
            account_id=environ.get("ACCOUNT_ID") or None,
            execution_role_arn=environ.get("EXECUTION_ROLE_ARN") or None,
            known_rules=frozenset(known_rules) if known_rules is not None else None,
            max_messages_per_job=int(environ.get("MAX_MESSAGES_PER_JOB") or 25),
            transition_ttl_days=int(environ.get("TRANSITION_TTL_DAYS") or 90),
            watch_ttl_days=int(environ.get("WATCH_TTL_DAYS") or 35),
        )
