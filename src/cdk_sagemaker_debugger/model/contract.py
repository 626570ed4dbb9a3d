"""What the constructs and their Lambda functions share: event names, metric names, environment variables, and the
job family every function applies before it acts.

Standard library only and no imports of this package: each Lambda asset ships this file as ``<package>/contract_shared.py``
(a symbolic link in the source tree, followed when the asset is staged), so the construct that writes a value and the
function that reads it use this one definition. ``tests/test_layers.py`` checks the links.

The job family (see :class:`JobFamily`) is decided in two steps. A function first drops names that cannot belong
(cheap, from the event or a listing); then, for the remaining job, it reads DescribeTrainingJob and, where tags decide,
ListTags, and acts only when :meth:`JobFamily.refusal` returns None.

Sources for the pipeline family: SageMaker Pipelines names its training jobs ``pipelines-<execution id>-<step>-...`` and
tags each with ``sagemaker:pipeline-execution-arn`` (``arn:<partition>:sagemaker:<region>:<account>:pipeline/<name>/
execution/<id>``); the SageMaker Python SDK reads that tag with ListTags to find a job's pipeline execution
(aws/sagemaker-python-sdk, src/sagemaker/lineage/artifact.py, ``pipeline_execution_arn``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

# -- events ------------------------------------------------------------------------------------------------------------
#: Source of every event this library publishes (the RuleEvaluator's and the RuleAlarm's).
EVENT_SOURCE = "cdk-sagemaker-debugger"
#: A RuleEvaluator verdict, on the stack's verdict bus.
STATUS_CHANGE_DETAIL_TYPE = "Profiler Rule Evaluation Status Change"
#: A RuleEvaluator run that ran out of time asks for the next one, on the verdict bus.
CONTINUATION_DETAIL_TYPE = "Profiler Rule Evaluation Continuation"
#: One transition a RuleAlarm reported, on the stack's verdict bus.
TRANSITION_DETAIL_TYPE = "Rule Alarm Transition"
#: SageMaker's own training-job events.
SAGEMAKER_SOURCE = "aws.sagemaker"
TRAINING_JOB_STATE_CHANGE = "SageMaker Training Job State Change"

# -- metrics -----------------------------------------------------------------------------------------------------------
#: CloudWatch namespace of the metrics the evaluator and the GPU watch publish (unless a construct is told otherwise).
DEFAULT_NAMESPACE = "CdkSageMakerDebugger"
#: 1 when a rule found issues in the latest evaluation, 0 when it found none (dimensions Rule, TrainingJobName).
RULE_ISSUES_FOUND_METRIC = "RuleIssuesFound"
#: What a health rule measured in the latest evaluation, in the unit of its threshold (TrainingHang: minutes without
#: progress; Straggler: the slowest rank's ratio to the fastest; GPUHealth: percent of samples throttled; DataWait:
#: percent of time waiting for data); dimensions Rule, TrainingJobName. The dashboard draws it with the threshold.
RULE_GAUGE_METRIC = "RuleGauge"
#: The GPU watch's percent per GPU, the minimum over the family's hosts in status Training (no datapoint when none is
#: training).
LOWEST_GPU_UTILIZATION_METRIC = "LowestGPUUtilization"
#: The GPU watch's count of hosts of the family's jobs in status Training that reported GPU utilisation lately.
TRAINING_HOSTS_METRIC = "TrainingHosts"
#: The one dimension of the GPU watch's metrics; its value is the family's job-name prefix.
GPU_WATCH_DIMENSION = "JobNamePrefix"

# -- text from data in messages ---------------------------------------------------------------------------------------
#: The most characters of text taken from data (a profiler file, an S3 key, an exception, an evaluator summary) that a
#: verdict's StatusDetails, an evaluation summary, an e-mail or an SMS carries in one place.
MAX_REPORTED_CHARS = 200
#: Precedes text taken from data, so a reader knows a machine reported it and nobody vouches for its words.
MACHINE_REPORTED = "machine-reported: "
# Terminal escape sequences (CSI ``ESC [ ... final``, OSC ``ESC ] ... BEL|ESC \\``, two-character ``ESC x``).
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?|\x9b[0-?]*[ -/]*[@-~]")


def reported_text(value: Any, limit: int = MAX_REPORTED_CHARS) -> str:
    """Text that came from data, safe to print in a message: one line, without control or format characters (C0, C1,
    DEL, terminal escape sequences, bidirectional overrides, zero-width characters), without line or paragraph
    separators, each run of white space one space, at most ``limit`` characters (cut with "..."). The one function
    every path uses (the evaluator's problems and StatusDetails, its summary, the alarm's e-mail and SMS)."""
    text = value if isinstance(value, str) else str(value)
    text = _ESCAPES.sub(" ", text[: limit * 8 + 64])  # the head is all that can be shown: a 10 MB string costs nothing
    text = " ".join("".join(" " if unicodedata.category(ch)[0] == "C" or unicodedata.category(ch) in ("Zl", "Zp")
                            else ch for ch in text).split())
    limit = max(int(limit), 4)
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def machine_reported(value: Any, limit: int = MAX_REPORTED_CHARS) -> str:
    """:func:`reported_text` labelled as machine-reported (``machine-reported: <text>``)."""
    return MACHINE_REPORTED + reported_text(value, limit)


# -- environment variables ---------------------------------------------------------------------------------------------
#: The job family, as :meth:`JobFamily.to_json` writes it (every function).
JOB_FAMILY_ENV = "JOB_FAMILY"


class AlarmEnvironment:
    """Environment variables of the RuleAlarm function."""

    TABLE_NAME = "TABLE_NAME"
    TOPIC_ARN = "TOPIC_ARN"
    ALARM_ID = "ALARM_ID"
    STATUSES = "STATUSES"
    RULE_NAMES = "RULE_NAMES"
    KNOWN_RULES = "KNOWN_RULES"
    STOP = "STOP"
    STOP_PREFIX = "STOP_PREFIX"
    EVENT_BUS_NAME = "EVENT_BUS_NAME"
    ACCOUNT_ID = "ACCOUNT_ID"
    MAX_MESSAGES_PER_JOB = "MAX_MESSAGES_PER_JOB"
    TRANSITION_TTL_DAYS = "TRANSITION_TTL_DAYS"
    WATCH_TTL_DAYS = "WATCH_TTL_DAYS"


class EvaluatorEnvironment:
    """Environment variables of the RuleEvaluator function."""

    RULES = "RULES"
    SOURCE = "SOURCE"
    PROFILER_S3_URI = "PROFILER_S3_URI"
    EVENT_BUS_NAME = "EVENT_BUS_NAME"
    METRIC_NAMESPACE = "METRIC_NAMESPACE"
    SAFETY_MARGIN_SECONDS = "SAFETY_MARGIN_SECONDS"
    READ_WORKERS = "READ_WORKERS"
    #: The FIFO queue of job messages (one job, one invocation); unset: every job is evaluated in the invocation.
    JOB_QUEUE_URL = "JOB_QUEUE_URL"
    #: Bytes of new system metrics files above which a run reads them in node shards (fanout.py); 0: never.
    FANOUT_BYTES = "FANOUT_BYTES"
    #: Bytes of whole nodes' files per node shard at most.
    SHARD_BYTES = "SHARD_BYTES"

    #: RuleEvaluator(mlflow=...): the one tracking server whose runs the evaluator writes (unset: no MLflow export).
    MLFLOW_TRACKING_SERVER_ARN = "MLFLOW_TRACKING_SERVER_ARN"


class GpuWatchEnvironment:
    """Environment variables of TrainingDashboard's low-GPU watch function."""

    #: Jobs whose name starts with this (case-insensitive, as SageMaker compares names) are the family.
    JOB_NAME_PREFIX = "JOB_NAME_PREFIX"
    #: GPUs of one instance: SageMaker's GPUUtilization is summed over them (0-100 x GPUs).
    GPUS_PER_HOST = "GPUS_PER_HOST"
    #: CloudWatch namespace of the published metrics (default :data:`DEFAULT_NAMESPACE`).
    METRIC_NAMESPACE = "METRIC_NAMESPACE"
    #: Only jobs running as one of these roles count: a JSON list of role ARNs (unset: the family has no known
    #: execution role).
    EXECUTION_ROLE_ARNS = "EXECUTION_ROLE_ARNS"


