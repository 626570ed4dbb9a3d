"""The three layers import in one direction only (read from the source, so a violation cannot hide in a branch)."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT

PACKAGE = ROOT / "src" / "cdk_sagemaker_debugger"


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            prefix = "." * node.level
            names.add(f"{prefix}{node.module or ''}")
    return names


def offenders(folder: Path, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*.py")):
        for name in imported_modules(path):
            if any(name == f or name.startswith(f"{f}.") for f in forbidden):
                found.append(f"{path.relative_to(ROOT)} imports {name}")
    return found


def test_model_imports_neither_aws_cdk_nor_boto3():
    assert offenders(PACKAGE / "model", ("aws_cdk", "constructs", "jsii", "boto3")) == []


def module_name(path: Path) -> str:
    """The dotted name of a module of the package (``cdk_sagemaker_debugger.model.request.members``)."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    if not name.startswith(f"{PACKAGE.name}."):
        return False
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def resolved_imports(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports resolved (local and TYPE_CHECKING imports included);
    ``from package import module`` counts the module."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - (node.level - 1)], *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names if _is_module(f"{base}.{alias.name}"))
    return names


def test_model_does_not_import_constructs_or_runtime():
    bad = [f for f in offenders(PACKAGE / "model", ("cdk_sagemaker_debugger",))]
    escaping = [
        f"{p.relative_to(ROOT)} imports {n}"
        for p in (PACKAGE / "model").rglob("*.py")
        for n in resolved_imports(p)
        if n.startswith("cdk_sagemaker_debugger.") and not n.startswith("cdk_sagemaker_debugger.model")
    ]
    assert bad == [] and escaping == []


def test_resolved_imports_see_relative_imports_of_a_subpackage():
    """The checks above and in test_import_cycles.py read relative imports resolved: a subpackage's ``..x``."""
    members = resolved_imports(PACKAGE / "model" / "request" / "members.py")
    assert "cdk_sagemaker_debugger.model.errors" in members
    job = resolved_imports(PACKAGE / "constructs" / "training_job" / "__init__.py")
    assert {"cdk_sagemaker_debugger.constructs.family", "cdk_sagemaker_debugger.constructs.training_job.steps"} <= job


def test_runtime_imports_no_cdk_and_nothing_outside_its_subpackage():
    runtime = PACKAGE / "runtime"
    assert offenders(runtime, ("aws_cdk", "constructs", "jsii", "cdk_sagemaker_debugger")) == []
    escaping = [
        f"{p.relative_to(ROOT)} imports {n}"
        for p in runtime.rglob("*.py")
        for n in imported_modules(p)
        if n.startswith("..") and p.parent != runtime  # a subpackage must stay importable as a top-level package
    ]
    assert escaping == []


def test_importing_the_model_and_cli_does_not_start_jsii():
    import subprocess
    import sys

    code = (
        "import sys, cdk_sagemaker_debugger.rules, cdk_sagemaker_debugger.images, cdk_sagemaker_debugger.debugger_rules\n"
        "import cdk_sagemaker_debugger.cli\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'jsii', 'constructs')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_lambda_assets_and_the_sampler_never_import_the_progress_bar():
    """tqdm is a dependency of the command line only: nothing under runtime/ (what the assets ship) may need it."""
    assert offenders(PACKAGE / "runtime", ("tqdm", "rich")) == []
    assert "tqdm" in imported_modules(PACKAGE / "cli_progress.py")


def _loaded_after(imports: str, roots: tuple[str, ...]) -> list[str]:
    import subprocess
    import sys

    code = f"import sys\n{imports}\nprint(sorted(m for m in sys.modules if m.split('.')[0] in {roots!r}))"
    return eval(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def test_the_runtime_packages_load_as_the_lambdas_load_them_without_tqdm():
    imports = (f"sys.path.insert(0, {str(PACKAGE / 'runtime')!r})\n"
               "import evaluator.lambda_handler, evaluator.engine, rule_alarm.handler, gpu_watch.handler, sampler.contract")
    assert _loaded_after(imports, ("tqdm", "rich")) == []


def test_importing_the_cli_loads_neither_tqdm_nor_boto3():
    """Both load when a command needs them (a bar on a terminal, an S3 URI or a job name), not at start."""
    assert _loaded_after("import cdk_sagemaker_debugger.cli", ("tqdm", "rich", "boto3")) == []


def test_the_shared_contract_is_one_file_linked_into_the_lambda_packages():
    """The strings and the job family both layers share live in model/contract.py. The runtime cannot import the
    model (each asset holds one runtime package), so each package that needs it holds a symbolic link to that one
    file, which the asset staging follows (runtime_function: follow_symlinks=ALWAYS); the file imports only the
    standard library, so it runs unchanged on either side."""
    contract = PACKAGE / "model" / "contract.py"
    linked = sorted(p for p in (PACKAGE / "runtime").glob("*/contract_shared.py"))
    assert [p.parent.name for p in linked] == ["evaluator", "gpu_watch", "rule_alarm"]
    assert all(p.is_symlink() and p.resolve() == contract.resolve() for p in linked)
    stdlib = {"__future__", "json", "re", "unicodedata", "collections.abc", "dataclasses", "typing"}
    assert imported_modules(contract) <= stdlib
