"""What the Lambda reads again: a minute uploaded again under its key, and the state of each evaluator (moto S3)."""
# ruff: noqa: F811  (pytest injects the imported fixture "aws" by parameter name)

from __future__ import annotations

import json
from datetime import datetime, timezone

from evaluator_jobs import report, small_spec
from test_evaluator_lambda import (  # the moto fixture "aws" is used as a parameter below
    BUCKET,
    JOB,
    REPORTS,
    SETTINGS,
    STATE_KEY,
    aws,  # noqa: F401
    clients_for,
    describe,
    load_state,
    sagemaker_stub,
)

from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as lh
from cdk_sagemaker_debugger.runtime.evaluator.contract_shared import JobFamily
from cdk_sagemaker_debugger.runtime.evaluator.engine import RuleConfig
from cdk_sagemaker_debugger.runtime.evaluator.reading import evaluate_store
from cdk_sagemaker_debugger.runtime.evaluator.report import report_files
from cdk_sagemaker_debugger.runtime.evaluator.storage import LocalStore
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import constant, write_job

ENDED = datetime(2025, 11, 29, 7, 20, tzinfo=timezone.utc)


def _key(relative: str) -> str:
    return f"profiler/{JOB}/profiler-output/{relative}"


def test_a_minute_flushed_early_is_read_again_when_its_complete_version_arrives(aws, tmp_path):
    """sampler.flush() publishes the current minute under its final key; the complete minute comes later under the
    same key. The rest of that minute is evaluated, so the verdicts are those of the complete files."""
    root = write_job(tmp_path / "po", small_spec(minutes=5, gpu_util=constant(5.0)))
    files = sorted(p for p in root.rglob("*") if p.is_file() and "system/incremental" in p.as_posix())
    flushed = files[2]
    for path in files[:2]:
        aws["s3"].put_object(Bucket=BUCKET, Key=_key(path.relative_to(root).as_posix()), Body=path.read_bytes())
    lines = flushed.read_bytes().splitlines(keepends=True)
    aws["s3"].put_object(Bucket=BUCKET, Key=_key(flushed.relative_to(root).as_posix()),
                         Body=b"".join(lines[: len(lines) // 3]))  # the flushed third of the minute
    sm, stub = sagemaker_stub(describe(), describe("Completed", end=ENDED))
    first = lh.evaluate_job(JOB, SETTINGS, clients_for(aws, sm), deadline=float("inf"))
    assert first["result"] == "in progress"

    for path in sorted(p for p in root.rglob("*") if p.is_file()):  # the complete minute, the rest, the end markers
        aws["s3"].put_object(Bucket=BUCKET, Key=_key(path.relative_to(root).as_posix()), Body=path.read_bytes())
    final = lh.evaluate_job(JOB, SETTINGS, clients_for(aws, sm), deadline=float("inf"))
    assert final["result"] == "final"
    one_shot = evaluate_store(LocalStore(root), [report()], read_workers=1)
    for relative, text in report_files(one_shot.results(final=True)).items():
        written = aws["s3"].get_object(Bucket=BUCKET, Key=f"{REPORTS}/{relative}")["Body"].read().decode()
        assert written == text, relative
    stub.assert_no_pending_responses()


def test_a_minute_rewritten_after_it_was_read_is_reported_not_counted_twice(aws, tmp_path):
    root = write_job(tmp_path / "po", small_spec(minutes=4, gpu_util=constant(40.0)))
    files = sorted(p for p in root.rglob("*") if p.is_file() and "system/incremental" in p.as_posix())
    for path in files:
        aws["s3"].put_object(Bucket=BUCKET, Key=_key(path.relative_to(root).as_posix()), Body=path.read_bytes())
    sm, _ = sagemaker_stub(describe(), describe())
    lh.evaluate_job(JOB, SETTINGS, clients_for(aws, sm), deadline=float("inf"))
    newest = files[-1]
    aws["s3"].put_object(Bucket=BUCKET, Key=_key(newest.relative_to(root).as_posix()),
                         Body=b"\n".join(reversed(newest.read_bytes().splitlines())) + b"\n")
    lh.evaluate_job(JOB, SETTINGS, clients_for(aws, sm), deadline=float("inf"))
    problems = load_state(aws["s3"])["evaluator"]["stats"]["problems"]
    assert any(newest.name in p and "uploaded again after it was evaluated" in p and "not evaluated again" in p
               for p in problems)


def test_two_evaluators_over_the_same_jobs_each_evaluate_their_own_rules(aws, tmp_path):
    root = write_job(tmp_path / "po", small_spec(minutes=3, gpu_util=constant(40.0)))
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        aws["s3"].put_object(Bucket=BUCKET, Key=_key(path.relative_to(root).as_posix()), Body=path.read_bytes())
    other = lh.Settings(family=JobFamily(job_name_prefix="exp-"), read_workers=2,
                        rules=[RuleConfig("LowGpu", "LowGPUUtilization", {})])
    assert other.evaluator_id != SETTINGS.evaluator_id
    sm, _ = sagemaker_stub(describe("Completed"), describe("Completed"))
    first = lh.evaluate_job(JOB, SETTINGS, clients_for(aws, sm), deadline=float("inf"))
    second = lh.evaluate_job(JOB, other, clients_for(aws, sm), deadline=float("inf"))
    assert first["result"] == second["result"] == "final"
    assert list(first["statuses"]) == ["ProfilerReport"] and second["statuses"] == {"LowGpu": "IssuesFound"}
    assert load_state(aws["s3"], other)["published"] == {"LowGpu": "IssuesFound"}
    summary = json.loads(aws["s3"].get_object(
        Bucket=BUCKET, Key=f"output/{JOB}/rule-output/LowGpu/evaluator-output/evaluation-summary.json")["Body"].read())
    assert summary["rules"][0]["RuleToInvoke"] == "LowGPUUtilization"


def test_state_and_lease_objects_carry_the_tag_the_lifecycle_rule_expires_old_versions_by(aws, tmp_path):
    root = write_job(tmp_path / "po", small_spec(minutes=2))
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        aws["s3"].put_object(Bucket=BUCKET, Key=_key(path.relative_to(root).as_posix()), Body=path.read_bytes())
    sm, _ = sagemaker_stub(describe("Completed"))
    assert lh.evaluate_job(JOB, SETTINGS, clients_for(aws, sm), deadline=float("inf"))["result"] == "final"
    for key in (STATE_KEY, STATE_KEY + ".lease"):
        tags = aws["s3"].get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"]
        assert tags == [{"Key": "cdk-sagemaker-debugger", "Value": "evaluator-state"}], key
