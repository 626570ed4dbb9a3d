"""Where each file goes, relative to the local folder and to ``<S3 URI>/<job>/profiler-output/`` alike.

The names are Debugger's, so the evaluator and smdebug read them unchanged: system files are named by the epoch second
of their minute, in that minute's UTC hour folder; python-timeline files by the end time (us) of their last event.
"""

from __future__ import annotations

import time

SYSTEM_DIR = "system/incremental"
PEVENTS_DIR = "framework/pevents"
#: Files being written; never uploaded, renamed into place when complete.
PARTIAL_DIR = ".partial"
#: The sampler's own files (status, log), next to the data and uploaded with it.
SAMPLER_DIR = "sampler"
#: Held (flock) by the running sampler for its whole life; holds its pid.
LOCK_FILE = "sampler.lock"
#: Held shared (flock LOCK_SH) by every Python process of the training for its whole life: the sampler ends once
#: nobody holds it (the training's processes have ended).
MEMBERS_FILE = "sampler.members"
#: Debugger's end-of-training markers; written when the training's processes end (and when a local capture ends).
END_MARKER = "system/training_job_end.ts"
FRAMEWORK_END_MARKER = "framework/training_job_end.ts"
END_MARKERS = (END_MARKER, FRAMEWORK_END_MARKER)
UPLOADED_PREFIXES = ("system/", "framework/pevents/", FRAMEWORK_END_MARKER, SAMPLER_DIR + "/")
TIMELINE_SUFFIX = "pythontimeline.json"


def hour_folder(epoch_s: float) -> str:
    return time.strftime("%Y%m%d%H", time.gmtime(epoch_s))


def system_file(minute_s: int, node: str, generation: int = 0) -> str:
    """``generation`` > 0 names a second file for a minute already written (the clock stepped back): the name's
    second moves by that many seconds, still inside the minute, so it never replaces the first file's key."""
    return f"{SYSTEM_DIR}/{hour_folder(minute_s)}/{minute_s + generation}.{node}.json"


def timeline_file(end_us: int, token: str) -> str:
    return f"{PEVENTS_DIR}/{hour_folder(end_us / 1e6)}/{end_us}_{token}_{TIMELINE_SUFFIX}"


def framework_token(node: str, rank: int) -> str:
    """``0-algo-1``: Debugger's ``<rank>-<host>`` node token (readers turn it into ``algo-1-0``)."""
    return f"{rank}-{node}"


def status_file(node: str) -> str:
    return f"{SAMPLER_DIR}/status-{node}.json"


def log_file(node: str) -> str:
    return f"{SAMPLER_DIR}/log-{node}.txt"


def partial_file(name: str) -> str:
    return f"{PARTIAL_DIR}/{name}"


def is_uploaded(relative: str) -> bool:
    """Finished data and the sampler's own files; never partial files, temp files or the lock."""
    return relative.startswith(UPLOADED_PREFIXES) and not relative.endswith(".tmp")
