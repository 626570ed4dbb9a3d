"""The DynamoDB ledger: one item per (job, rule, status) transition, claimed with a conditional write, plus the
watched-jobs list the sweep walks.

A transition item goes ``pending`` -> ``done``. The invocation whose conditional write creates it (or takes over a
``pending`` item whose lease ran out because its owner crashed) is the only one that acts, and it records each finished
side effect (stop, publish, announce) before the next, so a successor resumes where the crash happened instead of
repeating everything. Every write after the claim is conditional on still owning the lease.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

PENDING = "pending"
DONE = "done"
WATCHED_PARTITION = "watched"
MESSAGES_SORT_KEY = "messages"  # per job: how many notifications were sent (the cap)
_MAX_SORT_KEY_BYTES = 1024

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


class LeaseLost(RuntimeError):
    """Another invocation took over this transition (ours ran past its lease); stop acting on it."""


@dataclass(frozen=True)
class Transition:
    """What happened, as first recorded; enough to act on it again after a crash without the original event."""

    job_name: str
    rule: str
    status: str
    job_arn: str | None = None
    details: str | None = None
    modified_at: str | None = None  # ISO 8601 UTC
    evaluation_job_arn: str | None = None
    reported_by: str = "SageMaker"

    @property
    def key(self) -> dict[str, str]:
        return transition_key(self.job_name, self.rule, self.status)


@dataclass
class Claim:
    """This invocation owns ``transition`` until ``lease_until_ms``; the progress fields say what is already done."""

    transition: Transition
    owner: str
    lease_until_ms: int
    attempts: int
    stop_outcome: str | None = None
    message_id: str | None = None
    announced: bool = False
    taken_over: bool = False


@dataclass(frozen=True)
class ClaimRefused:
    """Why the conditional write lost: the transition is ``done`` or another live invocation holds it."""

    state: str | None
    owner: str | None = None
    lease_until_ms: int | None = None


@dataclass
class JobLedger:
    """Transition items of one job, read in one query (used by the sweep)."""

    items: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def state_of(self, rule: str, status: str) -> str | None:
        item = self.items.get((rule, status))
        return item.get("state") if item else None

    def pending(self, now_ms: int) -> list[tuple[Transition, bool]]:
        """Pending transitions, each with whether its owner's lease has run out (it crashed, or gave up)."""
        return [
            (transition_from_item(item), int(item.get("lease_until_ms", 0)) < now_ms)
            for item in self.items.values()
            if item.get("state") == PENDING
        ]


def transition_key(job_name: str, rule: str, status: str) -> dict[str, str]:
    """Partition per job, sort key per (status, rule); rule names are free text of up to 256 characters, so overly
    long UTF-8 names are replaced by their digest to stay within DynamoDB's sort-key limit."""
    sort_key = f"transition#{status}#{rule}"
    if len(sort_key.encode("utf-8")) > _MAX_SORT_KEY_BYTES:
        sort_key = f"transition#{status}#sha256:{hashlib.sha256(rule.encode('utf-8')).hexdigest()}"
    return {"pk": f"job#{job_name}", "sk": sort_key}


