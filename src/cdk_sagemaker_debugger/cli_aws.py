"""The AWS side of ``cdk-sagemaker-debugger evaluate``: one session spelled like the AWS CLI's ``--profile`` and
``--region``, a training job's profiler data found from its name, and AWS failures said so that someone can fix them.

boto3 and botocore are imported only when a command reaches AWS, so evaluating a local folder never loads them.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from .model.errors import did_you_mean
from .runtime.evaluator.engine import Evaluator, RuleConfig
from .runtime.evaluator.storage import EvaluationInputError, S3Store, job_profiler_store
from .runtime.sampler.contract import S3_URI as SAMPLER_S3_URI

#: The IAM action behind each call the command makes, so that an AccessDenied names what to grant.
IAM_ACTIONS = {
    "DescribeTrainingJob": "sagemaker:DescribeTrainingJob",
    "ListObjectsV2": "s3:ListBucket",
    "GetObject": "s3:GetObject",
    "GetMetricData": "cloudwatch:GetMetricData",
}
ACCESS_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "Forbidden", "403"}
REJECTED_CREDENTIALS = {"ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException",
                        "InvalidAccessKeyId", "SignatureDoesNotMatch", "RequestExpired"}
CREDENTIALS_HOWTO = ("run 'aws configure' (or 'aws sso login --profile NAME'), then pass --profile NAME or set "
                     "AWS_PROFILE")
BOTOCORE_ERROR_TEXT = re.compile(r"\((\w+)\) when calling the (\w+) operation")
CLOUDWATCH_RETENTION_HINT = ("CloudWatch keeps one-minute metrics for 15 days, so older jobs can only be evaluated "
                             "from their profiler output")


class AwsSetupError(Exception):
    """AWS cannot be reached as the command line says (unknown --profile, no region): a usage error."""


def boto3_session(profile: str | None, region: str | None) -> Any:
    """The one place a session is made (tests replace it to hand out stubbed clients)."""
    import boto3

    return boto3.Session(profile_name=profile, region_name=region)


@dataclass
class AwsClients:
    """boto3 clients of one session, made on first use: a local folder never needs AWS."""

    profile: str | None
    region: str | None
    _session: Any = None
    _clients: dict[str, Any] = field(default_factory=dict)

    @property
    def region_name(self) -> str | None:
        return getattr(self._session, "region_name", None) or self.region

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self._new_client(service)
        return self._clients[service]

    def _new_client(self, service: str) -> Any:
        from botocore.exceptions import InvalidRegionError, NoRegionError, ProfileNotFound

        try:
            if self._session is None:
                self._session = boto3_session(self.profile, self.region)
            return self._session.client(service)
        except ProfileNotFound:
            raise AwsSetupError(f"--profile {self.profile}: no such profile in ~/.aws/config or ~/.aws/credentials. "
                                f"{known_profiles(self.profile)}") from None
        except NoRegionError:
            raise AwsSetupError("no AWS region configured: pass --region (e.g. --region us-east-1), set AWS_REGION, "
                                "or give the profile one with 'aws configure'") from None
        except InvalidRegionError:
            raise AwsSetupError(f"--region {self.region}: not a region name; use one like us-east-1") from None


def known_profiles(asked: str | None) -> str:
    import botocore.session

    names = sorted(botocore.session.Session().available_profiles)
    if not names:
        return "No profile is configured yet: create one with 'aws configure --profile NAME'."
    return f"Configured profiles: {', '.join(names)}.{did_you_mean(asked or '', names)}"


@dataclass
class JobData:
    """A training job, where its profiler data is (None: nowhere, so CloudWatch), the places found empty, and those
    that could not be read (each with why)."""

    description: dict[str, Any]
    store: S3Store | None
    empty: list[str]
    unreadable: list[str] = field(default_factory=list)


def profiler_locations(description: dict[str, Any], s3: Any) -> list[S3Store]:
    """Where a job's profiler data can be, in the order trusted: ProfilerConfig (as the evaluator function reads it),
    the sampler's URI, the job output. The sampler's URI comes from the job's own ``Environment``, which whoever
    created the job wrote: it counts only in the bucket of the job's ``OutputDataConfig`` (the function never follows
    it at all), so a job cannot point a CI gate at data of its creator's choosing in another bucket."""
    from .runtime.evaluator.lambda_handler import profiler_store

    job = description["TrainingJobName"]
    sampler_uri = (description.get("Environment") or {}).get(SAMPLER_S3_URI)
    output_uri = (description.get("OutputDataConfig") or {}).get("S3OutputPath")
    output_bucket = _bucket_of(output_uri)
    if sampler_uri and (output_bucket is None or _bucket_of(sampler_uri) != output_bucket):
        sampler_uri = None
    stores = [profiler_store(description, s3)]
    stores += [job_profiler_store(uri, job, s3) for uri in (sampler_uri, output_uri) if uri]
    unique: dict[str, S3Store] = {}
    for store in stores:
        if store is not None:
            unique.setdefault(store.describe(), store)
    return list(unique.values())


