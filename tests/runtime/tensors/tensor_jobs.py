"""Running the scenario trainings the way a training job runs them: the sampler bundle on PYTHONPATH, the collector
configured by the job's environment, its files uploaded to S3 (moto's server, real HTTP) or kept locally."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cdk_sagemaker_debugger.runtime.sampler.bundle import write_bundle
from cdk_sagemaker_debugger.runtime.tensors import contract

HERE = Path(__file__).parent
SCENARIOS = HERE / "scenarios.py"
#: What the five scenario rules need (model/tensor_rules.py renders the same for these rules).
CONFIG = {"save_interval": 10, "weights": True, "gradients": True, "updates": True, "unchanged": {"rtol": 1e-05},
          "relu_output": True, "labels": {"samples": 500}}
RULES = ["VanishingGradient", "ExplodingTensor", "UnchangedTensor", "DeadRelu", "ClassImbalance",
         "WeightUpdateRatio", "AllZero"]
#: scenario -> the rule that must find an issue (healthy: none may)
EXPECTED = {"healthy": None, "vanishing": "VanishingGradient", "exploding": "ExplodingTensor",
            "frozen": "UnchangedTensor", "dead_relu": "DeadRelu", "imbalanced": "ClassImbalance"}


def bundle(folder: Path) -> Path:
    write_bundle(folder)
    return folder


def job_env(bundle_dir: Path, local: Path, config: dict | None = None, **extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    return {**keep, "PYTHONPATH": str(bundle_dir), contract.CONFIG: json.dumps(config or CONFIG),
            contract.LOCAL_DIR: str(local), "CDK_SAGEMAKER_SAMPLER_DISABLED": "1",
            "CDK_SAGEMAKER_SAMPLER_CONFIG_DIR": str(local / "no-config"), "OMP_NUM_THREADS": "1", **extra}


def start(scenario: str, env: dict[str, str], script: Path = SCENARIOS) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(script), scenario], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen, timeout: float = 300) -> str:
    out, err = process.communicate(timeout=timeout)
    if process.returncode != 0:
        raise AssertionError(f"training failed ({process.returncode}):\n{out}\n{err}")
    return out + err
