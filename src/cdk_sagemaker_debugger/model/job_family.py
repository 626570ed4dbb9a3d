"""The checks and patterns of a training-job family that need no CDK: the one job-name prefix check, tag and pipeline
checks, and the ARN case policy.

ARN case policy: SageMaker writes training-job ARNs in lower case whatever the case of the job's name, so every ARN
pattern this library builds lower-cases the literal part of the name (a deploy-time token is left as it is).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from .errors import ConfigurationError, ConfigurationTypeError
from .parameters import is_token

__all__ = [
    "MAX_JOB_NAME_LENGTH",
    "JOB_NAME_SUFFIX_LENGTH",
    "MAX_JOB_NAME_PREFIX_LENGTH",
    "MIN_WATCHED_PREFIX",
    "check_job_name_prefix",
    "check_tag",
    "check_job_tags",
    "MAX_JOB_TAGS",
    "check_pipeline_name",
    "job_name_pattern",
    "MAX_FAMILY_LABEL_LENGTH",
    "family_label",
]

MAX_JOB_NAME_LENGTH = 63
#: Each ProfiledTrainingJob execution names its job ``<prefix>-<20 hex characters>`` (80 random bits from a UUID).
JOB_NAME_SUFFIX_LENGTH = 21
MAX_JOB_NAME_PREFIX_LENGTH = MAX_JOB_NAME_LENGTH - JOB_NAME_SUFFIX_LENGTH
#: A watched prefix shorter than this matches too many jobs to be a scope ("a" would be every job starting with a).
MIN_WATCHED_PREFIX = 3
_NAME_START = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9-]*")
_JOB_PREFIX = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9])*")
#: SageMaker's tag alphabet, ``[\p{L}\p{Z}\p{N}_.:/=+\-@]*``: letters, separators (spaces, not tabs or newlines),
#: numbers and these.
_TAG_PUNCTUATION = frozenset("_.:/=+-@")
#: A family's label goes into resource descriptions; the shortest limit among them is a Lambda function's 256
#: characters, and the longest text around the label is 43 characters.
MAX_FAMILY_LABEL_LENGTH = 200
_PIPELINE_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}")


def check_job_name_prefix(prefix: Any, *, where: object = None, field: str = "job_name_prefix",
                          own: bool = False, from_job: str | None = None) -> str:
    """Check a job-name prefix and return it: the single check every construct uses.

    ``own=True`` is a ProfiledTrainingJob's own prefix: a literal that, with the 21-character suffix, always gives a
    valid name. Otherwise it is a watched prefix (the start of the names of a family): 3-63 letters, digits and
    hyphens starting with a letter or digit; a deploy-time token passes unchecked. ``from_job`` names the
    ProfiledTrainingJob prefix a watched one was made from, for the message.
    """
    if not isinstance(prefix, str):
        raise ConfigurationTypeError(
            f"expected a job-name prefix string such as 'resnet-exp-', got {type(prefix).__name__} {prefix!r}.",
            where=where, field=field, value=prefix)
    if is_token(prefix):
        if own:
            raise ConfigurationError("must be a literal string: it scopes the IAM policies and the EventBridge "
                                     "filters at synth time.", where=where, field=field, value=prefix)
        return prefix
    if own:
        _check_own(prefix, where, field)
    else:
        _check_watched(prefix, where, field, from_job)
    return prefix


def _check_own(prefix: str, where: object, field: str) -> None:
    if len(prefix) > MAX_JOB_NAME_PREFIX_LENGTH:
        raise ConfigurationError(
            f"{prefix!r} is {len(prefix)} characters; at most {MAX_JOB_NAME_PREFIX_LENGTH} fit, because each job is "
            f"named '<prefix>-<20 hex characters>' and training job names are limited to {MAX_JOB_NAME_LENGTH}.",
            where=where, field=field, value=prefix)
    if not _JOB_PREFIX.fullmatch(prefix):
        fixed = re.sub(r"[^a-zA-Z0-9-]", "-", prefix).strip("-")
        raise ConfigurationError(
            f"{prefix!r} is not a valid training job name start: use letters, digits and hyphens, beginning and ending "
            f"with a letter or digit (the suffix adds its own hyphen).{f' Try {fixed!r}.' if fixed else ''}",
            where=where, field=field, value=prefix)


def _check_watched(prefix: str, where: object, field: str, from_job: str | None) -> None:
    if not _NAME_START.fullmatch(prefix) or len(prefix) > MAX_JOB_NAME_LENGTH:
        bad = "".join(sorted(set(re.sub(r"[a-zA-Z0-9-]", "", prefix))))
        raise ConfigurationError(
            f"must be 1-{MAX_JOB_NAME_LENGTH} letters, digits and hyphens starting with a letter or digit (training "
            f"job names allow nothing else), got {prefix!r}" + (f" with {bad!r}" if bad else "") + ".",
            where=where, field=field, value=prefix)
    if len(prefix) < MIN_WATCHED_PREFIX:
        cause = (f"the training job's prefix {from_job!r} gives the watched prefix {prefix!r}" if from_job
                 else f"{prefix!r} is {len(prefix)} character{'s' if len(prefix) > 1 else ''}")
        raise ConfigurationError(
            f"{cause}, which matches every job whose name starts with it, other teams' jobs included. Use a prefix of "
            f"at least {MIN_WATCHED_PREFIX} characters"
            + (" (a job_name_prefix of 2 or more)." if from_job else ", for example 'team-a-'."),
            where=where, field=field, value=prefix)


def check_tag(key: Any, value: Any, *, where: object = None, field: str | None = None) -> tuple[str, str]:
    """A tag (key 1-128, value 0-256 characters of SageMaker's tag alphabet) to select jobs by, or (``field``, for
    example ``"tags"``) one to set on jobs; tokens pass."""
    names = (f"{field} key", f"{field}[{key!r}]") if field else ("tag_key", "tag_value")
    for field, text, low, high in ((names[0], key, 1, 128), (names[1], value, 0, 256)):
        if not isinstance(text, str):
            raise ConfigurationTypeError(f"expected a string, got {type(text).__name__} {text!r}.", where=where,
                                         field=field, value=text)
        if not is_token(text) and (not low <= len(text) <= high or not _in_tag_alphabet(text)):
            raise ConfigurationError(
                f"must be {low}-{high} letters, digits, spaces and _.:/=+-@ (SageMaker's tag alphabet: no tab or "
                f"newline, which no job can carry), got {text!r}.", where=where, field=field, value=text)
    if not is_token(key) and key.lower().startswith("aws:"):
        raise ConfigurationError(f"{key!r} is reserved for AWS (keys starting 'aws:' cannot be set on jobs); use your "
                                 "own key, for example 'team'.", where=where, field=names[0], value=key)
    return key, value


#: CreateTrainingJob accepts at most 50 tags.
MAX_JOB_TAGS = 50


def check_job_tags(tags: Any, *, where: object = None) -> dict[str, str]:
    """The ``tags=`` of a training job, as CreateTrainingJob accepts them: at most 50, each key and value in
    SageMaker's tag alphabet, no key starting ``aws:`` (which CreateTrainingJob refuses). Returns a copy."""
    if tags is None:
        return {}
    if not hasattr(tags, "items"):
        raise ConfigurationTypeError(f"expected a mapping of tag keys to values, got {type(tags).__name__} {tags!r}.",
                                     where=where, field="tags", value=tags)
    if len(tags) > MAX_JOB_TAGS:
        raise ConfigurationError(f"{len(tags)} tags; CreateTrainingJob accepts at most {MAX_JOB_TAGS}.", where=where,
                                 field="tags", value=len(tags))
    return dict(check_tag(key, value, where=where, field="tags") for key, value in tags.items())


