"""``evaluate --training-job NAME``: DescribeTrainingJob (botocore Stubber, checked against the service model) says where
the profiler data is, moto S3 holds real profiler files, and every AWS failure exits 3 (or 2) with the fix in words."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber
from moto import mock_aws

from cdk_sagemaker_debugger import cli_aws
from cdk_sagemaker_debugger.cli import main
from cdk_sagemaker_debugger.runtime.evaluator.storage import S3Store
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import JobSpec, StepSpec, constant, write_job
from cdk_sagemaker_debugger.runtime.sampler.contract import S3_URI

REGION = "eu-west-1"
BUCKET = "ml-training"
JOB = "resnet-0a1b2c3d4e5f60718293"
START = datetime(2025, 11, 29, 7, 0, tzinfo=timezone.utc)
END = START + timedelta(minutes=30)


@pytest.fixture(scope="module")
def job_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = JobSpec(minutes=3, gpus=2, cores=4, interval_ms=100, gpu_util=constant(40.0), steps=StepSpec(count=200))
    return write_job(tmp_path_factory.mktemp("job") / "profiler-output", spec)


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        yield client


def upload(s3: Any, root: Path, prefix: str) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{JOB}/profiler-output/{path.relative_to(root).as_posix()}",
                          Body=path.read_bytes())


def description(*, profiler: str | None = None, sampler: str | None = None, disabled: bool = False) -> dict[str, Any]:
    """A completed job as DescribeTrainingJob returns it; where its profiler data is depends on the arguments."""
    response: dict[str, Any] = {
        "TrainingJobName": JOB,
        "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{JOB}",
        "TrainingJobStatus": "Completed",
        "SecondaryStatus": "Completed",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "123.dkr.ecr.eu-west-1.amazonaws.com/t"},
        "ModelArtifacts": {"S3ModelArtifacts": f"s3://{BUCKET}/output/{JOB}/output/model.tar.gz"},
        "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "CreationTime": START - timedelta(minutes=3),
        "TrainingStartTime": START,
        "TrainingEndTime": END,
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/output"},
    }
    if profiler or disabled:
        response["ProfilerConfig"] = {"S3OutputPath": f"s3://{BUCKET}/{profiler or 'profiler'}",
                                      "DisableProfiler": disabled}
    if sampler:
        response["Environment"] = {S3_URI: f"s3://{BUCKET}/{sampler}"}
    return response


class FakeSession:
    """What ``boto3_session`` returns in these tests: the stubbed and moto clients, one per service."""

    def __init__(self, **clients: Any):
        self.clients = clients
        self.region_name = REGION

    def client(self, service: str) -> Any:
        return self.clients[service]


def sagemaker_stub(response: dict[str, Any] | None = None, error: tuple[str, str, int] | None = None) -> Stubber:
    stub = Stubber(boto3.client("sagemaker", region_name=REGION))
    if error:
        code, message, status = error
        stub.add_client_error("describe_training_job", code, message, status, expected_params={"TrainingJobName": JOB})
    else:
        stub.add_response("describe_training_job", response, {"TrainingJobName": JOB})
    stub.activate()
    return stub


def use_clients(monkeypatch: pytest.MonkeyPatch, **clients: Any) -> list[tuple[str | None, str | None]]:
    asked: list[tuple[str | None, str | None]] = []

    def session(profile: str | None, region: str | None) -> FakeSession:
        asked.append((profile, region))
        return FakeSession(**clients)

    monkeypatch.setattr(cli_aws, "boto3_session", session)
    return asked


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def reports(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((folder / "profiler-reports").glob("*.json"))}


@pytest.mark.parametrize(
    ("where", "stored_under", "used"),
    [
        ({"profiler": "profiler"}, ("profiler",), "profiler"),
        ({"profiler": "profiler", "sampler": "sampler"}, ("profiler", "sampler", "output"), "profiler"),
        ({"disabled": True, "sampler": "sampler"}, ("profiler", "sampler"), "sampler"),  # DisableProfiler is honoured
        ({"profiler": "empty", "sampler": "sampler"}, ("sampler", "output"), "sampler"),  # ProfilerConfig wrote nothing
        ({}, ("output",), "output"),  # neither: the job's own output path
    ],
    ids=["profiler-config", "profiler-config-first", "sampler-env", "profiler-config-empty", "output-path"],
)
def test_a_job_name_finds_its_profiler_data(s3, monkeypatch, job_files: Path, tmp_path: Path,
                                            where: dict[str, Any], stored_under: tuple[str, ...], used: str):
    for prefix in stored_under:
        upload(s3, job_files, prefix)
    stub = sagemaker_stub(description(**where))
    asked = use_clients(monkeypatch, sagemaker=stub.client, s3=s3)
    code, out, err = run("evaluate", "--training-job", JOB, "--out", str(tmp_path / "job"), "--region", REGION,
                         "--profile", "ml-dev")
    assert code == 0, err
    stub.assert_no_pending_responses()
    assert asked == [("ml-dev", REGION)]
    assert f"{JOB}: reading the profiler data at s3://{BUCKET}/{used}/{JOB}/profiler-output/\n" in err
    assert "ProfilerReport: IssuesFound" in out
    assert run("evaluate", str(job_files), "--out", str(tmp_path / "local"))[0] == 0
    assert reports(tmp_path / "job") == reports(tmp_path / "local") and len(reports(tmp_path / "job")) == 11


def cloudwatch_stub(values: dict[int, float]) -> Stubber:
    stub = Stubber(boto3.client("cloudwatch", region_name=REGION))
    minutes = [START + timedelta(minutes=m) for m in range(31)] if values else []
    stub.add_response(
        "get_metric_data",
        {"MetricDataResults": [{"Id": f"m0_{i}", "Label": "x", "Timestamps": minutes,
                                "Values": [v] * len(minutes), "StatusCode": "Complete"} for i, v in values.items()]},
        {"MetricDataQueries": ANY, "StartTime": START, "EndTime": END + timedelta(minutes=2),
         "ScanBy": "TimestampAscending"},
    )
    stub.activate()
    return stub


def test_without_profiler_data_the_job_is_evaluated_from_cloudwatch(s3, monkeypatch, tmp_path: Path):
    stub = sagemaker_stub(description(disabled=True))
    # ml.g5.12xlarge: 4 GPUs, 48 vCPUs; 120 = 30 % per GPU
    cloudwatch = cloudwatch_stub({0: 120.0, 1: 80.0, 2: 960.0, 3: 40.0, 4: 10.0})
    use_clients(monkeypatch, sagemaker=stub.client, s3=s3, cloudwatch=cloudwatch.client)
    code, out, err = run("evaluate", "--training-job", JOB, "--out", str(tmp_path / "o"), "--format", "json",
                         "--fail-on", "IssuesFound")
    assert code == 1, err
    cloudwatch.assert_no_pending_responses()
    assert (f"{JOB}: no profiler data at s3://{BUCKET}/output/{JOB}/profiler-output/; evaluating SageMaker's "
            "CloudWatch instance metrics instead") in err
    assert "--fail-on IssuesFound: ProfilerReport reached IssuesFound" in err
    verdicts = {v["Rule"]: v["Verdict"] for v in json.loads(out)["rules"][0]["Verdicts"]}
    assert verdicts["LowGPUUtilization"] == "IssuesFound" and verdicts["StepOutlier"] == "NotApplicable"
    assert f"CloudWatch /aws/sagemaker/TrainingJobs (Host={JOB}/algo-*)" in (tmp_path / "o" /
                                                                             "profiler-report.html").read_text()


def test_no_profiler_data_and_no_cloudwatch_metrics_exits_3(s3, monkeypatch, tmp_path: Path):
    stub = sagemaker_stub(description(disabled=True))
    use_clients(monkeypatch, sagemaker=stub.client, s3=s3, cloudwatch=cloudwatch_stub({}).client)
    code, out, err = run("evaluate", "--training-job", JOB, "--out", str(tmp_path / "o"))
    assert code == 3 and out == ""
    assert f"CloudWatch has no instance metrics for Host={JOB}/algo-* in {REGION}" in err and "15 days" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (("ValidationException", "Requested resource not found.", 400),
         f"training job '{JOB}' not found in {REGION}: check the name and --region "
         f"(aws sagemaker list-training-jobs --name-contains {JOB} --region {REGION})"),
        (("AccessDeniedException", f"User: arn:aws:iam::123456789012:user/ci is not authorized to perform: "
          f"sagemaker:DescribeTrainingJob on resource: {JOB}", 400),
         "access denied: sagemaker:DescribeTrainingJob was refused (User: arn:aws:iam::123456789012:user/ci"),
        (("ExpiredTokenException", "The security token included in the request is expired", 400),
         "AWS rejected the credentials (ExpiredTokenException"),
    ],
    ids=["missing-job", "access-denied", "expired-token"],
)
def test_describe_failures_exit_3_with_the_fix(s3, monkeypatch, tmp_path: Path, error: tuple[str, str, int],
                                              expected: str):
    stub = sagemaker_stub(error=error)
    use_clients(monkeypatch, sagemaker=stub.client, s3=s3)
    code, out, err = run("evaluate", "--training-job", JOB, "--out", str(tmp_path / "o"))
    assert code == 3 and out == "" and expected in err and "Traceback" not in err
    stub.assert_no_pending_responses()


def test_listing_the_bucket_denied_names_s3_list_bucket(monkeypatch, tmp_path: Path):
    sagemaker = sagemaker_stub(description(profiler="profiler"))
    s3 = Stubber(boto3.client("s3", region_name=REGION))
    for prefix in ("profiler", "output"):  # each location is tried
        s3.add_client_error("list_objects_v2", "AccessDenied", "Access Denied", 403,
                            expected_params={"Bucket": BUCKET, "Prefix": f"{prefix}/{JOB}/profiler-output/system/",
                                             "ExpectedBucketOwner": "123456789012"})  # the job's account
    s3.activate()
    use_clients(monkeypatch, sagemaker=sagemaker.client, s3=s3.client)
    code, _, err = run("evaluate", "--training-job", JOB, "--out", str(tmp_path / "o"))
    assert code == 3
    assert "access denied: s3:ListBucket was refused (Access Denied). Grant s3:ListBucket to the identity" in err


def test_reading_the_files_denied_names_s3_get_object(s3, monkeypatch, job_files: Path, tmp_path: Path):
    upload(s3, job_files, "profiler")

    def denied(self: S3Store, key: str) -> bytes:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "GetObject")

    monkeypatch.setattr(S3Store, "read", denied)
    use_clients(monkeypatch, sagemaker=sagemaker_stub(description(profiler="profiler")).client, s3=s3)
    code, _, err = run("evaluate", "--training-job", JOB, "--out", str(tmp_path / "o"))
    assert code == 3 and "profiler files could be read" in err
    assert "Grant s3:GetObject to the identity you run as" in err
    assert not (tmp_path / "o").exists()


@pytest.fixture
def no_aws_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A machine with no credentials anywhere (and no instance metadata lookup, which would go to the network)."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
                "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(key, raising=False)
    config = tmp_path / "aws-config"
    config.write_text("[profile ml-dev]\nregion = eu-west-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return config


def test_no_credentials_exit_3_with_how_to_configure_them(no_aws_config, tmp_path: Path):
    code, out, err = run("evaluate", "--training-job", JOB, "--out", str(tmp_path / "o"), "--region", REGION)
    assert code == 3 and out == ""
    assert "error: no usable AWS credentials (Unable to locate credentials): run 'aws configure'" in err


def test_no_credentials_for_an_s3_uri_exit_3_too(no_aws_config, tmp_path: Path):
    code, _, err = run("evaluate", f"s3://{BUCKET}/profiler/{JOB}", "--out", str(tmp_path / "o"))
    assert code == 3 and "no usable AWS credentials" in err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--profile", "ml-dve"], "--profile ml-dve: no such profile in ~/.aws/config or ~/.aws/credentials. "
                                  "Configured profiles: ml-dev. Did you mean 'ml-dev'?"),
        ([], "no AWS region configured: pass --region (e.g. --region us-east-1)"),
        (["--region", "eu west 1"], "--region eu west 1: not a region name"),
    ],
    ids=["unknown-profile", "no-region", "bad-region"],
)
def test_aws_setup_errors_are_usage_errors(no_aws_config, tmp_path: Path, flags: list[str], expected: str):
    code, out, err = run("evaluate", "--training-job", JOB, "--out", str(tmp_path / "o"), *flags)
    assert code == 2 and out == "" and expected in err


def test_an_s3_uri_is_read_with_the_given_profile_and_region(s3, monkeypatch, job_files: Path, tmp_path: Path):
    upload(s3, job_files, "profiler")
    asked = use_clients(monkeypatch, s3=s3)
    code, out, err = run("evaluate", f"s3://{BUCKET}/profiler/{JOB}", "--out", str(tmp_path / "o"),
                         "--profile", "ml-dev", "--region", REGION)
    assert code == 0, err
    assert asked == [("ml-dev", REGION)] and "ProfilerReport: IssuesFound" in out


def test_an_unreadable_location_does_not_stop_the_search(s3, monkeypatch, job_files: Path, tmp_path: Path):
    """The first location (ProfilerConfig's, listing denied) ended the command; the sampler's held the data."""
    upload(s3, job_files, "sampler")
    listing = S3Store.list

    def denied_under_profiler(self: S3Store, prefix: str, start_after: str | None = None):
        if self.prefix.startswith("profiler/"):
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "ListObjectsV2")
        return listing(self, prefix, start_after)

    monkeypatch.setattr(S3Store, "list", denied_under_profiler)
    use_clients(monkeypatch, sagemaker=sagemaker_stub(description(profiler="profiler", sampler="sampler")).client,
                s3=s3)
    code, out, err = run("evaluate", "--training-job", JOB, "--out", str(tmp_path / "o"))
    assert code == 0, err
    assert (f"{JOB}: could not read s3://{BUCKET}/profiler/{JOB}/profiler-output/ (access denied: s3:ListBucket was "
            "refused") in err
    assert f"{JOB}: reading the profiler data at s3://{BUCKET}/sampler/{JOB}/profiler-output/" in err
    assert "ProfilerReport: IssuesFound" in out


def test_no_data_and_an_unreadable_location_is_not_judged_from_cloudwatch(s3, monkeypatch, tmp_path: Path):
    def denied(self: S3Store, prefix: str, start_after: str | None = None):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "ListObjectsV2")

    monkeypatch.setattr(S3Store, "list", denied)
    use_clients(monkeypatch, sagemaker=sagemaker_stub(description(profiler="profiler")).client, s3=s3)
    code, out, err = run("evaluate", "--training-job", JOB, "--out", str(tmp_path / "o"))
    assert code == 3 and out == ""
    assert f"{JOB}: no profiler data found, and 2 location(s) could not be read, so it may be there" in err
    assert "Grant s3:ListBucket" in err


def test_a_job_still_starting_is_said_to_be_starting_not_aged_out(s3, monkeypatch, tmp_path: Path):
    """It was blamed on CloudWatch's 15-day retention."""
    now = datetime.now(timezone.utc)
    starting = description(disabled=True)
    starting.update(TrainingJobStatus="InProgress", SecondaryStatus="Starting", CreationTime=now)
    for key in ("TrainingStartTime", "TrainingEndTime"):
        starting.pop(key)
    use_clients(monkeypatch, sagemaker=sagemaker_stub(starting).client, s3=s3,
                cloudwatch=boto3.client("cloudwatch", region_name=REGION))
    code, out, err = run("evaluate", "--training-job", JOB, "--out", str(tmp_path / "o"))
    assert code == 3 and out == ""
    assert "the job is InProgress (Starting) and has not started training" in err
    assert "15 days" not in err


def test_a_recent_job_without_metrics_is_not_blamed_on_retention():
    recent = description()
    now = recent["TrainingEndTime"].timestamp() + 3600
    assert "15 days" not in cli_aws.no_metrics_reason(recent, now)
    assert cli_aws.no_metrics_reason(recent, now + 16 * 86400) == cli_aws.CLOUDWATCH_RETENTION_HINT


def test_the_job_environment_cannot_send_the_command_to_another_bucket(s3, monkeypatch, job_files: Path,
                                                                      tmp_path: Path):
    """The job's creator wrote its Environment: a sampler URI naming a bucket with data of their choosing (all idle
    GPUs, or all busy ones, for a CI --fail-on gate) is not followed; the job's own output path is read instead, and
    every S3 call carries ExpectedBucketOwner, the job's account."""
    upload(s3, job_files, "output")
    s3.create_bucket(Bucket="chosen-data", CreateBucketConfiguration={"LocationConstraint": REGION})
    for path in sorted(job_files.rglob("*")):
        if path.is_file():
            s3.put_object(Bucket="chosen-data", Key=f"x/{JOB}/profiler-output/{path.relative_to(job_files).as_posix()}",
                          Body=path.read_bytes())
    job = description()
    job["Environment"] = {S3_URI: "s3://chosen-data/x"}
    calls: list[dict[str, Any]] = []
    s3.meta.events.register("before-parameter-build.s3", lambda params, **_: calls.append(dict(params)))
    use_clients(monkeypatch, sagemaker=sagemaker_stub(job).client, s3=s3)

    code, out, err = run("evaluate", "--training-job", JOB, "--out", str(tmp_path / "o"))

    assert code == 0, err
    assert f"{JOB}: reading the profiler data at s3://{BUCKET}/output/{JOB}/profiler-output/" in err
    assert calls and {c["Bucket"] for c in calls} == {BUCKET}
    assert all(c.get("ExpectedBucketOwner") == "123456789012" for c in calls)

