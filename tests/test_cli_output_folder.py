"""``cdk-sagemaker-debugger evaluate --out``: a folder that cannot be written fails before the evaluation (which can
take minutes), with a message naming the folder; a write failure afterwards is a message, not a traceback."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cdk_sagemaker_debugger import cli
from cdk_sagemaker_debugger.runtime.evaluator.synthetic import JobSpec, write_job


def small_job(tmp_path: Path) -> Path:
    return write_job(tmp_path / "po", JobSpec(minutes=2, gpus=1, cores=2, interval_ms=1000))


def test_out_that_cannot_be_written_fails_before_the_evaluation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = small_job(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("")

    def never(*args, **kwargs):
        raise AssertionError("evaluated although --out is unusable")

    monkeypatch.setattr(cli, "evaluate_store", never)
    err = io.StringIO()
    assert cli.main(["evaluate", str(root), "--out", str(blocker / "report")], stdout=io.StringIO(),
                    stderr=err) == cli.EXIT_USAGE
    assert err.getvalue() == f"error: --out {blocker / 'report'}: {blocker} is a file, so no folder can be created under it\n"


def test_out_without_write_permission_fails_before_the_evaluation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = small_job(tmp_path)

    monkeypatch.setattr(cli.os, "access", lambda path, mode: False)  # as root every folder is writable
    err = io.StringIO()
    assert cli.main(["evaluate", str(root), "--out", str(tmp_path / "out")], stdout=io.StringIO(),
                    stderr=err) == cli.EXIT_USAGE
    assert err.getvalue() == (f"error: --out {tmp_path / 'out'}: {tmp_path} is not writable by you; pick a folder you "
                              "can write to\n")


def test_a_write_failure_after_the_evaluation_is_an_error_message_not_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = small_job(tmp_path)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cli, "write_outputs", full)
    err = io.StringIO()
    assert cli.main(["evaluate", str(root), "--out", str(tmp_path / "out")], stdout=io.StringIO(),
                    stderr=err) == cli.EXIT_UNWRITABLE
    assert err.getvalue() == (f"error: the rules were evaluated but the report could not be written to "
                              f"{tmp_path / 'out'}: [Errno 28] No space left on device. Free some space or pass another "
                              "--out\n")