def _bucket_of(uri: Any) -> str | None:
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        return None
    return uri[len("s3://"):].partition("/")[0] or None


def job_account(description: dict[str, Any]) -> str | None:
    """The account of the job, from its ARN (``arn:<partition>:sagemaker:<region>:<account>:training-job/<name>``)."""
    parts = str(description.get("TrainingJobArn") or "").split(":")
    return parts[4] if len(parts) > 5 and parts[4].isdigit() and len(parts[4]) == 12 else None


def expect_bucket_owner(s3: Any, account: str) -> None:
    """Send ``ExpectedBucketOwner`` = ``account`` on every call of this S3 client: a bucket of another account (the
    name in a job's description can be anyone's) answers 403 instead of handing over its objects."""
    def add_owner(params: dict[str, Any], **_kwargs: Any) -> None:
        params.setdefault("ExpectedBucketOwner", account)

    s3.meta.events.register("provide-client-params.s3.*", add_owner, unique_id="cdk-sagemaker-debugger-bucket-owner")


def find_job_data(job: str, clients: AwsClients) -> JobData:
    """DescribeTrainingJob, then the first location holding system metrics (the rules' clock needs them).

    A location that cannot be read (access denied, no such bucket) does not end the search: the next one may hold
    the data. When none holds it and one could not be read, the data may be there, so the job is not evaluated from
    CloudWatch instead: EvaluationInputError names each unreadable location and why."""
    description = clients.client("sagemaker").describe_training_job(TrainingJobName=job)
    account = job_account(description)
    if account is None:
        raise EvaluationInputError(f"{job}: DescribeTrainingJob gave no usable TrainingJobArn, so the account that "
                                   "owns the job's buckets is unknown; not reading its S3 data")
    expect_bucket_owner(clients.client("s3"), account)
    found = JobData(description, None, [])
    for store in profiler_locations(description, clients.client("s3")):
        try:
            holds_data = next(store.list("system/"), None) is not None
        except Exception as exc:  # an AWS failure on this location: say it, try the next
            why = explain(exc, job=job, region=clients.region_name)
            if why is None:
                raise
            found.unreadable.append(f"{store.describe()} ({why})")
            continue
        if holds_data:
            found.store = store
            return found
        found.empty.append(store.describe())
    if found.unreadable:
        raise EvaluationInputError(
            f"{job}: no profiler data found, and {len(found.unreadable)} location(s) could not be read, so it may be "
            f"there: {'; '.join(found.unreadable)}")
    return found


