"""Gzip-compressed minute files are read transparently (a ``.json.gz`` key, or a ``.json`` key stored with
``Content-Encoding: gzip``, whose bytes S3 returns as stored), by the CLI's one-shot evaluation and the Lambda's."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from evaluator_jobs import report, small_spec

from cdk_sagemaker_debugger.runtime.evaluator import reading
from cdk_sagemaker_debugger.runtime.evaluator.readers import inflate
from cdk_sagemaker_debugger.runtime.evaluator.reading import evaluate_store
from cdk_sagemaker_debugger.runtime.evaluator.report import report_files
from cdk_sagemaker_debugger.runtime.evaluator.storage import LocalStore
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import StepSpec, write_job

SPEC = small_spec(minutes=3, steps=StepSpec(count=300))


def _profiler_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.json") if p.is_file())


@pytest.mark.parametrize("layout", ["json.gz keys", "Content-Encoding gzip"])
def test_gzip_minute_files_give_the_reports_of_the_plain_files(tmp_path: Path, layout: str):
    plain = write_job(tmp_path / "plain", SPEC)
    expected = report_files(evaluate_store(LocalStore(plain), [report()], read_workers=1).results(final=True))
    packed = tmp_path / "packed"
    shutil.copytree(plain, packed)
    for path in _profiler_files(packed):
        body = gzip.compress(path.read_bytes())
        if layout == "json.gz keys":
            path.with_name(path.name + ".gz").write_bytes(body)
            path.unlink()
        else:
            path.write_bytes(body)
    ev = evaluate_store(LocalStore(packed), [report()], read_workers=1)
    assert ev.stats.bad_files == 0 and ev.stats.problems == []
    assert report_files(ev.results(final=True)) == expected


def test_a_gzip_file_that_inflates_past_the_file_limit_is_reported_not_read(tmp_path: Path, monkeypatch):
    root = write_job(tmp_path / "po", SPEC)
    first = _profiler_files(root / "system")[0]
    monkeypatch.setattr(reading, "MAX_FILE_BYTES", first.stat().st_size - 1)  # every plain file still fits
    first.write_bytes(gzip.compress(first.read_bytes() + b"\n" * 64))
    ev = evaluate_store(LocalStore(root), [report()], read_workers=1)
    assert any(first.name in p and "once decompressed; the file is not evaluated" in p for p in ev.stats.problems)


def test_damaged_gzip_streams_are_refused_with_the_reason():
    body = gzip.compress(b'{"a": 1}\n' * 1000)
    with pytest.raises(ValueError, match="truncated"):
        inflate(body[: len(body) // 2], 1 << 20)
    with pytest.raises(ValueError, match="not a valid gzip stream"):
        inflate(body[:10] + b"\x00" * 50, 1 << 20)
    assert inflate(b'{"plain": true}\n', 1 << 20) == b'{"plain": true}\n'
    assert inflate(body + gzip.compress(b"more\n"), 1 << 20).endswith(b"more\n")
