"""One job, one unit of work: the scheduled, job-end and continuation invocations only list the jobs and queue one
message per job on an SQS FIFO queue; each message is then evaluated in an invocation of its own.

The message group is the job's name, so the runs of one job follow each other in order (the job-end run queues behind
a scheduled run in flight instead of racing it) while the runs of different jobs go in parallel; a job whose
evaluation fails, times out or runs out of memory only has its own message retried (and, after that, parked in the
queue's dead-letter queue), never another job's. The deduplication id makes a minute's message for a job count once
however often the schedule's invocation is retried; the state's conditional write and outbox still make each
evaluation count once (see docs/evaluator.md).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

LOG = logging.getLogger(__name__)


def _kind(event: dict[str, Any]) -> str:
    if event.get("source") == "aws.sagemaker":
        return "end"
    if event.get("detail-type") == "Scheduled Event":
        return "minute"
    return "run"


def deduplication_id(job: str, event: dict[str, Any], now: float) -> str:
    """Once per job and minute for the schedule, once per job for its end, once per second otherwise."""
    kind = _kind(event)
    if kind == "minute":
        return f"{job}:minute:{int(now // 60)}"
    if kind == "end":
        return f"{job}:end"
    return f"{job}:{kind}:{int(now)}"


def enqueue(sqs: Any, queue_url: str, jobs: list[str], event: dict[str, Any], now: float) -> list[dict[str, Any]]:
    """One message per job (group: the job), 10 to a request; a refused entry raises so the invocation is retried."""
    outcomes = []
    for offset in range(0, len(jobs), 10):
        batch = jobs[offset : offset + 10]
        entries = [{"Id": str(n), "MessageBody": json.dumps({"TrainingJobName": job}), "MessageGroupId": job,
                    "MessageDeduplicationId": deduplication_id(job, event, now)} for n, job in enumerate(batch)]
        response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
        if response.get("Failed"):
            codes = sorted({f.get("Code", "?") for f in response["Failed"]})
            raise RuntimeError(f"SQS refused {len(response['Failed'])} job message(s): {', '.join(codes)}")
        outcomes += [{"job": job, "result": "queued"} for job in batch]
    return outcomes


def sqs_records(event: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The SQS messages of an invocation by the queue's event source mapping (None: not such an invocation)."""
    records = event.get("Records")
    if not isinstance(records, list) or not all(isinstance(r, dict) and r.get("eventSource") == "aws:sqs"
                                                for r in records):
        return None
    return records


def evaluate_records(records: list[dict[str, Any]], evaluate: Callable[[str], dict[str, Any]],
                     shard: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Evaluate the job of each message, or work on the node shards a shard message names (fanout.py); a failure
    returns only that message to the queue (partial batch response). Shard messages go first: a job's run may wait
    for the shards of another message of the same batch."""
    outcomes, failures = [], []
    parsed = []
    for record in records:
        try:
            body = json.loads(record.get("body") or "null")
        except ValueError:
            body = None
        parsed.append((record, body if isinstance(body, dict) else {}))
    parsed.sort(key=lambda item: "Shard" not in item[1])
    for record, body in parsed:
        if shard is not None and isinstance(body.get("Shard"), dict):
            try:
                outcomes.append(shard(body["Shard"]))
            except Exception as exc:  # not retried: the job's run reads an undelivered shard itself
                LOG.exception("a node shard failed")
                outcomes.append({"shards": 0, "result": "failed", "reason": f"{type(exc).__name__}: {exc}"})
            continue
        job = body.get("TrainingJobName")
        if not isinstance(job, str) or not job:
            LOG.warning("ignoring a job message without a job name: %.200r", record.get("body"))
            continue
        try:
            outcomes.append(evaluate(job))
        except Exception as exc:  # the message comes back (then goes to the dead-letter queue); others are unaffected
            LOG.exception("evaluation of %s failed", job)
            failures.append({"itemIdentifier": record.get("messageId")})
            outcomes.append({"job": job, "result": "failed", "reason": f"{type(exc).__name__}: {exc}"})
    LOG.info(json.dumps({"outcomes": outcomes}))
    return {"jobs": outcomes, "batchItemFailures": failures}
