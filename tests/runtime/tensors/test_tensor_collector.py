"""The collector in-process: records only sampled steps, never raises into training, counts what it drops."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tensor_jobs import bundle, job_env

from cdk_sagemaker_debugger.runtime.tensors import api, contract, writer

torch = pytest.importorskip("torch")


def train(steps: int, *, freeze: bool = False) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()
    for _ in range(steps):
        x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()


def recorded_steps(folder: Path) -> list[int]:
    return sorted(int(p.stem) for p in folder.glob("algo-1/00000/*.jsonl"))


@pytest.fixture
def collecting(tmp_path: Path):
    def start(**config):
        parsed = contract.parse(json.dumps({"save_interval": 5, **config}))
        assert api.start(parsed, local_dir=str(tmp_path), node="algo-1", env={})
        return tmp_path
    yield start
    api.stop()


def test_only_every_save_interval_th_step_is_recorded(collecting):
    folder = collecting(weights=True, gradients=True, updates=True)
    train(12)
    api.stop()
    assert recorded_steps(folder) == [0, 5, 10]
    lines = [json.loads(line) for line in (folder / "algo-1/00000/000000000005.jsonl").read_text().splitlines()]
    assert {(r["kind"], r["name"]) for r in lines} == {(k, f"{i}.{p}") for k in ("gradient", "weight", "update")
                                                       for i in (0, 2) for p in ("weight", "bias")}
    weight = next(r for r in lines if r["kind"] == "weight" and r["name"] == "0.weight")
    assert weight["n"] == 128 and weight["nan"] == 0 and weight["min"] <= weight["max"]
    status = json.loads((folder / "status/algo-1-0.json").read_text())
    assert status["steps"] == 12 and status["files"] == 3 and status["failures"] == {}


def test_a_failing_reduction_stops_the_collector_and_training_goes_on(collecting, monkeypatch):
    from cdk_sagemaker_debugger.runtime.tensors import collector

    def broken(torch, tensor):
        raise RuntimeError("device lost")

    monkeypatch.setattr(collector, "param_stats", broken)
    folder = collecting(weights=True)
    train(12)  # would raise here if the collector let it through
    status = api.status()
    api.stop()
    assert status["failures"] == {"collector": 1}
    assert "device lost" in status["messages"][0]
    assert recorded_steps(folder) == []
    assert json.loads((folder / "status/algo-1-0.json").read_text())["failures"] == {"collector": 1}


def test_nan_and_inf_are_counted_and_written_as_strings(collecting):
    folder = collecting(weights=True)
    model = torch.nn.Linear(4, 1)
    with torch.no_grad():
        model.weight[0, 0] = float("nan")
        model.weight[0, 1] = float("inf")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.ones(1, 4)).sum().backward()
    optimizer.step()
    api.stop()
    records = [json.loads(line) for line in (folder / "algo-1/00000/000000000000.jsonl").read_text().splitlines()]
    [weight] = [r for r in records if r["kind"] == "weight" and r["name"] == "weight"]
    assert weight["nan"] == 1 and weight["inf"] == 1 and weight["sum"] == "nan"


def test_the_disk_budget_drops_steps_instead_of_filling_the_disk(collecting, monkeypatch):
    monkeypatch.setattr(writer, "MAX_LOCAL_BYTES", 3000)
    folder = collecting(weights=True, gradients=True)
    train(30)
    status = api.status()
    api.stop()
    assert status["dropped_steps"] >= 1 and status["failures"]["disk_budget"] >= 1
    assert sum(p.stat().st_size for p in folder.rglob("*.jsonl")) <= 3000


def test_a_failing_upload_keeps_the_file_and_counts(tmp_path: Path):
    class DeniedSink:
        def put(self, relative: str, path: str) -> None:
            raise PermissionError("AccessDenied")

    out = writer.Writer(str(tmp_path), "algo-1", 0, sink=DeniedSink())
    out.submit(0, [{"step": 0, "kind": "weight", "name": "w", "n": 1}])
    out.close(timeout=5)
    status = json.loads((tmp_path / "status/algo-1-0.json").read_text())
    assert status["failures"]["upload"] >= 1 and "uploaded" not in status
    assert (tmp_path / "algo-1/00000/000000000000.jsonl").exists()


def test_configuration_errors_name_the_key():
    with pytest.raises(contract.ConfigError, match="save_interval must be an integer"):
        contract.parse('{"save_interval": 0}')
    with pytest.raises(contract.ConfigError, match="unknown key.*gradient"):
        contract.parse('{"save_interval": 5, "gradient": true}')
    with pytest.raises(contract.ConfigError, match="saturation.tanh minimum"):
        contract.parse('{"saturation": {"tanh": [1, -1]}}')


def test_a_process_without_torch_pays_nothing(tmp_path: Path):
    """The bundle's hook waits for ``import torch``: a process that never imports it prints and writes nothing."""
    env = job_env(bundle(tmp_path / "bundle"), tmp_path / "local")
    result = subprocess.run([sys.executable, "-c", "import json; print('trained')"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == "trained\n" and result.stderr == ""
    assert not (tmp_path / "local").exists()
    assert "torch" not in subprocess.run([sys.executable, "-c", "import sys; print(sorted(sys.modules))"], env=env,
                                         capture_output=True, text=True, timeout=60).stdout


def test_a_bad_configuration_is_one_line_on_stderr_and_training_runs(tmp_path: Path):
    env = {**job_env(bundle(tmp_path / "bundle"), tmp_path / "local"), contract.CONFIG: '{"save_interval": -1}'}
    result = subprocess.run([sys.executable, "-c", "import torch; print('trained')"], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0 and result.stdout == "trained\n"
    assert result.stderr.count("\n") == 1 and "save_interval must be an integer" in result.stderr


def test_the_collector_runs_on_python_38():
    """It ships in the sampler bundle, into training images as old as the sampler supports."""
    pytest.importorskip("vermin", reason="vermin is not installed (pip install vermin to run this check)")
    package = Path(api.__file__).parent
    result = subprocess.run([sys.executable, "-c", "import sys, vermin; sys.exit(vermin.main())", "-t=3.8-",
                             "--no-tips", "--eval-annotations", "--violations", str(package)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr
