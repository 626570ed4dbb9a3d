"""Text that comes from data (a profiler file's key or content, an exception, an evaluator summary) reaches a
verdict's StatusDetails, the evaluation summary, the e-mail and the SMS as one short line without control characters,
labelled as machine-reported, whatever the training code wrote. The one function (model/contract.py, shipped to each
Lambda as contract_shared.py) and each path that uses it."""

from __future__ import annotations

import hashlib
import json
import unicodedata

import pytest

from cdk_sagemaker_debugger.model import contract
from cdk_sagemaker_debugger.runtime.evaluator import contract_shared as evaluator_contract
from cdk_sagemaker_debugger.runtime.evaluator.readers import ParseStats, label_key
from cdk_sagemaker_debugger.runtime.rule_alarm import contract_shared as alarm_contract

FAKE_LINES = ("RuleEvaluationConditionMet\nAction:        StopTrainingJob was called; the job is stopping.\r\n"
              "Console:       https://phish.example/login\n")
HOSTILE = {
    "fake lines": FAKE_LINES,
    "ansi and control": "\x1b[2J\x1b[31mred\x1b[0m \x1b]0;title\x07 bell\x07 nul\x00 del\x7f c1\x85\x9b31m",
    "10 KB": "A" * 10_240,
    "unicode separators": "one\u2028two\u2029three\u0085four\u000bfive\u000cseven",
    "bidi and zero width": "safe\u202eevil\u202c \u200bzero\u2066iso\u2069 \ufeffbom",
    "lone surrogate": "bad\udcffbytes",
}


def _unsafe(text: str) -> list[str]:
    return [ch for ch in text if unicodedata.category(ch)[0] == "C" or unicodedata.category(ch) in ("Zl", "Zp")]


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_reported_text_is_one_short_line_without_control_characters(value: str) -> None:
    text = contract.reported_text(value)
    assert _unsafe(text) == [] and "\n" not in text and "\r" not in text
    assert len(text) <= contract.MAX_REPORTED_CHARS == 200
    assert text == text.strip() and "  " not in text


def test_the_words_survive_and_the_cut_is_visible() -> None:
    assert contract.reported_text(FAKE_LINES) == ("RuleEvaluationConditionMet Action: StopTrainingJob was called; the "
                                                  "job is stopping. Console: https://phish.example/login")
    assert contract.reported_text("\x1b[31mred\x1b[0m text") == "red text"  # the escape sequence, not just ESC
    assert contract.reported_text("A" * 10_240) == "A" * 197 + "..."
    assert contract.machine_reported("disk\nfull", 20) == "machine-reported: disk full"
    assert contract.reported_text(KeyError("gpu\n0")) == "'gpu\\n0'"  # exceptions by their str()


def test_every_lambda_uses_the_one_definition() -> None:
    assert evaluator_contract.reported_text("a\nb") == alarm_contract.reported_text("a\nb") == "a b"
    assert evaluator_contract.MACHINE_REPORTED == alarm_contract.MACHINE_REPORTED == "machine-reported: "


def test_problems_are_kept_as_single_lines() -> None:
    stats = ParseStats()
    for value in HOSTILE.values():
        stats.note(f"problem: {value}")
    assert all(_unsafe(p) == [] and len(p) <= 500 for p in stats.problems)
    restored = ParseStats.from_dict({**stats.to_dict(), "problems": [FAKE_LINES]})  # a state written by anyone
    assert "\n" not in restored.problems[0]


def test_keys_are_named_by_layout_or_by_hash_never_by_chosen_text() -> None:
    canonical = "system/incremental/2025112907/1764400020.algo-1.json"
    assert label_key(canonical) == canonical  # digits and fixed words only: where the file is, for a person to find
    assert label_key("framework/pevents/2025112907/1764400020000000_51-algo-2_pythontimeline.json.gz").startswith(
        "framework/pevents/")
    hostile = "system/x\nAction: stopped/1764400020.algo-1.json"
    assert label_key(hostile) == "file sha256:" + hashlib.sha256(hostile.encode()).hexdigest()[:12]
    assert "Action" not in label_key("system/incremental/2025112907/1764400020.algo-1.json\nAction: x")


def test_an_email_with_hostile_details_and_findings_has_no_injected_lines() -> None:
    from cdk_sagemaker_debugger.runtime.rule_alarm.ledger import Transition
    from cdk_sagemaker_debugger.runtime.rule_alarm.message import JobView, compose
    from cdk_sagemaker_debugger.runtime.rule_alarm.reports import Findings

    job = JobView("exp-1", "arn:aws:sagemaker:us-east-1:123456789012:training-job/exp-1", "InProgress", "Training",
                  "s3://bucket/output", {})
    transition = Transition(job_name="exp-1", rule="StepOutlier\nAction: x", status="Error",
                            details=FAKE_LINES + "A" * 10_000, reported_by="RuleEvaluator")
    findings = Findings("The rule could not be evaluated", (("StepOutlier", HOSTILE["ansi and control"]),), (), None)
    message = compose(job, transition, stop_outcome=None, findings=findings)
    lines = message.email.splitlines()
    assert [line for line in lines if line.startswith(("Action:", "Console:"))] == [
        "Console:       https://us-east-1.console.aws.amazon.com/sagemaker/home?region=us-east-1#/jobs/exp-1"]
    [details] = [line for line in lines if line.startswith("Details:")]
    assert details.startswith("Details:       machine-reported: RuleEvaluationConditionMet Action: StopTrainingJob")
    assert len(details) <= len("Details:       machine-reported: ") + 200
    assert all(_unsafe(line) == [] for line in lines)
    assert "Why (machine-reported by the evaluator):" in lines
    assert _unsafe(message.sms) == [] and "\n" not in message.sms
    assert json.loads(json.dumps(message.publish_request("arn:aws:sns:us-east-1:123456789012:t")["Message"]))
