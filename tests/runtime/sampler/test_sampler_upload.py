"""Uploads to moto's S3 server (a real HTTP endpoint) with the standard-library client and with boto3; SigV4 checked
against AWS's documented example and botocore; credentials from each source; failures counted, never raised.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path

import boto3
import pytest
from sampler_fakes import LocalHttp, free_port

from cdk_sagemaker_debugger.runtime.sampler import sigv4
from cdk_sagemaker_debugger.runtime.sampler.credentials import CredentialChain, Credentials, CredentialsError
from cdk_sagemaker_debugger.runtime.sampler.daemon import Daemon
from cdk_sagemaker_debugger.runtime.sampler.settings import Settings
from cdk_sagemaker_debugger.runtime.sampler.status import Status
from cdk_sagemaker_debugger.runtime.sampler.upload import Uploader

BUCKET = "profiler-bucket"
JOB = "resnet-0123456789abcdef0123"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "token",
               "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def s3_server():
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    client.create_bucket(Bucket=BUCKET)
    yield endpoint, client
    server.stop()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch):
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(key, raising=False)


def local_tree(root: Path) -> dict:
    files = {
        "system/incremental/2026113009/1796029200.algo-1.json": b'{"Type":"cpu"}\n',
        "framework/pevents/2026113009/1796029201000000_0-algo-1_pythontimeline.json": b"[\n]\n",
        "sampler/status-algo-1.json": b"{}",
        ".partial/1796029260.algo-1.json": b"partial, never uploaded",
        "sampler.lock": b"123\n",
    }
    for relative, body in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(body)
    return {k: v for k, v in files.items() if not k.startswith(".") and k != "sampler.lock"}


def objects(client, prefix: str) -> dict:
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {o["Key"][len(prefix):]: client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listed}


def inflated(uploaded: dict) -> dict:
    """The uploaded objects with each ``.json.gz`` as the ``.json`` it was made from (gzip's own reader)."""
    return {key[:-3] if key.endswith(".json.gz") else key: gzip.decompress(body) if key.endswith(".gz") else body
            for key, body in uploaded.items()}


@pytest.mark.parametrize("uploader", ["stdlib", "boto3"])
def test_files_land_under_the_jobs_profiler_prefix(s3_server, aws_env, tmp_path: Path, uploader: str):
    """Plain: Debugger's layout, byte for byte, for the tools that read it."""
    endpoint, client = s3_server
    expected = local_tree(tmp_path)
    settings = Settings(local_dir=str(tmp_path), s3_uri=f"s3://{BUCKET}/runs/{uploader}/", job_name=JOB,
                        uploader=uploader, endpoint_url=endpoint, upload_format="plain")
    status = Status("algo-1", log=print)
    up = Uploader(str(tmp_path), settings, status)
    assert up.cycle() == 3
    assert objects(client, f"runs/{uploader}/{JOB}/profiler-output/") == expected
    assert status.to_dict()["uploader"] == uploader
    assert up.cycle() == 0  # unchanged files are not sent again
    (tmp_path / "sampler/status-algo-1.json").write_bytes(b'{"changed": true}')
    assert up.cycle() == 1


@pytest.mark.parametrize("uploader", ["stdlib", "boto3"])
def test_by_default_data_files_go_gzip_compressed_beside_debuggers_names(s3_server, aws_env, tmp_path: Path,
                                                                        uploader: str):
    """The default format: each data file as ``<its name>.gz`` (the sampler's own files and the end markers plain);
    the local files stay plain, and nothing of the compression is left behind."""
    endpoint, client = s3_server
    expected = local_tree(tmp_path)
    settings = Settings(local_dir=str(tmp_path), s3_uri=f"s3://{BUCKET}/gz/{uploader}/", job_name=JOB,
                        uploader=uploader, endpoint_url=endpoint)
    status = Status("algo-1", log=print)
    assert settings.upload_format == "gzip"
    assert Uploader(str(tmp_path), settings, status).cycle() == 3
    uploaded = objects(client, f"gz/{uploader}/{JOB}/profiler-output/")
    assert sorted(uploaded) == ["framework/pevents/2026113009/1796029201000000_0-algo-1_pythontimeline.json.gz",
                                "sampler/status-algo-1.json", "system/incremental/2026113009/1796029200.algo-1.json.gz"]
    assert inflated(uploaded) == expected
    assert sorted(p.name for p in (tmp_path / ".partial").iterdir()) == ["1796029260.algo-1.json"]
    assert status.to_dict()["counts"]["upload_bytes"] == sum(len(body) for body in uploaded.values())


def test_the_upload_format_is_a_setting(monkeypatch) -> None:
    from cdk_sagemaker_debugger.runtime.sampler.settings import SettingsError, from_environment

    assert from_environment({"CDK_SAGEMAKER_SAMPLER_UPLOAD_FORMAT": "plain"}, local_dir="/tmp/x").upload_format == "plain"
    assert from_environment({}, local_dir="/tmp/x").upload_format == "gzip"
    with pytest.raises(SettingsError, match="CDK_SAGEMAKER_SAMPLER_UPLOAD_FORMAT='zstd': use one of gzip, plain"):
        from_environment({"CDK_SAGEMAKER_SAMPLER_UPLOAD_FORMAT": "zstd"}, local_dir="/tmp/x")


def test_the_daemon_uploads_its_last_minute_when_it_stops(s3_server, aws_env, tmp_path: Path):
    endpoint, client = s3_server
    settings = Settings(local_dir=str(tmp_path), interval_ms=100, s3_uri=f"s3://{BUCKET}/daemon", job_name=JOB,
                        uploader="stdlib", endpoint_url=endpoint, nvml_library=str(tmp_path / "none.so"))
    status = Daemon(settings).run(duration_s=0.6)
    uploaded = inflated(objects(client, f"daemon/{JOB}/profiler-output/"))
    local = {p.relative_to(tmp_path).as_posix(): p.read_bytes() for p in tmp_path.glob("system/incremental/*/*.json")}
    assert local and all(uploaded[key] == body for key, body in local.items())
    assert json.loads(uploaded["sampler/status-algo-1.json"])["counts"]["uploads"] >= 1
    assert status["destination"] == f"s3://{BUCKET}/daemon/{JOB}/profiler-output/"


def test_a_missing_bucket_is_counted_backed_off_and_never_raised(s3_server, aws_env, tmp_path: Path):
    endpoint, _ = s3_server
    local_tree(tmp_path)
    settings = Settings(local_dir=str(tmp_path), s3_uri="s3://no-such-bucket-here/p", job_name=JOB, uploader="stdlib",
                        endpoint_url=endpoint)
    status = Status("algo-1", log=lambda message: None)
    up = Uploader(str(tmp_path), settings, status)
    assert up.cycle() == 0
    assert status.failures == {"upload_http": 1}
    assert "NoSuchBucket" in status.messages[0]
    assert up.cycle() == 0 and status.failures == {"upload_http": 1}  # backing off: no second attempt yet


def test_throttling_is_counted_as_such(aws_env, tmp_path: Path):
    slow_down = (503, {}, b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>")
    server = LocalHttp({})
    server.routes[("PUT", f"/{BUCKET}/p/{JOB}/profiler-output/sampler/status-algo-1.json")] = slow_down
    try:
        (tmp_path / "sampler").mkdir()
        (tmp_path / "sampler/status-algo-1.json").write_bytes(b"{}")
        settings = Settings(local_dir=str(tmp_path), s3_uri=f"s3://{BUCKET}/p", job_name=JOB, uploader="stdlib",
                            endpoint_url=server.url)
        status = Status("algo-1", log=lambda message: None)
        assert Uploader(str(tmp_path), settings, status).cycle() == 0
        assert status.failures == {"upload_throttled": 1} and "SlowDown" in status.messages[0]
        _method, _path, headers, body = server.requests[0]
        headers = {name.lower(): value for name, value in headers.items()}
        assert headers["content-type"] == "application/json"
        assert headers["x-amz-security-token"] == "token" and body == b"{}"
        assert headers["x-amz-content-sha256"] == hashlib.sha256(b"{}").hexdigest()
    finally:
        server.close()


def test_no_job_name_means_no_upload_and_a_counted_reason(tmp_path: Path):
    settings = Settings(local_dir=str(tmp_path), interval_ms=100, s3_uri=f"s3://{BUCKET}/p",
                        nvml_library=str(tmp_path / "none.so"))
    status = Daemon(settings, log=lambda message: None).run(duration_s=0.2)
    assert status["failures"] == {"upload_no_job_name": 1} and "destination" not in status


# ---- SigV4


def test_sigv4_matches_the_aws_documented_s3_put_example():
    """The "PUT Object" example of AWS's SigV4 documentation for S3 (single chunk), with its published signature."""
    credentials = Credentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    payload = hashlib.sha256(b"Welcome to Amazon S3.").hexdigest()
    headers = sigv4.sign("PUT", "examplebucket.s3.amazonaws.com", "/test$file.text", "us-east-1", credentials, payload,
                         {"Date": "Fri, 24 May 2013 00:00:00 GMT", "x-amz-storage-class": "REDUCED_REDUNDANCY"},
                         now=1369353600)
    assert headers["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class, "
        "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")


def test_sigv4_matches_botocore():
    import calendar
    import time

    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials

    body = b'{"Type":"cpu","Name":"cpu0"}\n'
    payload = hashlib.sha256(body).hexdigest()
    url = "https://profiler-bucket.s3.eu-west-1.amazonaws.com/runs/job-1/profiler-output/system/x%20y.algo-1.json"
    request = AWSRequest(method="PUT", url=url, data=body,
                         headers={"Content-Length": str(len(body)), "X-Amz-Content-SHA256": payload})
    S3SigV4Auth(BotoCredentials("AKIDEXAMPLE", "secret/key", "session"), "s3", "eu-west-1").add_auth(request)
    now = calendar.timegm(time.strptime(request.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ"))
    ours = sigv4.sign("PUT", "profiler-bucket.s3.eu-west-1.amazonaws.com",
                      "/runs/job-1/profiler-output/system/x y.algo-1.json", "eu-west-1",
                      Credentials("AKIDEXAMPLE", "secret/key", "session"), payload,
                      {"content-length": str(len(body))}, now=now)
    assert ours["authorization"] == request.headers["Authorization"]


# ---- credentials


def test_environment_credentials_come_first():
    chain = CredentialChain({"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SESSION_TOKEN": "t",
                             "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:9/unused"})
    assert chain.get() == Credentials("a", "s", "t")


def test_container_credentials_endpoint_with_its_token():
    document = {"AccessKeyId": "ASIA1", "SecretAccessKey": "s1", "Token": "t1", "Expiration": "2099-01-01T00:00:00Z"}
    server = LocalHttp({("GET", "/v2/credentials/abc"): (200, {}, json.dumps(document).encode())})
    try:
        chain = CredentialChain({"AWS_CONTAINER_CREDENTIALS_FULL_URI": server.url + "/v2/credentials/abc",
                                 "AWS_CONTAINER_AUTHORIZATION_TOKEN": "Bearer xyz"})
        assert chain.get() == Credentials("ASIA1", "s1", "t1", 4070908800.0)
        assert chain.get() is chain.get()  # cached until shortly before it expires
        assert len(server.requests) == 1 and server.requests[0][2]["Authorization"] == "Bearer xyz"
    finally:
        server.close()


def test_imds_v2_with_a_session_token():
    document = {"AccessKeyId": "ASIA2", "SecretAccessKey": "s2", "Token": "t2", "Expiration": "2099-01-01T00:00:00Z"}
    server = LocalHttp({
        ("PUT", "/latest/api/token"): (200, {}, b"imds-token"),
        ("GET", "/latest/meta-data/iam/security-credentials/"): (200, {}, b"TrainingRole"),
        ("GET", "/latest/meta-data/iam/security-credentials/TrainingRole"): (200, {}, json.dumps(document).encode()),
    })
    try:
        chain = CredentialChain({"AWS_EC2_METADATA_SERVICE_ENDPOINT": server.url})
        assert chain.get().access_key == "ASIA2"
        assert [r[0] for r in server.requests] == ["PUT", "GET", "GET"]
        assert all({k.lower(): v for k, v in r[2].items()}["x-aws-ec2-metadata-token"] == "imds-token"
                   for r in server.requests[1:])
    finally:
        server.close()


def test_no_credentials_says_what_was_tried():
    with pytest.raises(CredentialsError) as error:
        CredentialChain({"AWS_EC2_METADATA_DISABLED": "true"}).get()
    assert "from_environment: not configured" in str(error.value)
    assert "from_container: not configured" in str(error.value)


def test_stdlib_client_urls(monkeypatch: pytest.MonkeyPatch):
    from cdk_sagemaker_debugger.runtime.sampler.s3 import StdlibS3

    assert StdlibS3("eu-west-1", env={}).url("bucket", "a b/c.json") == \
        "https://bucket.s3.eu-west-1.amazonaws.com/a%20b/c.json"
    assert StdlibS3("cn-north-1", env={}).url("my.bucket", "k") == "https://s3.cn-north-1.amazonaws.com.cn/my.bucket/k"
    assert StdlibS3(None, "http://127.0.0.1:5000/", env={}).url("b", "k") == "http://127.0.0.1:5000/b/k"
    assert StdlibS3(None, env={"AWS_REGION": "ap-south-1"}).region == "ap-south-1"
    assert os.environ.get("NOT_USED") is None