class Ledger:
    """Conditional writes against the RuleAlarm table (partition key ``pk``, sort key ``sk``, TTL ``expires_at``)."""

    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        clock: Callable[[], float],
        transition_ttl_seconds: int,
        watch_ttl_seconds: int,
    ) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock
        self._transition_ttl = transition_ttl_seconds
        self._watch_ttl = watch_ttl_seconds

    # -- watched jobs -----------------------------------------------------------------------------------------------

    def watch(self, job_name: str) -> None:
        """Record (or refresh) that the sweep must keep checking ``job_name``."""
        now = self._clock()
        self._client.put_item(
            TableName=self._table,
            Item=_serialize(
                {
                    "pk": WATCHED_PARTITION,
                    "sk": job_name,
                    "job": job_name,
                    "last_event_at_ms": int(now * 1000),
                    "expires_at": int(now) + self._watch_ttl,
                }
            ),
        )

    def unwatch(self, job_name: str) -> None:
        self._client.delete_item(TableName=self._table, Key=_serialize({"pk": WATCHED_PARTITION, "sk": job_name}))

    def watched_jobs(self) -> list[str]:
        return [item["sk"] for item in self._query(WATCHED_PARTITION, projection="sk")]

    # -- message cap ------------------------------------------------------------------------------------------------

    def count_message(self, job_name: str, cap: int) -> bool:
        """Count one notification of ``job_name``; False, counting nothing, once ``cap`` were counted.

        A crash between counting and publishing counts that message again on the retry: the cap errs on sending less.
        """
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_serialize({"pk": f"job#{job_name}", "sk": MESSAGES_SORT_KEY}),
                UpdateExpression="ADD #messages :one SET expires_at = :ttl",
                ConditionExpression="attribute_not_exists(#messages) OR #messages < :cap",
                ExpressionAttributeNames={"#messages": "messages"},
                ExpressionAttributeValues=_serialize(
                    {":one": 1, ":cap": cap, ":ttl": int(self._clock()) + self._transition_ttl}
                ),
            )
        except ClientError as error:
            if _error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    # -- transitions ------------------------------------------------------------------------------------------------

    def job_ledger(self, job_name: str) -> JobLedger:
        ledger = JobLedger()
        for item in self._query(f"job#{job_name}", projection="#state, lease_until_ms, #snapshot"):
            if "snapshot" in item:
                transition = transition_from_item(item)
                ledger.items[(transition.rule, transition.status)] = item
        return ledger

    def claim(self, transition: Transition, *, owner: str, lease_seconds: float) -> Claim | ClaimRefused:
        """Create the transition item, or take over a pending one whose lease expired. Exactly one caller wins."""
        now_ms = int(self._clock() * 1000)
        lease_until_ms = now_ms + int(lease_seconds * 1000)
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=_serialize(transition.key),
                # the first observation is kept, so a notification re-sent after a crash reads like the original
                UpdateExpression=(
                    "SET #state = :pending, #owner = :owner, lease_until_ms = :lease, expires_at = :ttl, "
                    "#snapshot = if_not_exists(#snapshot, :snapshot) ADD attempts :one"
                ),
                ConditionExpression="attribute_not_exists(pk) OR (#state = :pending AND lease_until_ms < :now)",
                ExpressionAttributeNames={"#state": "state", "#owner": "owner", "#snapshot": "snapshot"},
                ExpressionAttributeValues=_serialize(
                    {
                        ":pending": PENDING,
                        ":owner": owner,
                        ":lease": lease_until_ms,
                        ":ttl": now_ms // 1000 + self._transition_ttl,
                        ":now": now_ms,
                        ":one": 1,
                        ":snapshot": _snapshot_text(transition),
                    }
                ),
                # a new item returns nothing; a takeover returns what the crashed owner had already done
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if _error_code(error) != "ConditionalCheckFailedException":
                raise
            old = _deserialize(error.response.get("Item") or {})
            lease = old.get("lease_until_ms")
            return ClaimRefused(
                state=old.get("state"), owner=old.get("owner"), lease_until_ms=int(lease) if lease is not None else None
            )
        previous = _deserialize(response.get("Attributes") or {})
        return Claim(
            transition=transition_from_item(previous) if previous.get("snapshot") else transition,
            owner=owner,
            lease_until_ms=lease_until_ms,
            attempts=int(previous.get("attempts", 0)) + 1,
            stop_outcome=previous.get("stop_outcome"),
            message_id=previous.get("message_id"),
            announced=bool(previous.get("announced", False)),
            taken_over=bool(previous),
        )

    def record(self, claim: Claim, **progress: Any) -> None:
        """Persist finished side effects while still holding the lease (raises LeaseLost otherwise)."""
        self._update_owned(claim, progress, final=False)

    def complete(self, claim: Claim, **progress: Any) -> None:
        """Mark the transition ``done``: later duplicates and replays are refused by the claim condition."""
        self._update_owned(claim, {**progress, "state": DONE, "done_at_ms": int(self._clock() * 1000)}, final=True)

    def release(self, claim: Claim) -> None:
        """Give the lease up after a failure so the retry (or the next sweep) can take over at once."""
        try:
            self._update_owned(claim, {"lease_until_ms": 0}, final=False)
        except LeaseLost:
            pass

    def _update_owned(self, claim: Claim, fields: Mapping[str, Any], *, final: bool) -> None:
        names = {f"#f{index}": name for index, name in enumerate(fields)}
        values = {f":f{index}": value for index, value in enumerate(fields.values())}
        expression = "SET " + ", ".join(f"#f{index} = :f{index}" for index in range(len(fields)))
        if final:
            expression += " REMOVE lease_until_ms"
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_serialize(claim.transition.key),
                UpdateExpression=expression,
                ConditionExpression="#owner = :owner AND #state = :pending",
                ExpressionAttributeNames={"#owner": "owner", "#state": "state", **names},
                ExpressionAttributeValues=_serialize({":owner": claim.owner, ":pending": PENDING, **values}),
            )
        except ClientError as error:
            if _error_code(error) == "ConditionalCheckFailedException":
                raise LeaseLost(
                    f"transition {claim.transition.rule}/{claim.transition.status} of {claim.transition.job_name} "
                    "was taken over by another invocation"
                ) from error
            raise

    def _query(self, partition: str, *, projection: str | None = None) -> Iterator[dict[str, Any]]:
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": _serialize({":pk": partition}),
            "ConsistentRead": True,
        }
        if projection:
            request["ProjectionExpression"] = projection
            names = {"#state": "state", "#snapshot": "snapshot"}
            request["ExpressionAttributeNames"] = {name: value for name, value in names.items() if name in projection}
        while True:
            page = self._client.query(**request)
            for item in page.get("Items", ()):
                yield _deserialize(item)
            if not page.get("LastEvaluatedKey"):
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _snapshot_text(transition: Transition) -> str:
    """The transition as first observed, kept as one JSON string attribute (cheap to write conditionally)."""
    return json.dumps({name: value for name, value in asdict(transition).items() if value is not None})


def transition_from_item(item: Mapping[str, Any]) -> Transition:
    known = {f.name for f in fields(Transition)}
    return Transition(**{name: value for name, value in json.loads(item["snapshot"]).items() if name in known})


def _serialize(values: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _serializer.serialize(value) for name, value in values.items()}


def _deserialize(item: Mapping[str, Any]) -> dict[str, Any]:
    values = {name: _deserializer.deserialize(value) for name, value in item.items()}
    # DynamoDB numbers come back as Decimal; the ledger only stores integers
    return {name: int(value) if type(value).__name__ == "Decimal" else value for name, value in values.items()}


def _error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))