def _in_tag_alphabet(text: str) -> bool:
    return all(c in _TAG_PUNCTUATION or unicodedata.category(c)[0] in "LNZ" for c in text)


def check_pipeline_name(name: Any, *, where: object = None, allow_token: bool = False) -> str:
    """A SageMaker PipelineName (1-256 letters, digits and hyphens, a letter or digit at each end; botocore's
    pattern, which a test compares with this one). A deploy-time token passes with ``allow_token`` (a pipeline's own
    name); a family refuses one, because the functions compare it with the pipeline named in each job's tag."""
    if allow_token and is_token(name):
        return name
    if not isinstance(name, str) or is_token(name):
        raise ConfigurationTypeError(f"expected the pipeline's name as a literal string such as 'churn-pipeline', got "
                                     f"{name!r}.", where=where, field="pipeline_name", value=name)
    if not _PIPELINE_NAME.fullmatch(name):
        raise ConfigurationError(
            f"must be 1-256 letters, digits and hyphens starting and ending with a letter or digit (SageMaker's "
            f"PipelineName), got {name!r}.", where=where, field="pipeline_name", value=name)
    return name


def job_name_pattern(prefix: str) -> str:
    """The resource-name part of a training-job ARN pattern for ``prefix`` (the ARN case policy: lower case)."""
    return f"{prefix if is_token(prefix) else prefix.lower()}*"



def family_label(text: str) -> str:
    """``text`` (``training jobs tagged team=vision``) as resource descriptions can carry it: at most
    :data:`MAX_FAMILY_LABEL_LENGTH` characters, its start and end kept around ``...`` when longer (a 256-character
    pipeline name or a 128/256-character tag would otherwise exceed a Lambda function's description)."""
    if len(text) <= MAX_FAMILY_LABEL_LENGTH:
        return text
    keep = MAX_FAMILY_LABEL_LENGTH - 3
    head = keep * 2 // 3
    return f"{text[:head]}...{text[len(text) - (keep - head):]}"
