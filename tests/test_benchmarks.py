"""The benchmark scripts stay runnable (their imports and options); what they measure is printed by ``make bench``, never
asserted here: timings belong in benchmarks, not in tests."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import ROOT

SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_benchmark_script_starts_and_explains_its_options(script):
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


@pytest.fixture(scope="module")
def synth_benchmark():
    import importlib.util

    spec = importlib.util.spec_from_file_location("synth_benchmark", ROOT / "benchmarks" / "synth.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("engine", ["RuleEngine.DEBUGGER", "RuleEngine.EVALUATOR"])
def test_each_synth_baseline_builds_the_resources_of_its_engine(synth_benchmark, engine):
    """The ratio compares like with like: two jobs of the construct and of its hand-written baseline give the same
    resources, type for type (the stack-wide ones, such as the verdict bus, once)."""
    construct, baseline = synth_benchmark.ENGINES[engine]
    _, ours, _ = synth_benchmark.synth(construct, 2)
    _, theirs, _ = synth_benchmark.synth(baseline, 2)
    ours_types, theirs_types = synth_benchmark.resource_types(ours), synth_benchmark.resource_types(theirs)
    assert ours_types == theirs_types
    assert ours_types["AWS::StepFunctions::StateMachine"] == 2
    if engine == "RuleEngine.EVALUATOR":
        assert ours_types["AWS::Lambda::Function"] == 2
        assert ours_types["AWS::Events::EventBus"] == 1
