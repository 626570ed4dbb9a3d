"""Node fan-out: a large job's minute read by several invocations in parallel, merged by the job's own run.

A job's run (the invocation that holds the job's lease, shards.py for what it merges) fans out when the system
metrics files it listed are more than one invocation reads in time: more than ``FANOUT_BYTES`` (default 96 MiB, about
three 192-core nodes sampled every 100 ms for a minute; ``0`` never fans out; a ``.json.gz`` key counts
``GZIP_KEY_WEIGHT`` times its size) of files of more than one node. It then

1. splits the nodes into shards of whole nodes of at most ``SHARD_BYTES`` each (default 48 MiB: a 192-core, 100 ms
   node-minute is about 30 MB and takes about 1.3 s of one vCPU to read), taking at most ``MAX_FANOUT_MINUTES`` of
   files (a job that fell behind catches up over continuations, every run within its memory);
2. writes the plan next to the job's state (``<state key>.shards/plan.json``) and sends one shard message per shard
   but its own to the job queue, each in a message group of its own so that they run in parallel;
3. reads shard 0 itself, then every shard no shard invocation took yet, last first (the queue starts the last
   messages last); a shard invocation takes its message's shard by creating its claim object (``<n>.claim``, an S3
   conditional write naming the run), reads the shard's files into per-file digests and writes them
   (``<n>.json.gz``);
4. merges the digests at each file's turn while evaluating the job as usual: a shard claimed by an invocation that
   did not deliver by the claim's expiry is read by the job's run itself, so the run never depends on the queue's
   concurrency (with none to spare it reads every shard itself, as without fan-out).

The shard invocations write nothing but their claims and digests: the job's run alone evaluates the rules, commits the
state (conditional write), publishes (outbox) and writes the reports, under the job's lease, as without fan-out.
Digests of another run (an older plan) are never merged: every claim and digest names its run. The objects are
overwritten run after run (one plan, one claim and one digest per shard index), carry the state's tag, so their
superseded versions expire with the state's (RuleEvaluator's lifecycle rule).
"""

from __future__ import annotations

import gzip
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import shards
from .engine import Evaluator
from .readers import SystemFile
from .reading import Listing, Version
from .shards import FileDigest, ShardFile
from .state import CONFLICT_CODES, STATE_TAGGING, error_code, get_if_present
from .storage import S3Store
from .window import WindowTests

LOG = logging.getLogger(__name__)

FANOUT_BYTES = 96 << 20
SHARD_BYTES = 48 << 20
MAX_FANOUT_MINUTES = 3
#: How long a shard's claim holds: an invocation that has not written the shard's digests by then has died (timeout,
#: memory) and the job's run reads the shard itself.
CLAIM_S = 90.0
POLL_S = 0.2
#: A ``.json.gz`` key counts this many times its size (the ratio of gzip on profiler JSON): decoding is the work.
GZIP_KEY_WEIGHT = 20
SHARDS_SUFFIX = ".shards"
PLAN_NAME = "plan.json"


@dataclass
class Plan:
    run: str
    bucket: str  # the job's output bucket: plan, claims and digests live beside the state
    folder: str  # <state key>.shards
    store_bucket: str
    store_prefix: str
    origin_us: int
    scan_us: int
    limits: WindowTests  # the evaluator's window tests: the shards count the same
    shards: list[list[ShardFile]]
    sizes: dict[str, int] = field(default_factory=dict)

    def to_state(self) -> dict[str, Any]:
        return {"run": self.run, "bucket": self.bucket, "folder": self.folder, "store_bucket": self.store_bucket,
                "store_prefix": self.store_prefix, "origin_us": self.origin_us, "scan_us": self.scan_us,
                "limits": [[column, [list(t) for t in found]] for column, found in self.limits.items()],
                "shards": [[f.to_state() for f in files] for files in self.shards], "sizes": self.sizes}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Plan:
        return cls(str(state["run"]), str(state["bucket"]), str(state["folder"]), str(state["store_bucket"]),
                   str(state["store_prefix"]), int(state["origin_us"]), int(state["scan_us"]),
                   {int(column): tuple((str(op), limit) for op, limit in found) for column, found in state["limits"]},
                   [[ShardFile.from_state(f) for f in files] for files in state["shards"]],
                   {str(k): int(v) for k, v in state.get("sizes", {}).items()})

    def key(self, name: str) -> str:
        return f"{self.folder}/{name}"