# -- the job family ----------------------------------------------------------------------------------------------------
#: The tag SageMaker Pipelines puts on the jobs of an execution (value: the execution's ARN).
PIPELINE_EXECUTION_TAG = "sagemaker:pipeline-execution-arn"
#: How SageMaker Pipelines starts the names of the training jobs it creates.
PIPELINE_JOB_NAME_PREFIX = "pipelines-"


@dataclass(frozen=True)
class JobFamily:
    """Which training jobs a function acts on: a name prefix, (for tag and pipeline families) a tag, and the roles
    the jobs run as.

    Job names are compared case-insensitively (SageMaker keeps job names unique regardless of case and writes their
    ARNs in lower case); tag keys and values are compared exactly, as IAM's ``aws:ResourceTag`` compares them; role
    ARNs exactly, as DescribeTrainingJob returns ``RoleArn``. A name or a tag is easy to borrow (CreateTrainingJob,
    ``sagemaker:AddTags``); running as a role needs ``iam:PassRole`` on it, so the roles are what a family trusts.
    """

    #: Names start with this ("" for any name).
    job_name_prefix: str = ""
    #: The job carries this tag with exactly ``tag_value`` (None: tags do not decide).
    tag_key: str | None = None
    tag_value: str | None = None
    #: The job was started by an execution of this SageMaker Pipeline (its ``sagemaker:pipeline-execution-arn`` tag).
    pipeline_name: str | None = None
    #: The job runs as one of these roles (empty: the name, tag or pipeline decides alone).
    execution_role_arns: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, text: str) -> JobFamily:
        """The family written by :meth:`to_json`; ValueError when ``text`` is not one."""
        try:
            data = json.loads(text)
        except (TypeError, json.JSONDecodeError) as error:
            raise ValueError(f"{JOB_FAMILY_ENV} is not JSON: {error}") from error
        if not isinstance(data, dict) or set(data) - {"job_name_prefix", "tag_key", "tag_value", "pipeline_name",
                                                      "execution_role_arns"}:
            raise ValueError(f"{JOB_FAMILY_ENV} is not a job family: {str(text)[:200]!r}")
        roles = data.pop("execution_role_arns", [])
        if not isinstance(roles, list) or not all(isinstance(r, str) and r for r in roles):
            raise ValueError(f"{JOB_FAMILY_ENV} execution_role_arns is not a list of role ARNs: {str(roles)[:200]!r}")
        family = cls(**data, execution_role_arns=tuple(roles))
        if not (family.job_name_prefix or family.tag_key or family.pipeline_name):
            raise ValueError(f"{JOB_FAMILY_ENV} selects every training job; it needs a prefix, a tag or a pipeline")
        if (family.tag_key is None) != (family.tag_value is None):
            raise ValueError(f"{JOB_FAMILY_ENV} gives a tag key without a value, or a value without a key")
        return family

    def to_json(self) -> str:
        """The family as the functions' environment carries it. An empty tag value is a value (``team=""``), so only
        unset fields and the empty "any name" prefix are left out."""
        fields = asdict(self)
        fields["execution_role_arns"] = list(self.execution_role_arns) or None
        return json.dumps({k: v for k, v in fields.items()
                           if v is not None and not (k == "job_name_prefix" and v == "")}, sort_keys=True)

    @property
    def needs_tags(self) -> bool:
        """Whether the job's tags (ListTags) decide membership."""
        return self.tag_key is not None or self.pipeline_name is not None

    @property
    def list_filter(self) -> str:
        """What ListTrainingJobs' NameContains can narrow the listing to ("" for no filter)."""
        return self.job_name_prefix

    def name_may_belong(self, job_name: str) -> bool:
        """False when the name alone rules the job out (its prefix); the rest is decided by :meth:`refusal`."""
        return isinstance(job_name, str) and job_name.lower().startswith(self.job_name_prefix.lower())

    def refusal(self, job_name: str, tags: Mapping[str, str] | None = None, *, role_arn: Any = None,
                job_arn: Any = None) -> str | None:
        """Why the job is not one of the family (None when it is), from DescribeTrainingJob's ``RoleArn`` and
        ``TrainingJobArn`` and, when :attr:`needs_tags`, the job's tags. A pipeline family accepts only an execution
        of the pipeline in the job's own partition, region and account."""
        if not self.name_may_belong(job_name):
            return "job outside the family's name prefix"
        if self.execution_role_arns and role_arn not in self.execution_role_arns:
            return "the job does not run as the family's execution role"
        if not self.needs_tags:
            return None
        if tags is None:
            return "the job's tags are unknown"
        if self.tag_key is not None and tags.get(self.tag_key) != self.tag_value:
            return f"the job is not tagged {self.tag_key}={self.tag_value}"
        if self.pipeline_name is not None:
            if not isinstance(job_arn, str):
                return "the job's ARN is unknown, so its pipeline execution cannot be placed"
            if pipeline_of_execution(tags.get(PIPELINE_EXECUTION_TAG), home=job_arn) != self.pipeline_name.lower():
                return f"the job was not started by the SageMaker Pipeline {self.pipeline_name} of its own account"
        return None


