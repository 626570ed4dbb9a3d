#!/usr/bin/env python3
"""Overhead of the tensor collector on training step time, against no collector, in the same process.

    python benchmarks/tensors.py [--steps 1000] [--rounds 3]

A CPU training (an MLP of 4 x 1024-wide layers, 3.2 M parameters, batch 64, Adam, one thread) runs in blocks of
``--steps`` optimizer steps: without the collector, with it at save_interval 500 and at 100 (recording weights,
gradients and update norms: VanishingGradient, ExplodingTensor, WeightUpdateRatio, AllZero), in turn, ``--rounds``
times. Step time is the process's CPU time (the collector's writer thread included), as wall time on a shared
machine varies by more than the effect measured. Each block's mean step time is divided by the mean of the baseline blocks. Targets: under 1 % at 500 and
under 3 % at 100. The collector writes to a temporary folder (no upload).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from cdk_sagemaker_debugger.runtime.tensors import api  # noqa: E402

TARGETS = {500: 1.0, 100: 3.0}


def make_training(width: int = 1024, layers: int = 4, batch: int = 64):
    torch.manual_seed(0)
    modules: list[torch.nn.Module] = [torch.nn.Linear(width, width)]
    for _ in range(layers - 1):
        modules += [torch.nn.ReLU(), torch.nn.Linear(width, width)]
    model = torch.nn.Sequential(*modules)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    x, y = torch.randn(batch, width), torch.randn(batch, width)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()

    return step, sum(p.numel() for p in model.parameters())


def block(step, steps: int, interval: int | None, folder: str) -> float:
    if interval is not None:
        config = {"version": 1, "save_interval": interval, "weights": {}, "gradients": {}, "updates": {}}
        if not api.start(config, local_dir=folder, node="algo-1", env={}):
            raise SystemExit("the collector did not start")
    started = time.process_time()  # CPU time of the whole process (the writer thread included): the machine's
    for _ in range(steps):          # other load changes wall time far more than the collector does
        step()
    elapsed = time.process_time() - started
    if interval is not None:
        status = api.status() or {}
        api.stop()
        if status.get("failures"):
            raise SystemExit(f"the collector failed: {status}")
    return elapsed / steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    step, parameters = make_training()
    for _ in range(20):  # warm-up: allocator, Adam state
        step()
    times: dict[int | None, list[float]] = {None: [], 500: [], 100: []}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.rounds):
            for interval in times:
                times[interval].append(block(step, args.steps, interval, folder))
    baseline = statistics.mean(times[None])
    print(f"model: {parameters / 1e6:.1f} M parameters; {args.rounds} rounds of {args.steps} steps; "
          f"baseline {baseline * 1e3:.2f} ms CPU/step")
    worst = 0.0
    for interval, target in TARGETS.items():
        ratio = statistics.mean(times[interval]) / baseline
        overhead = (ratio - 1) * 100
        worst = max(worst, overhead - target)
        print(f"save_interval {interval}: ratio {ratio:.4f} ({overhead:+.2f} %, target < {target:g} %) "
              f"{'ok' if overhead < target else 'OVER TARGET'}")
    return 0 if worst < 0 else 1


if __name__ == "__main__":
    sys.exit(main())