def split_nodes(files: list[SystemFile], sizes: dict[str, int], *, fanout_bytes: int, shard_bytes: int
                ) -> tuple[list[list[SystemFile]], bool] | None:
    """The shards (each a list of whole nodes' files, in time order) and whether files beyond the first
    ``MAX_FANOUT_MINUTES`` were left for a continuation; None: the files are few enough for one invocation."""
    if fanout_bytes <= 0 or not files:
        return None
    if sum(work_bytes(f, sizes) for f in files) <= fanout_bytes or len({f.node for f in files}) < 2:
        return None
    first = files[0].timestamp_us
    taken = [f for f in files if f.timestamp_us < first + MAX_FANOUT_MINUTES * 60_000_000]
    per_node: dict[str, list[SystemFile]] = {}
    for f in taken:
        per_node.setdefault(f.node, []).append(f)
    groups: list[list[SystemFile]] = []
    size = 0
    for node in sorted(per_node):
        node_bytes = sum(work_bytes(f, sizes) for f in per_node[node])
        if not groups or size + node_bytes > shard_bytes:
            groups.append([])
            size = 0
        groups[-1] += per_node[node]
        size += node_bytes
    return [sorted(g) for g in groups], len(taken) < len(files)


def work_bytes(file: SystemFile, sizes: dict[str, int]) -> int:
    """The JSON bytes a file holds to decode, as the listing tells: its size, or for a ``.json.gz`` key an estimate."""
    size = sizes.get(file.key, 0)
    return size * GZIP_KEY_WEIGHT if file.key.endswith(".gz") else size


class FanOut:
    """The job's run's side (reading.Digests): which listed files the shards read, and their digests at their turn."""

    def __init__(self, s3: Any, plan: Plan, *, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, read_workers: int = 4):
        self.s3, self.plan, self.clock, self.sleep, self.read_workers = s3, plan, clock, sleep, read_workers
        self.shard_of = {f.key: n for n, files in enumerate(plan.shards) for f in files}
        self.digests: dict[str, FileDigest] = {}
        self.read_here = 0  # shards this invocation read itself

    def covers(self, file: SystemFile) -> bool:
        return file.key in self.shard_of

    def apply(self, evaluator: Evaluator, file: SystemFile) -> Version:
        if file.key not in self.digests:
            self._gather(self.shard_of[file.key])
        return shards.apply(evaluator, file, self.digests.pop(file.key))

    def work(self) -> None:
        """Read shard 0, then every shard nobody claimed yet, last first, keeping their digests here."""
        count = len(self.plan.shards)
        for n in [0, *range(count - 1, 0, -1)]:
            if claim(self.s3, self.plan, n, self.clock() + CLAIM_S):
                self._read(n)

    def _read(self, n: int) -> None:
        for digest in read_shard(self.plan, n, self.s3, self.read_workers):
            self.digests[digest.key] = digest
        self.read_here += 1

    def _gather(self, n: int) -> None:
        """The digests of shard ``n``: written by the invocation that claimed it, or read here once its claim expired."""
        while True:
            found = load_digests(self.s3, self.plan, n)
            if found is not None:
                self.digests.update((d.key, d) for d in found)
                return
            if claim(self.s3, self.plan, n, self.clock() + CLAIM_S):
                LOG.warning("shard %d of run %s was not delivered in time; reading it here", n, self.plan.run)
                self._read(n)
                return
            self.sleep(POLL_S)


def split_listing(listing: Listing, *, fanout_bytes: int = FANOUT_BYTES, shard_bytes: int = SHARD_BYTES
                  ) -> tuple[list[list[SystemFile]], bool] | None:
    """The node shards of a listing too large for one invocation, and whether files were left for a continuation
    (then the listing keeps only the files taken); None: no fan-out. Called before ``reading.prepare``, so that the
    job's clock never runs ahead of the files this run reads."""
    split = split_nodes(listing.system, listing.sizes, fanout_bytes=fanout_bytes, shard_bytes=shard_bytes)
    if split is not None and split[1]:
        listing.system = sorted(f for group in split[0] for f in group)
    return split


def start(evaluator: Evaluator, listing: Listing, groups: list[list[SystemFile]], store: S3Store, *, s3: Any,
          sqs: Any, queue_url: str, job: str, bucket: str, state_key: str, read_workers: int = 4) -> FanOut:
    """Write the plan, send the shard messages and read the shards nobody took yet (the listing is prepared:
    the evaluator has its T0)."""
    if evaluator.origin_us is None:
        raise RuntimeError("reading.prepare() must set the evaluation's T0 before the nodes are fanned out")
    plan = Plan(uuid.uuid4().hex, bucket, state_key + SHARDS_SUFFIX, store.bucket, store.prefix, evaluator.origin_us,
                evaluator.scan_us, shards.thresholds(evaluator),
                [[ShardFile(f.key, listing.etags.get(f.key), listing.reread.get(f.key), f.key in listing.reread)
                  for f in group] for group in groups],
                {f.key: listing.sizes.get(f.key, 0) for group in groups for f in group})
    _put(s3, plan.bucket, plan.key(PLAN_NAME), json.dumps(plan.to_state()).encode())
    send_shard_messages(sqs, queue_url, job, plan, len(groups) - 1)
    fan = FanOut(s3, plan, read_workers=read_workers)
    fan.work()
    LOG.info("%s: %d node shard(s) of run %s, %d read here", job, len(groups), plan.run, fan.read_here)
    return fan


