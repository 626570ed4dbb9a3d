"""The health rules on real PyTorch jobs: torchrun --nproc_per_node=2 (gloo, CPU), the sampler started as the
construct starts it (the bundle on PYTHONPATH, the construct's environment variables), then the evaluator.

(a) healthy: NoIssuesFound for TrainingHang, Straggler, DataWait and Dataloader; (b) rank 1 sleeps inside a collective:
with on_hang=exit the process group exits non-zero, and TrainingHang names rank 1; (c) rank 1's data loading slowed:
Straggler and DataWait name rank 1; (d) a fake NVML reporting busy at low power, thermal throttling and an XID:
GPUHealth names the GPU and TrainingHang reports the busy-at-low-power signature.

The sampler's clock is shifted (CDK_SAGEMAKER_SAMPLER_CLOCK_OFFSET_S) so that each run crosses a minute boundary
some seconds after training starts: the evaluator, like the managed rules, never judges the newest minute. The four
jobs run at the same time, towards the same boundary (most of a job's time is waiting for it). How long torchrun takes
to start depends on the machine's load, so the lead is measured first: importing torch in as many interpreters at once
as there are jobs, three times over (the launchers', then the workers'), plus a margin.
"""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sampler_fakes import bundle_zip as make_bundle_zip

from cdk_sagemaker_debugger.runtime.evaluator.engine import STATUS_ISSUES, STATUS_NO_ISSUES, RuleConfig
from cdk_sagemaker_debugger.runtime.evaluator.reading import evaluate_store
from cdk_sagemaker_debugger.runtime.evaluator.storage import LocalStore
from cdk_sagemaker_debugger.runtime.sampler import contract
from cdk_sagemaker_debugger.runtime.sampler.lock import holder_pid

torch = pytest.importorskip("torch", reason="the torchrun scenarios need the 'torch' extra (make venv installs it)")
pytestmark = pytest.mark.torchrun

TRAIN = Path(__file__).resolve().parent.parent / "health_train.py"
WINDOW_US = 5_000_000


SCENARIOS = ("healthy", "hang", "slow-data", "sick-gpus")


@pytest.fixture(scope="module")
def lead_s() -> float:
    """Seconds from launch to the minute boundary: torchrun's start-up for every scenario at once on this machine now,
    plus 8 s of training."""
    started = time.monotonic()
    imports = [subprocess.Popen([sys.executable, "-c", "import torch, torch.distributed"]) for _ in SCENARIOS]
    assert [process.wait(timeout=240) for process in imports] == [0] * len(SCENARIOS)
    return max(15.0, 3.5 * (time.monotonic() - started) + 8.0)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_bundle_zip(tmp_path_factory.mktemp("bundle") / "sampler-bundle.zip")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_job(bundle: Path, tmp_path: Path, scenario: str, boundary: float, offset: float,
              **extra: str) -> subprocess.Popen:
    """torchrun of ``scenario`` in ``tmp_path``: its sampler clock is shifted by ``offset`` and it trains until the
    minute ``boundary`` on that clock (and 2 s more)."""
    local = tmp_path / "local"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CDK_SAGEMAKER_SAMPLER_", "TRAINING_JOB"))}
    env.update({"PYTHONPATH": str(bundle), "CDK_SAGEMAKER_SAMPLER_LOCAL_DIR": str(local),
                "CDK_SAGEMAKER_SAMPLER_CONFIG_DIR": str(tmp_path / "cfg"), "CDK_SAGEMAKER_SAMPLER_CLOCK_OFFSET_S":
                repr(offset), "CDK_SAGEMAKER_SAMPLER_NVML_LIBRARY": str(tmp_path / "none.so"),
                "HEALTH_TRAIN_UNTIL": repr(boundary + 2), "PATH": f"{tmp_path / 'empty'}{os.pathsep}{env['PATH']}",
                "OMP_NUM_THREADS": "1"})
    env.update(contract.environment("s3://bucket/profiler", 100, True))  # what the construct sets (no job name here)
    env.update(extra)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={free_port()}",
               str(TRAIN), "hang" if scenario == "sick-gpus" else scenario]
    return subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def finish_job(process: subprocess.Popen, tmp_path: Path, scenario: str, deadline: float) -> tuple | str:
    """(exit code, stderr, sampler folder) once the job and its sampler have ended, or why not (a message)."""
    local = tmp_path / "local"
    try:
        out, err = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        out, err = process.communicate()
        return f"{scenario}: the job did not end in time\n{err[-3000:]}"
    end = time.monotonic() + 10
    while holder_pid(str(local)) is not None and time.monotonic() < end:  # the sampler's last minute
        time.sleep(0.1)
    first = min((int(p.name.split("_")[0]) for p in local.glob("framework/pevents/*/*.json")), default=None)
    if first is None:
        return f"{scenario}: no timeline was written\n{err[-3000:]}"
    return process.returncode, err, local


