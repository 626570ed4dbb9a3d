"""Actions a built-in or custom debugger rule container runs when its rule fires.

The rule container reads them from the ``action_json`` rule parameter. That value has a peculiar format: a JSON-like
text in which every quote is written as backslash + quote (``{\\"name\\": \\"email\\"}``). The container strips the
backslashes, lowercases the whole text and parses it. :meth:`Action.serialize` reproduces the SageMaker Python SDK's
text byte for byte, key order included, so a job configured here behaves like one configured with the SDK.

Differences from the SDK, on purpose:

* Email addresses follow real address syntax (dots, plus tags, subdomains, hyphens) instead of the SDK's
  ``^[a-z0-9]+@\\w+\\.\\w{2,3}$``, which rejects most real addresses.
* Phone numbers are E.164: ``+`` and 1 to 15 digits, the first non-zero.
* Every action, not just ``StopTraining``, accepts :meth:`Action.with_job_prefix` (the SDK crashes at ``fit()`` when a
  single ``Email`` or ``SMS`` is passed as a rule's actions).
* Objects are immutable: filling in the job prefix returns a copy, so one action list can be shared by many rules and
  jobs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import ClassVar

from .errors import ConfigurationError, ConfigurationTypeError

__all__ = [
    "Action",
    "ActionList",
    "Email",
    "SMS",
    "StopTraining",
    "ACTION_JSON_MAX_LENGTH",
    "check_actions",
    "profiler_rule_actions_error",
]

#: The API's limit on any RuleParameters value (``ConfigValue``), which ``action_json`` is.
ACTION_JSON_MAX_LENGTH = 256

#: SageMaker training job names are at most 63 characters, so a longer prefix can never match a job.
_TRAINING_JOB_NAME_MAX_LENGTH = 63

# RFC 5322 "dot-atom" local part: atoms of these characters joined by single dots. None of them needs escaping in
# action_json, and none is a quote or a backslash, which would break the container's parsing.
_LOCAL_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_DOMAIN_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_TOP_LEVEL_DOMAIN = r"(?:[A-Za-z]{2,63}|(?i:xn--)[A-Za-z0-9-]{1,59})"
_EMAIL_PATTERN = re.compile(rf"{_LOCAL_ATOM}(?:\.{_LOCAL_ATOM})*@(?:{_DOMAIN_LABEL}\.)+{_TOP_LEVEL_DOMAIN}")
_EMAIL_LOCAL_PART_MAX_LENGTH = 64
_EMAIL_MAX_LENGTH = 254

_E164_PATTERN = re.compile(r"\+[1-9][0-9]{0,14}")
_JOB_PREFIX_PATTERN = re.compile(r"[A-Za-z0-9-]+")


def _is_unresolved_token(value: str) -> bool:
    """True for a CDK string token such as ``${Token[TOKEN.12]}``; its value is only known at deploy time."""
    return "${Token[" in value


def _require_str(value: object, *, where: str, field_name: str, example: str) -> str:
    if not isinstance(value, str):
        raise ConfigurationTypeError(
            f"expected a string such as {example!r}, got {type(value).__name__} {value!r}.",
            where=where,
            field=field_name,
            value=value,
        )
    return value


def _validate_email(address: object) -> str:
    address = _require_str(address, where="Email", field_name="address", example="ml-team@example.com")
    if _is_unresolved_token(address):
        return address
    local_part = address.rpartition("@")[0]
    if (
        len(address) > _EMAIL_MAX_LENGTH
        or len(local_part) > _EMAIL_LOCAL_PART_MAX_LENGTH
        or not _EMAIL_PATTERN.fullmatch(address)
    ):
        raise ConfigurationError(
            f"{address!r} is not a valid email address. Use 'name@domain.tld' without spaces or quotes, "
            "for example 'first.last+alerts@ml.example.com'.",
            where="Email",
            field="address",
            value=address,
        )
    return address


def _validate_phone_number(phone_number: object) -> str:
    phone_number = _require_str(phone_number, where="SMS", field_name="phone_number", example="+15555550100")
    if _is_unresolved_token(phone_number):
        return phone_number
    if not _E164_PATTERN.fullmatch(phone_number):
        raise ConfigurationError(
            f"{phone_number!r} is not an E.164 phone number. Write '+', the country code and the number as 1 to 15 "
            "digits without spaces or dashes, the first digit not 0, for example '+15555550100'.",
            where="SMS",
            field="phone_number",
            value=phone_number,
        )
    return phone_number


def _validate_job_prefix(prefix: object, *, field_name: str) -> str:
    prefix = _require_str(prefix, where="StopTraining", field_name=field_name, example="my-training-job")
    if _is_unresolved_token(prefix):
        return prefix
    if not _JOB_PREFIX_PATTERN.fullmatch(prefix):
        raise ConfigurationError(
            f"{prefix!r} is not a valid training job name prefix: use only letters, digits and hyphens "
            "(training job names allow nothing else).",
            where="StopTraining",
            field=field_name,
            value=prefix,
        )
    if len(prefix) > _TRAINING_JOB_NAME_MAX_LENGTH:
        raise ConfigurationError(
            f"the prefix is {len(prefix)} characters long, but training job names are at most "
            f"{_TRAINING_JOB_NAME_MAX_LENGTH}, so it could never match a job. Shorten it.",
            where="StopTraining",
            field=field_name,
            value=prefix,
        )
    return prefix


def _serialize_pairs(pairs: Iterable[tuple[str, str]]) -> str:
    # The SDK writes each pair as \"key\": \"value\" with no escaping of the value; validation keeps values safe.
    return "{" + ", ".join(f'\\"{key}\\": \\"{value}\\"' for key, value in pairs) + "}"


class Action:
    """One action run by the rule container when the rule fires. Use :class:`Email`, :class:`SMS` or
    :class:`StopTraining`. Instances are immutable and compare by value."""

    __slots__ = ()

    #: The action's name in ``action_json`` (the SDK's lowercased class name).
    action_name: ClassVar[str]
    #: True when the action publishes to the ``SMDebugRules`` SNS topic.
    notifies: ClassVar[bool] = False
    #: True when the action stops training jobs.
    stops_training: ClassVar[bool] = False

    def parameters(self) -> tuple[tuple[str, str], ...]:
        """The ``(key, value)`` pairs in the order the SDK writes them."""
        raise NotImplementedError

    def serialize(self) -> str:
        """The action as the SDK's ``action_json`` text: ``{\\"key\\": \\"value\\", ...}``."""
        return _serialize_pairs(self.parameters())

    def to_dict(self) -> dict[str, str]:
        """The action as the container reads it, after it has stripped the backslashes."""
        return dict(self.parameters())

    def with_job_prefix(self, job_name_prefix: str) -> Action:
        """A copy with the training-job prefix filled in where the action needs one and the user gave none."""
        return self

    def __iter__(self) -> Iterator[Action]:
        # Lets callers treat a single action and an ActionList alike.
        yield self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; create a new one instead of setting {name!r}.")

    def _init_field(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.parameters() == self.parameters()  # type: ignore[union-attr]

    def __hash__(self) -> int:
        return hash((type(self), self.parameters()))


class _Notification(Action):
    """An action that publishes ``endpoint`` to the ``SMDebugRules`` SNS topic."""

    __slots__ = ("endpoint",)
    endpoint: str
    notifies: ClassVar[bool] = True

    def parameters(self) -> tuple[tuple[str, str], ...]:
        return (("endpoint", self.endpoint), ("name", self.action_name))

    @property
    def subscriber(self) -> str:
        """The endpoint as SNS tells subscribers apart: two actions with the same subscriber are one subscription
        (SNS would deliver every notification to it twice)."""
        return self.endpoint


class Email(_Notification):
    """Send an email through the ``SMDebugRules`` SNS topic when the rule fires.

    The address must confirm the SNS subscription before mail arrives. The container lowercases the address.
    """

    __slots__ = ()
    action_name: ClassVar[str] = "email"

    def __init__(self, address: str) -> None:
        self._init_field("endpoint", _validate_email(address))

    @property
    def address(self) -> str:
        return self.endpoint

    @property
    def subscriber(self) -> str:
        """The address with its domain in lower case: SNS compares e-mail domains case-insensitively, so
        ``a@example.com`` and ``a@EXAMPLE.COM`` are one subscriber (the local part is kept as given)."""
        local, at, domain = self.endpoint.rpartition("@")
        return f"{local}{at}{domain.lower()}" if at else self.endpoint

    def __repr__(self) -> str:
        return f"Email({self.endpoint!r})"


class SMS(_Notification):
    """Send a text message through the ``SMDebugRules`` SNS topic when the rule fires (E.164 number)."""

    __slots__ = ()
    action_name: ClassVar[str] = "sms"

    def __init__(self, phone_number: str) -> None:
        self._init_field("endpoint", _validate_phone_number(phone_number))

    @property
    def phone_number(self) -> str:
        return self.endpoint

    def __repr__(self) -> str:
        return f"SMS({self.endpoint!r})"


class StopTraining(Action):
    """Stop the training job when the rule fires.

    The container stops the one in-progress job whose name contains ``training_job_prefix``; if several match it
    stops none. Without a prefix, the rule's job fills in its job-name prefix (:meth:`with_job_prefix`).
    """

    __slots__ = ("training_job_prefix", "_prefix_from_job")
    training_job_prefix: str | None
    action_name: ClassVar[str] = "stoptraining"
    stops_training: ClassVar[bool] = True

    def __init__(self, training_job_prefix: str | None = None) -> None:
        if training_job_prefix is not None:
            _validate_job_prefix(training_job_prefix, field_name="training_job_prefix")
        self._init_field("training_job_prefix", training_job_prefix)
        # True once the prefix came from the job rather than the user; the SDK's key order differs.
        self._init_field("_prefix_from_job", False)

    @property
    def needs_job_prefix(self) -> bool:
        """True while no prefix is known; the rule's job must supply one before the action is rendered."""
        return self.training_job_prefix is None

    def parameters(self) -> tuple[tuple[str, str], ...]:
        if self.training_job_prefix is None:
            return (("name", self.action_name),)
        if self._prefix_from_job:
            # The SDK creates the action without a prefix and appends the job name at fit time.
            return (("name", self.action_name), ("training_job_prefix", self.training_job_prefix))
        return (("training_job_prefix", self.training_job_prefix), ("name", self.action_name))

    def with_job_prefix(self, job_name_prefix: str) -> StopTraining:
        if self.training_job_prefix is not None:
            return self
        filled = StopTraining(_validate_job_prefix(job_name_prefix, field_name="job_name_prefix"))
        filled._init_field("_prefix_from_job", True)
        return filled

    def __repr__(self) -> str:
        if self.training_job_prefix is None:
            return "StopTraining()"
        if self._prefix_from_job:
            return f"StopTraining().with_job_prefix({self.training_job_prefix!r})"
        return f"StopTraining({self.training_job_prefix!r})"


class ActionList:
    """Several actions for one rule, serialized as ``[{...}, {...}]``."""

    __slots__ = ("_actions",)

    def __init__(self, *actions: Action) -> None:
        for position, action in enumerate(actions):
            if not isinstance(action, Action):
                raise ConfigurationTypeError(
                    f"item {position} is {type(action).__name__} {action!r}; pass Email(...), SMS(...) or "
                    "StopTraining(...) objects as separate arguments, e.g. ActionList(StopTraining(), Email('a@b.com')).",
                    where="ActionList",
                    field="actions",
                    value=action,
                )
        self._actions: tuple[Action, ...] = tuple(actions)

    @property
    def actions(self) -> tuple[Action, ...]:
        return self._actions

    def serialize(self) -> str:
        """The list as the SDK's ``action_json`` text."""
        return "[" + ", ".join(action.serialize() for action in self._actions) + "]"

    def to_list(self) -> list[dict[str, str]]:
        """The list as the container reads it."""
        return [action.to_dict() for action in self._actions]

    def with_job_prefix(self, job_name_prefix: str) -> ActionList:
        """A copy in which every :class:`StopTraining` without a prefix gets ``job_name_prefix``."""
        return ActionList(*(action.with_job_prefix(job_name_prefix) for action in self._actions))

    @property
    def notifies(self) -> bool:
        """True when any action publishes to the ``SMDebugRules`` SNS topic."""
        return any(action.notifies for action in self._actions)

    @property
    def stops_training(self) -> bool:
        """True when any action stops training jobs."""
        return any(action.stops_training for action in self._actions)

    def __iter__(self) -> Iterator[Action]:
        return iter(self._actions)

    def __len__(self) -> int:
        return len(self._actions)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActionList) and other._actions == self._actions

    def __hash__(self) -> int:
        return hash(self._actions)

    def __repr__(self) -> str:
        return f"ActionList({', '.join(repr(action) for action in self._actions)})"


def check_actions(actions: object, *, where: str | None = None) -> Action | ActionList | None:
    """Return ``actions`` if it is an :class:`Action`, an :class:`ActionList` or None; raise a clear error otherwise."""
    if actions is None or isinstance(actions, (Action, ActionList)):
        return actions
    hint = " Wrap the items as ActionList(*items)." if isinstance(actions, (list, tuple)) else ""
    raise ConfigurationTypeError(
        f"expected an Action (Email, SMS, StopTraining) or an ActionList, got {type(actions).__name__}.{hint}",
        where=where,
        field="actions",
        value=actions,
    )


def profiler_rule_actions_error(*, where: str | None = None) -> ConfigurationError:
    """The error to raise when actions are attached to a profiler rule: the service only runs them for debugger rules."""
    return ConfigurationError(
        "SageMaker runs Email, SMS and StopTraining actions only for debugger (tensor) rules; profiler rules ignore "
        "them. Remove actions= and watch the rule with RuleAlarm, which notifies and can stop the job when a "
        "profiler rule reports an issue.",
        where=where,
        field="actions",
    )