#: ``starter(evaluator, listing, shards)``: the run's side of a fan-out (lambda_handler.run_profiler).
Starter = Callable[[Evaluator, Listing, list[list[SystemFile]]], FanOut]


def starter(store: S3Store, **where: Any) -> Starter:
    """How a job's run fans its nodes out: :func:`start` with the job's store, queue and state key."""
    return lambda evaluator, listing, groups: start(evaluator, listing, groups, store, **where)


def send_shard_messages(sqs: Any, queue_url: str, job: str, plan: Plan, count: int) -> None:
    """One message for each of shards 1 to ``count``, each in a message group of its own (they run in parallel
    with each other and with the job's group)."""
    def body(n: int) -> str:
        return json.dumps({"Shard": {"bucket": plan.bucket, "plan": plan.key(PLAN_NAME), "run": plan.run, "shard": n}})

    for offset in range(1, count + 1, 10):
        entries = [{"Id": str(n), "MessageBody": body(n), "MessageGroupId": f"{job}.shard-{n}",
                    "MessageDeduplicationId": f"{plan.run}-{n}"} for n in range(offset, min(offset + 10, count + 1))]
        response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
        if response.get("Failed"):  # the job's run reads an unclaimed shard itself: nothing is lost
            LOG.warning("%s: SQS refused %d shard message(s)", job, len(response["Failed"]))


def work_on_shards(message: dict[str, Any], s3: Any, deadline: float, read_workers: int = 4) -> dict[str, Any]:
    """A shard invocation: take the message's shard, unless the job's run took it, and write its digests
    (``deadline``: ``time.monotonic()``; with less than a claim's time left the shard is left to the job's run)."""
    bucket, key, run = str(message.get("bucket", "")), str(message.get("plan", "")), str(message.get("run", ""))
    n = message.get("shard")
    if not key.endswith(f"{SHARDS_SUFFIX}/{PLAN_NAME}") or "/evaluator-state/" not in f"/{key}":
        return {"shards": 0, "result": "ignored", "reason": "not a plan of the evaluator's"}
    found = get_if_present(s3, bucket, key)
    if found is None:
        return {"shards": 0, "result": "no plan"}
    plan = Plan.from_state(json.loads(found[0]))
    if plan.run != run or plan.bucket != bucket:
        return {"shards": 0, "result": "stale", "reason": "a newer run of the job replaced the plan"}
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < len(plan.shards):
        return {"shards": 0, "result": "ignored", "reason": f"the plan has no shard {n!r}"}
    if deadline - time.monotonic() < CLAIM_S or not claim(s3, plan, n, time.time() + CLAIM_S):
        return {"shards": 0, "result": "taken", "shard": n}
    digests = read_shard(plan, n, s3, read_workers)
    body = json.dumps({"run": plan.run, "digests": [d.to_state() for d in digests]}, separators=(",", ":"))
    _put(s3, plan.bucket, plan.key(f"{n}.json.gz"), gzip.compress(body.encode(), compresslevel=1))
    return {"shards": 1, "result": "read", "shard": n}


def read_shard(plan: Plan, n: int, s3: Any, read_workers: int = 4) -> list[FileDigest]:
    store = S3Store(plan.store_bucket, plan.store_prefix, s3)
    return shards.digest_files(store, plan.shards[n], origin_us=plan.origin_us, scan_us=plan.scan_us,
                               limits=plan.limits, read_workers=read_workers, sizes=plan.sizes)


def load_digests(s3: Any, plan: Plan, n: int) -> list[FileDigest] | None:
    """Shard ``n``'s digests if the invocation that claimed it in this run wrote them (None: not yet)."""
    found = get_if_present(s3, plan.bucket, plan.key(f"{n}.json.gz"))
    if found is None:
        return None
    body = json.loads(gzip.decompress(found[0]))
    if body.get("run") != plan.run:
        return None
    return [FileDigest.from_state(d) for d in body["digests"]]


def claim(s3: Any, plan: Plan, n: int, until: float) -> bool:
    """Take shard ``n`` of the plan's run until ``until`` (epoch seconds); False when another invocation holds it."""
    key = plan.key(f"{n}.claim")
    found = get_if_present(s3, plan.bucket, key)
    condition = {"IfNoneMatch": "*"}
    if found is not None:
        raw, etag = found
        try:
            held = json.loads(raw)
        except ValueError:
            held = {}
        if isinstance(held, dict) and held.get("run") == plan.run and float(held.get("expires", 0)) > time.time():
            return False
        condition = {"IfMatch": str(etag)}
    try:
        _put(s3, plan.bucket, key, json.dumps({"run": plan.run, "expires": until}).encode(), **condition)
    except Exception as exc:
        if error_code(exc) in CONFLICT_CODES:
            return False
        raise
    return True


def _put(s3: Any, bucket: str, key: str, body: bytes, **condition: str) -> None:
    s3.put_object(Bucket=bucket, Key=key, Body=body, Tagging=STATE_TAGGING, **condition)
