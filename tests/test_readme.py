"""The README stays true: the catalog table matches the catalog, the quickstart runs, docs sections match their source."""

from __future__ import annotations

import re
import subprocess
import sys

from helpers import ROOT

from cdk_sagemaker_debugger.model.profiler_catalog import catalog_markdown

README = (ROOT / "README.md").read_text()


def test_rule_catalog_table_is_generated_from_the_catalog():
    match = re.search(r"<!-- rule-catalog:start -->\n(.*?)\n<!-- rule-catalog:end -->", README, re.DOTALL)
    assert match, "README lost its rule-catalog markers"
    assert match.group(1) == catalog_markdown(), (
        "README catalog table is stale; regenerate it with "
        "python -c 'from cdk_sagemaker_debugger.model.profiler_catalog import catalog_markdown; print(catalog_markdown())'"
    )


def test_readme_shows_the_two_commands():
    assert "make synth" in README and "make test" in README


def test_quickstart_runs_as_written(tmp_path, monkeypatch):
    block = next(b for b in re.findall(r"```python\n(.*?)```", README, re.DOTALL) if "ProfiledTrainingJob(stack" in b)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block, "README quickstart", "exec"), namespace)  # noqa: S102 - executing our own documentation
    job = namespace["job"]
    assert job.job_name_prefix == "resnet"
    assert [r.name for r in namespace["rule_set"].rules] == ["ProfilerReport", "LowGPUUtilization"]
    assert job.evaluator is not None and job.sampler is not None  # the quick start needs no Debugger


def test_generated_parts_are_current():
    """Catalog table and the sections copied from docs/*.md (regenerate with python tools/sync_readme.py)."""
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "sync_readme.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_non_cdk_examples_in_readme_hold():
    from cdk_sagemaker_debugger import images, rules

    config = rules.LowGPUUtilization(threshold_p95=80).to_rule_configuration(region="us-west-2")
    assert f"'RuleEvaluatorImage': '{config['RuleEvaluatorImage']}'" in README
    assert images.builtin_rule_image("cn-north-1") in README


def test_rule_stubs_are_current():
    """rules.pyi gives type checkers the signatures of the generated rule classes."""
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "generate_stubs.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