def pipeline_of_execution(execution_arn: Any, *, home: str | None = None) -> str | None:
    """The (lower-cased) pipeline name of ``arn:<partition>:sagemaker:<region>:<account>:pipeline/<name>/execution/
    <id>``; None for anything else, and (given ``home``, another ARN such as the job's) for an execution in another
    partition, region or account than ``home``'s: a pipeline of the same name elsewhere is not the family's."""
    if not isinstance(execution_arn, str):
        return None
    parts = execution_arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sagemaker" or not all(parts[1:5]):
        return None
    if home is not None:
        where = home.split(":", 5)
        if len(where) != 6 or [parts[1], parts[3], parts[4]] != [where[1], where[3], where[4]]:
            return None
    kind, found, path = parts[5].partition("pipeline/")
    name, separator, execution = path.partition("/execution/")
    return name.lower() if not kind and found and separator and name and "/" not in name and execution else None


def job_tags(sagemaker: Any, job_arn: str) -> dict[str, str]:
    """Every tag of a training job (ListTags, all pages)."""
    tags: dict[str, str] = {}
    kwargs: dict[str, Any] = {"ResourceArn": job_arn, "MaxResults": 100}
    while True:
        page = sagemaker.list_tags(**kwargs)
        tags.update({t["Key"]: t.get("Value", "") for t in page.get("Tags", [])})
        if not page.get("NextToken"):
            return tags
        kwargs["NextToken"] = page["NextToken"]