@pytest.fixture(scope="module")
def jobs(bundle: Path, tmp_path_factory: pytest.TempPathFactory, lead_s: float) -> dict[str, tuple | str]:
    """Every scenario's job, all started at once: scenario -> (exit code, stderr, sampler folder), or why it failed.
    ``sick-gpus`` (the hang scenario on a fake NVML) is left out when no C compiler can build the fake library."""
    from health_fakes import compile_health_nvml

    folders = {scenario: tmp_path_factory.mktemp(scenario) for scenario in SCENARIOS}
    library = compile_health_nvml(folders["sick-gpus"] / "nvml")
    extra: dict[str, dict[str, str]] = {
        "healthy": {}, "slow-data": {}, "hang": contract.hang_environment("exit", 0.1),
        "sick-gpus": {"CDK_SAGEMAKER_SAMPLER_NVML_LIBRARY": str(library), "FAKE_NVML_UTIL": "100",
                      "FAKE_NVML_POWER_W": "90", "FAKE_NVML_LIMIT_W": "700", "FAKE_NVML_THROTTLE": "0x40",
                      "FAKE_NVML_THROTTLE_GPU": "1", "FAKE_NVML_XID": "79", "FAKE_NVML_XID_GPU": "1",
                      **contract.hang_environment("exit", 0.1)},
    }
    if library is None:
        del extra["sick-gpus"]
    now = time.time()
    boundary = (math.floor(now / 60) + 1) * 60
    offset = boundary - lead_s - now  # the shifted clock reads boundary - lead_s now: every job reaches it in lead_s
    started = {scenario: start_job(bundle, folders[scenario], scenario, boundary, offset, **env)
               for scenario, env in extra.items()}
    deadline = time.monotonic() + lead_s + 90
    return {scenario: finish_job(process, folders[scenario], scenario, deadline)
            for scenario, process in started.items()}


def job(jobs: dict[str, tuple | str], scenario: str) -> tuple:
    if scenario not in jobs:
        pytest.skip("no C compiler to build the fake NVML library")
    if isinstance(jobs[scenario], str):
        pytest.fail(jobs[scenario])
    return jobs[scenario]


def evaluate(local: Path, *rules: tuple) -> dict:
    configs = [RuleConfig(name, name, {"scan_interval_us": str(WINDOW_US), **params}) for name, params in rules]
    evaluator = evaluate_store(LocalStore(local), configs)
    return {r.configuration_name: r for r in evaluator.results(final=True)}, evaluator


def verdicts(result) -> dict:
    return {sub.name: sub.verdict for sub in result.rules}


def test_a_healthy_run_has_no_issues(jobs):
    code, err, local = job(jobs, "healthy")
    assert code == 0, err[-3000:]
    results, evaluator = evaluate(local, ("TrainingHang", {"minutes": "0.1"}), ("Straggler", {}), ("DataWait", {}),
                                  ("Dataloader", {}))
    assert evaluator.windows_evaluated >= 2
    for name in ("TrainingHang", "Straggler", "DataWait", "Dataloader"):
        assert results[name].status == STATUS_NO_ISSUES, (name, results[name].rules[0].reason)
        assert verdicts(results[name]) == {name: STATUS_NO_ISSUES}, (name, results[name].rules[0].reason)
    assert set(results["DataWait"].rules[0].report["Details"]) == {"algo-1-0", "algo-1-1"}  # both ranks judged
    assert results["Dataloader"].rules[0].report["Details"]["num_workers"] == 0  # two ranks: 2 loaders for 2 cores


def test_a_rank_hung_in_a_collective_fails_fast_and_is_named(jobs):
    code, err, local = job(jobs, "hang")
    assert code != 0  # the sampler ended the hung job (finish_job fails the scenario if it had to kill it)
    assert "rank 1: hanging" in err
    assert "TrainingHang on algo-1: no training step or phase" in err and "on_hang=exit" in err  # the job's log
    results, _ = evaluate(local, ("TrainingHang", {"minutes": "0.05"}))
    hang = results["TrainingHang"]
    assert hang.status == STATUS_ISSUES
    details = hang.rules[0].report["Details"]
    assert details["stopped_first"] == ["algo-1-1"], details
    assert "stopped first: rank 1 (algo-1)" in hang.rules[0].reason


def test_a_rank_with_slow_data_is_the_straggler(jobs):
    code, err, local = job(jobs, "slow-data")
    assert code == 0, err[-3000:]
    results, _ = evaluate(local, ("Straggler", {}), ("DataWait", {}), ("TrainingHang", {"minutes": "0.1"}))
    straggler, wait = results["Straggler"].rules[0], results["DataWait"].rules[0]
    assert straggler.verdict == STATUS_ISSUES and wait.verdict == STATUS_ISSUES
    slow = {r for r, d in straggler.report["Details"]["ranks"].items() if d["slow_windows"]}
    assert slow == {"algo-1-1"}, straggler.report["Details"]
    assert {r for r, d in wait.report["Details"].items() if d["windows_over_threshold"]} == {"algo-1-1"}
    assert "rank 1 (algo-1) on algo-1/gpu1" in straggler.reason and "rank 1 (algo-1)" in wait.reason
    assert "rank 0" not in straggler.reason + wait.reason
    assert results["TrainingHang"].status == STATUS_NO_ISSUES


def test_sick_gpus_and_the_hang_signature(jobs):
    code, err, local = job(jobs, "sick-gpus")
    assert code != 0
    results, _ = evaluate(local, ("GPUHealth", {}), ("TrainingHang", {"minutes": "0.05"}))
    health = results["GPUHealth"].rules[0]
    assert health.verdict == STATUS_ISSUES
    problems = {gpu: d["problems"] for gpu, d in health.report["Details"].items() if d["problems"]}
    assert set(problems) == {"algo-1/gpu1"}, problems
    assert any("hardware thermal" in p for p in problems["algo-1/gpu1"])
    assert any(p == "XID 79" for p in problems["algo-1/gpu1"])
    hang = results["TrainingHang"].rules[0]
    assert hang.verdict == STATUS_ISSUES and "busy at low power" in hang.reason
