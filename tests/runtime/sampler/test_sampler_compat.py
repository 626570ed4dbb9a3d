"""The sampler runs in other people's images: standard library only, Python 3.8 syntax and APIs, relative imports.

(test_sampler_bundle.py also runs it under a real Python 3.8 when the machine has one.)
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from cdk_sagemaker_debugger.runtime import sampler

PACKAGE = Path(sampler.__file__).parent
SOURCES = sorted(PACKAGE.glob("*.py"))
# names that exist from Python 3.9 on, and that a 3.8 interpreter lacks
NEWER_APIS = {"removeprefix", "removesuffix", "cache", "is_relative_to", "with_stem", "readlink", "BooleanOptionalAction",
              "zoneinfo", "graphlib", "tomllib", "TaskGroup", "pairwise", "countOf"}


def test_only_the_standard_library_and_relative_imports():
    offenders = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("boto3", "botocore"):
                    offenders.append(f"{path.name}: {name}")
    assert offenders == []


def test_boto3_is_imported_only_where_it_is_optional():
    users = {p.name for p in SOURCES for n in ast.walk(ast.parse(p.read_text()))
             if isinstance(n, (ast.Import, ast.ImportFrom))
             and any(a.split(".")[0] in ("boto3", "botocore") for a in
                     ([x.name for x in n.names] if isinstance(n, ast.Import) else [n.module or ""]))}
    assert users == {"s3.py"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_python_38_syntax(path: Path):
    ast.parse(path.read_text(), filename=str(path), feature_version=(3, 8))


def test_no_api_newer_than_python_38():
    used = {node.attr for path in SOURCES for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute)}
    used |= {node.id for path in SOURCES for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Name)}
    assert used & NEWER_APIS == set()


def test_vermin_finds_nothing_newer_than_38():
    pytest.importorskip("vermin", reason="vermin is not installed (pip install vermin to run this check)")
    run_vermin = "import sys, vermin; sys.exit(vermin.main())"
    result = subprocess.run([sys.executable, "-c", run_vermin, "-t=3.8-", "--no-tips", "--eval-annotations",
                             "--violations", str(PACKAGE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
