"""The hyperparameters that tell a framework container which code to run, as the SageMaker Python SDK sets them.

The SDK's framework estimators (``sagemaker.pytorch.PyTorch`` and the others) upload ``sourcedir.tar.gz`` and add
``sagemaker_program``, ``sagemaker_submit_directory``, ``sagemaker_container_log_level``, ``sagemaker_job_name`` and
``sagemaker_region`` to HyperParameters, every value JSON-encoded (``json.dumps``: strings keep their quotes). The
training toolkit in the AWS Deep Learning Containers (``sagemaker-training``) JSON-decodes each value, downloads and
unpacks the submit directory, installs its ``requirements.txt`` and runs the program. tests/model/test_sdk_parity.py
compares these values with the SDK's own ``_script_mode_hyperparam_update`` and ``hyperparameters()``.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from .errors import ConfigurationError, ConfigurationTypeError
from .parameters import is_token

__all__ = [
    "PROGRAM",
    "SUBMIT_DIRECTORY",
    "LOG_LEVEL",
    "JOB_NAME",
    "REGION",
    "CODE_HYPERPARAMETERS",
    "encode",
    "code_hyperparameters",
    "check_entry_point",
    "check_log_level",
    "check_reserved",
]

PROGRAM = "sagemaker_program"
SUBMIT_DIRECTORY = "sagemaker_submit_directory"
LOG_LEVEL = "sagemaker_container_log_level"
JOB_NAME = "sagemaker_job_name"
REGION = "sagemaker_region"
#: Set from ``code=``; the same names in ``hyperparameters=`` are refused.
CODE_HYPERPARAMETERS = (SUBMIT_DIRECTORY, PROGRAM, LOG_LEVEL, JOB_NAME, REGION)

_LOG_LEVELS = {logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL}
_ENTRY_POINT = re.compile(r"[^\s/][^\s]*")


def encode(value: Any) -> str:
    """A hyperparameter value as the SDK sends it: ``json.dumps`` (``"train.py"`` -> ``'"train.py"'``, 20 -> ``"20"``).
    A CDK token string is encoded the same way; its quotes surround the value it resolves to."""
    return json.dumps(value)


def check_entry_point(entry_point: Any, *, where: str | None = None) -> str:
    """A path relative to the source directory, such as ``train.py`` or ``scripts/train.py``."""
    if not isinstance(entry_point, str) or is_token(entry_point):
        raise ConfigurationTypeError(
            f"expected the script's path inside the source directory, such as 'train.py', got {entry_point!r}.",
            where=where, field="entry_point", value=entry_point)
    normal = posixpath.normpath(entry_point)
    if not _ENTRY_POINT.fullmatch(entry_point) or normal.startswith("..") or normal != entry_point.removeprefix("./"):
        raise ConfigurationError(
            f"must be a relative path inside the source directory without spaces or '..', such as 'train.py' or "
            f"'scripts/train.py', got {entry_point!r}.", where=where, field="entry_point", value=entry_point)
    return normal


def check_log_level(level: Any, *, where: str | None = None) -> int:
    if isinstance(level, bool) or level not in _LOG_LEVELS:
        raise ConfigurationError(
            f"must be one of the logging levels {sorted(_LOG_LEVELS)} (logging.INFO is 20), got {level!r}.",
            where=where, field="container_log_level", value=level)
    return int(level)


def code_hyperparameters(*, entry_point: str, submit_directory: str, region: str, log_level: int = logging.INFO,
                         job_name: str | None = None) -> dict[str, str]:
    """The five hyperparameters, in the SDK's order. ``job_name`` None sends ``"null"``, as the SDK does before the
    job has a name."""
    return {
        SUBMIT_DIRECTORY: encode(submit_directory),
        PROGRAM: encode(entry_point),
        LOG_LEVEL: encode(log_level),
        JOB_NAME: encode(job_name),
        REGION: encode(region),
    }


def check_reserved(hyperparameters: Mapping[str, str] | None, reserved: Mapping[str, str], *, owner: str,
                   where: str | None = None) -> None:
    """User hyperparameters must not set what ``owner`` (``code=`` or ``distribution=``) sets."""
    taken = sorted(set(hyperparameters or ()) & set(reserved))
    if taken:
        raise ConfigurationError(
            f"{', '.join(taken)} {'is' if len(taken) == 1 else 'are'} set from {owner}; remove "
            f"{'it' if len(taken) == 1 else 'them'} from hyperparameters=.", where=where, field="hyperparameters",
            value=taken)
