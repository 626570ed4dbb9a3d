"""Props the family constructs no longer take get a TypeError that names what replaced them, instead of Python's bare
"unexpected keyword argument"."""

from __future__ import annotations

import functools
from typing import Any, TypeVar

T = TypeVar("T")

#: Removed prop -> what to pass instead.
REPLACED_BY = {
    "training_job": "training_jobs=job.training_jobs",
    "job_name_prefix": "training_jobs=TrainingJobs.from_job_name_prefix(prefix, output_bucket=bucket)",
}


def names_removed_props(cls: T) -> T:
    """Class decorator: ``cls(scope, id, training_job=...)`` raises a TypeError naming ``training_jobs=``."""
    init = cls.__init__  # type: ignore[misc]

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        for old, new in REPLACED_BY.items():
            if old in kwargs:
                raise TypeError(f"{cls.__name__}() no longer takes {old}=; pass {new} (one way to say which training "
                                "jobs, for every construct: see TrainingJobs).")  # type: ignore[attr-defined]
        init(self, *args, **kwargs)

    cls.__init__ = __init__  # type: ignore[misc]
    return cls
