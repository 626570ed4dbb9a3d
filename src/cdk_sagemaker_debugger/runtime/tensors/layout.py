"""Where the collector's files go, relative to the local folder and to ``<S3 URI>/<job>/tensor-output/`` alike.

    <node>/<rank 5 digits>/<step 12 digits>.jsonl    one file per recorded step of one process: JSON lines
    status/<node>-<rank>.json                        the collector's counters (steps, files, failures)

Every line of a step file is one JSON object with ``step``, ``kind`` and ``name``; docs/tensor-rules.md lists the
kinds and their fields. Non-finite numbers are written as the strings "nan", "inf" and "-inf" (JSON has none).
"""

FOLDER = "tensor-output"
STATUS_DIR = "status"
STEP_SUFFIX = ".jsonl"


def step_file(node, rank, step):
    return f"{node}/{rank:05d}/{step:012d}{STEP_SUFFIX}"


def status_file(node, rank):
    return f"{STATUS_DIR}/{node}-{rank}.json"


def parse_step_file(relative):
    """(node, rank, step) of a step file's relative path, or None for anything else."""
    parts = relative.split("/")
    if len(parts) != 3 or not parts[2].endswith(STEP_SUFFIX):
        return None
    node, rank, name = parts
    step = name[: -len(STEP_SUFFIX)]
    if not (node and rank.isdigit() and len(rank) == 5 and step.isdigit() and len(step) == 12):
        return None
    return node, int(rank), int(step)
