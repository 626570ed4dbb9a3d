"""Handler configuration, read once from the environment the RuleAlarm construct sets."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from .contract_shared import JOB_FAMILY_ENV, AlarmEnvironment, JobFamily
from .events import RULE_STATUSES


class SettingsError(ValueError):
    """The function's environment is incomplete or inconsistent (a deployment problem, not an event problem)."""


@dataclass(frozen=True)
class Settings:
    table_name: str
    topic_arn: str
    family: JobFamily  # which jobs the alarm acts on (the construct's TrainingJobs)
    alarm_id: str
    statuses: frozenset[str] = frozenset({"IssuesFound"})
    rule_names: frozenset[str] | None = None  # None: every rule of the job
    stop_prefix: str | None = None  # None: StopTraining is not configured; "": any job of the family
    event_bus_name: str = "default"
    account_id: str | None = None  # events from other accounts are dropped; None only in tests
    known_rules: frozenset[str] | None = None  # rule names evaluator verdicts may carry (None: any)
    max_messages_per_job: int = 25
    transition_ttl_days: int = 90
    watch_ttl_days: int = 35
    lease_margin_seconds: int = 60
    default_lease_seconds: int = 960

    def __post_init__(self) -> None:
        if not isinstance(self.family, JobFamily):
            raise SettingsError(f"{JOB_FAMILY_ENV} must name the job family the alarm acts on")
        unknown = sorted(self.statuses - RULE_STATUSES)
        if unknown or not self.statuses:
            raise SettingsError(f"STATUSES must be a non-empty subset of {sorted(RULE_STATUSES)}, got {unknown}")
        if self.max_messages_per_job < 1:
            raise SettingsError(f"MAX_MESSAGES_PER_JOB must be at least 1, got {self.max_messages_per_job}")
        if self.stop_prefix is not None and not self.family.name_may_belong(self.stop_prefix):
            raise SettingsError(
                f"STOP_PREFIX {self.stop_prefix!r} must start with the family's prefix {self.family.job_name_prefix!r}"
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

        env = AlarmEnvironment
        try:
            family = JobFamily.from_json(required(JOB_FAMILY_ENV))
        except ValueError as error:
            raise SettingsError(str(error)) from error
        statuses = string_list(env.STATUSES)
        rule_names = string_list(env.RULE_NAMES)
        known_rules = string_list(env.KNOWN_RULES)
        return cls(
            table_name=required(env.TABLE_NAME),
            topic_arn=required(env.TOPIC_ARN),
            family=family,
            alarm_id=required(env.ALARM_ID),
            statuses=frozenset(statuses) if statuses is not None else frozenset({"IssuesFound"}),
            rule_names=frozenset(rule_names) if rule_names is not None else None,
            stop_prefix=environ.get(env.STOP_PREFIX) if environ.get(env.STOP) == "true" else None,
            event_bus_name=environ.get(env.EVENT_BUS_NAME) or "default",
            account_id=environ.get(env.ACCOUNT_ID) or None,
            known_rules=frozenset(known_rules) if known_rules is not None else None,
            max_messages_per_job=int(environ.get(env.MAX_MESSAGES_PER_JOB) or 25),
            transition_ttl_days=int(environ.get(env.TRANSITION_TTL_DAYS) or 90),
            watch_ttl_days=int(environ.get(env.WATCH_TTL_DAYS) or 35),
        )
