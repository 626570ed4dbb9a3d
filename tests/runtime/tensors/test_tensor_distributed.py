"""DDP (2 processes, gloo), FSDP2 on CPU and a torch.compile'd model, each started by torchrun or python with the
bundle's sitecustomize starting the collector; evaluated through the CLI on the local files."""

from __future__ import annotations

import io
import json
import math
import sys
from pathlib import Path

import pytest
from tensor_jobs import HERE, bundle, finish, job_env

from cdk_sagemaker_debugger import cli
from cdk_sagemaker_debugger.runtime.evaluator.readers import ParseStats
from cdk_sagemaker_debugger.runtime.evaluator.storage import LocalStore
from cdk_sagemaker_debugger.runtime.evaluator.tensor_data import combine, parse_step_lines, step_of

torch = pytest.importorskip("torch")

SCRIPT = HERE / "distributed.py"
CONFIG = {"save_interval": 10, "weights": True, "gradients": True, "updates": True, "relu_output": True}
HEALTHY_RULES = ["VanishingGradient", "ExplodingTensor", "DeadRelu", "WeightUpdateRatio"]


def launch(args: list[str], env: dict[str, str]):
    import subprocess

    env = {**env, "PYTHONPATH": f"{env['PYTHONPATH']}:{HERE}"}
    return subprocess.Popen([sys.executable, *args], env=env, cwd=HERE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def torchrun(mode: str) -> list[str]:
    return ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(SCRIPT), mode]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """DDP, FSDP and compile, run at the same time; name -> (local tensor folder, output)."""
    root = tmp_path_factory.mktemp("distributed")
    bundle_dir = bundle(root / "bundle")
    started = {
        "ddp": launch(torchrun("ddp"), job_env(bundle_dir, root / "ddp", CONFIG)),
        "fsdp": launch(torchrun("fsdp"), job_env(bundle_dir, root / "fsdp", CONFIG)),
        "compile": launch([str(SCRIPT), "compile", "vanishing"], job_env(bundle_dir, root / "compile", CONFIG)),
    }
    out = {}
    for name, process in started.items():
        try:
            out[name] = (root / name, finish(process, timeout=900))
        except AssertionError as failure:
            out[name] = (root / name, f"FAILED {failure}")
    return out


def evaluate(folder: Path, rules: list[str], tmp_path: Path) -> dict[str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    args = ["evaluate", str(folder), "--out", str(tmp_path), "--format", "json", "--quiet"]
    for rule in rules:
        args += ["--rule", rule]
    assert cli.main(args, stdout=stdout, stderr=stderr) == 0, stderr.getvalue()
    return {r["RuleConfigurationName"]: r["RuleEvaluationStatus"] for r in json.loads(stdout.getvalue())["rules"]}


def sources(folder: Path) -> set[str]:
    return {p.relative_to(folder).parent.as_posix() for p in folder.rglob("*.jsonl")}


def combined_step(folder: Path, step: int):
    store, stats = LocalStore(folder), ParseStats()
    files = []
    for item in store.list(""):
        found = step_of(item.key)
        if found and found[1] == step:
            files.append((found[0], parse_step_lines(store.read(item.key), item.key, stats)))
    return combine(step, files, stats)


def status(folder: Path, rank: int) -> dict:
    return json.loads((folder / "status" / f"algo-1-{rank}.json").read_text())


def test_ddp_records_on_local_rank_0_only(runs, tmp_path: Path):
    folder, output = runs["ddp"]
    assert "rank 0 done" in output and "rank 1 done" in output, output
    assert sources(folder) == {"algo-1/00000"}
    assert status(folder, 0)["mode"] == "replicated" and status(folder, 1)["mode"] == "off"
    assert status(folder, 0)["failures"] == {} and status(folder, 1)["failures"] == {}
    assert evaluate(folder, HEALTHY_RULES, tmp_path) == dict.fromkeys(HEALTHY_RULES, "NoIssuesFound")


def test_fsdp_shards_add_up_to_the_ddp_tensors(runs, tmp_path: Path):
    folder, output = runs["fsdp"]
    if "fully_shard" in output and "ImportError" in output:
        pytest.skip(f"this torch has no FSDP2 on CPU: {output[-300:]}")
    assert "rank 0 done" in output and "rank 1 done" in output, output
    assert sources(folder) == {"algo-1/00000", "algo-1/00001"}
    assert status(folder, 0)["mode"] == status(folder, 1)["mode"] == "sharded"
    sharded, replicated = combined_step(folder, 0), combined_step(runs["ddp"][0], 0)
    for kind in ("gradient", "weight", "update"):
        assert set(sharded.get(kind)) == set(replicated.get(kind)) == {f"{i}.{p}" for i in (0, 2, 4)
                                                                         for p in ("weight", "bias")}
        for name, whole in replicated.get(kind).items():
            parts = sharded.get(kind)[name]
            assert parts["sources"] == 2 and whole["sources"] == 1
            for field in ("n", "sum", "sumsq", "abs_sum", "zero", "min", "max"):
                if field in whole:
                    assert math.isclose(parts[field], whole[field], rel_tol=1e-4, abs_tol=1e-7), (kind, name, field)
    assert evaluate(folder, HEALTHY_RULES, tmp_path) == dict.fromkeys(HEALTHY_RULES, "NoIssuesFound")


def test_a_compiled_model_keeps_training_and_is_recorded(runs, tmp_path: Path):
    folder, output = runs["compile"]
    if "FAILED" in output and ("InvalidCxxCompiler" in output or "no C++ compiler" in output.lower()):
        pytest.skip(f"torch.compile cannot compile on this platform (no working C++ compiler): {output[-300:]}")
    assert "compiled: OptimizedModule" in output, output
    assert status(folder, 0)["failures"] == {} and status(folder, 0)["steps"] == 30
    step = combined_step(folder, 10)
    assert "0.weight" in step.get("gradient")  # named from the compiled module's parameters, without _orig_mod.
    assert not step.get("relu")  # module hooks do nothing inside compiled code (docs/tensor-rules.md)
    assert evaluate(folder, ["VanishingGradient"], tmp_path) == {"VanishingGradient": "IssuesFound"}
