"""What one job's evaluation may cost, and which nodes may write its data: the per-job caps, in one place.

The training code writes the profiler files, so it decides how much the evaluator reads. Without bounds, files
naming 200,000 distinct nodes took one run to 3.5 GB (the function has 1,769 MB) and a 217 MB state, and a run that
runs out of memory leaves every job after it unjudged. So:

* only nodes ``algo-1`` .. ``algo-<instance count>`` of the job's own cluster are read (``ResourceConfig``:
  ``InstanceCount``, or the sum of its ``InstanceGroups``), and a record counts only when its ``NodeId`` is the node
  its file is named for (reading.py); the others are counted (``foreign_files``, ``foreign_records``), never
  evaluated;
* the caps below end that job's evaluation in ``Error`` with the reason (every configured rule of the job, final:
  later runs read nothing more of it); the other jobs of the family are evaluated as before.

The defaults are several times what the largest node writes at the profiler's fastest interval (192 vCPUs, 8 GPUs,
100 ms: about 450 series and 250,000 records a minute), so no genuine job meets them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Distinct (Dimension, Name) series of one node among the system records one run reads.
MAX_SERIES_PER_NODE = 4_096
#: System records of one node filed under one minute (all its files of that minute) that one run reads.
MAX_RECORDS_PER_NODE_MINUTE = 1_000_000
#: Framework events of one node (all its ranks) in framework files of one minute that one run reads.
MAX_EVENTS_PER_NODE_MINUTE = 1_000_000
#: The job's evaluator state as JSON (uncompressed): what the next run must load into memory.
MAX_STATE_BYTES = 128 << 20


@dataclass(frozen=True)
class Caps:
    """The caps one job's evaluation runs under (each described by the constant of its default)."""

    series_per_node: int = MAX_SERIES_PER_NODE
    records_per_node_minute: int = MAX_RECORDS_PER_NODE_MINUTE
    events_per_node_minute: int = MAX_EVENTS_PER_NODE_MINUTE
    state_bytes: int = MAX_STATE_BYTES


class CapExceeded(Exception):
    """A job's data went past one of its caps; the message says which, for which node, and what happens."""


def cap_reason(what: str) -> str:
    """The StatusDetails of a job whose evaluation a cap ended; ``what`` names the cap and the node (composed by the
    evaluator from numbers and node names it checked, never from other text in the data)."""
    return (f"EvaluationLimitExceeded: {what}; the evaluation of this job stopped here and its rules report Error "
            "(the other jobs are evaluated as usual)")


def instance_count(description: dict[str, Any]) -> int:
    """How many instances the job runs on: ``ResourceConfig.InstanceCount``, or for a heterogeneous cluster the sum
    of its ``InstanceGroups`` (whose hosts are named ``algo-1`` .. ``algo-<sum>`` as well); at least 1."""
    resources = description.get("ResourceConfig") or {}
    groups = resources.get("InstanceGroups") or []
    total = 0
    for group in groups if isinstance(groups, list) else []:
        try:
            total += max(int(group.get("InstanceCount", 0)), 0)
        except (TypeError, ValueError, AttributeError):
            continue
    try:
        count = int(resources.get("InstanceCount") or 0)
    except (TypeError, ValueError):
        count = 0
    return max(count or total, 1)


class StateTooLarge(CapExceeded):
    """The state a run would commit is larger than the cap: nothing was written."""

    def __init__(self, size: int, limit: int):
        super().__init__(cap_reason(f"the job's evaluator state grew to {size / 1e6:,.1f} MB of JSON, more than the "
                                    f"cap of {limit / 1e6:,.1f} MB"))
        self.size = size