def evaluate_cloudwatch(description: dict[str, Any], configs: list[RuleConfig], clients: AwsClients,
                        now: float | None = None) -> tuple[Evaluator, bool]:
    """The Lambda's CLOUDWATCH source run once: SageMaker's per-minute instance metrics through the same rules.

    Returns the evaluator and whether its verdicts are final (a running job's are not).
    """
    from .runtime.evaluator import lambda_handler as lh

    job = description["TrainingJobName"]
    evaluator = lh.new_evaluator(configs, "CLOUDWATCH")
    run = lh.JobRun(job, evaluator, {})
    terminal = description.get("TrainingJobStatus") in lh.TERMINAL
    cloudwatch_clients = lh.Clients(cloudwatch=clients.client("cloudwatch"))
    lh.run_cloudwatch(run, description, cloudwatch_clients, terminal, time.time() if now is None else now)
    if evaluator.stats.records == 0:
        raise EvaluationInputError(f"{job}: no profiler data, and CloudWatch has no instance metrics for "
                                   f"Host={job}/algo-* in {clients.region_name}; "
                                   f"{no_metrics_reason(description, time.time() if now is None else now)}")
    return evaluator, run.final


#: CloudWatch keeps one-minute datapoints this long.
CLOUDWATCH_MINUTE_RETENTION_S = 15 * 86400


def no_metrics_reason(description: dict[str, Any], now: float) -> str:
    """Why a job has no instance metrics, from what DescribeTrainingJob says: not training yet, aged out, or neither."""
    from .runtime.evaluator import lambda_handler as lh
    from .runtime.evaluator.rules import epoch_seconds

    status = description.get("TrainingJobStatus")
    if status not in lh.TERMINAL and lh.training_started(description) is None:
        return (f"the job is {status} ({description.get('SecondaryStatus') or 'starting'}) and has not started "
                "training, so its instances have published nothing yet; evaluate it again once it trains")
    ended = epoch_seconds(description.get("TrainingEndTime")) or epoch_seconds(description.get("LastModifiedTime"))
    if ended is not None and now - ended > CLOUDWATCH_MINUTE_RETENTION_S:
        return CLOUDWATCH_RETENTION_HINT
    return ("SageMaker publishes them while the job's instances run; check --region and that the job ran on "
            "instances (a job that failed while starting has none)")


def explain(exc: BaseException, *, job: str | None, region: str | None) -> str | None:
    """What went wrong with AWS, for which value, and how to fix it; None when ``exc`` is not an AWS failure."""
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
        TokenRetrievalError,
    )

    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return f"no usable AWS credentials ({exc}): {CREDENTIALS_HOWTO}"
    if isinstance(exc, TokenRetrievalError):
        return f"the SSO session has expired ({exc}): run 'aws sso login' for the profile"
    if isinstance(exc, EndpointConnectionError):
        return f"could not reach {exc.kwargs.get('endpoint_url')}: check the network and --region ({region})"
    if isinstance(exc, ClientError):
        return explain_client_error(exc, job=job, region=region)
    return None


def explain_client_error(exc: Any, *, job: str | None, region: str | None) -> str:
    error = exc.response.get("Error", {})
    code, message, operation = str(error.get("Code", "")), error.get("Message", ""), exc.operation_name
    if code in ACCESS_DENIED:
        action = IAM_ACTIONS.get(operation, operation)
        return (f"access denied: {action} was refused ({message}). Grant {action} to the identity you run as "
                f"('aws sts get-caller-identity' shows which), or pass --profile NAME with one that has it")
    if code in REJECTED_CREDENTIALS:
        return f"AWS rejected the credentials ({code}: {message}): refresh them; {CREDENTIALS_HOWTO}"
    if operation == "DescribeTrainingJob" and code == "ValidationException" and "not found" in message.lower():
        return (f"training job {job!r} not found in {region}: check the name and --region "
                f"(aws sagemaker list-training-jobs --name-contains {job} --region {region})")
    if code == "NoSuchBucket":
        return f"bucket {error.get('BucketName', '')!r} does not exist ({operation}): check the S3 URI"
    return f"{operation} failed: {code}: {message}"


def access_hint(message: str) -> str:
    """The IAM action to grant when a failure the engine kept as text (a file it could not read) was AccessDenied."""
    match = BOTOCORE_ERROR_TEXT.search(message)
    if not match or match.group(1) not in ACCESS_DENIED:
        return ""
    action = IAM_ACTIONS.get(match.group(2), match.group(2))
    return f". Grant {action} to the identity you run as, or pass --profile NAME with one that has it"
