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
