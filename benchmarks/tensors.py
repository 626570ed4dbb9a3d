#!/usr/bin/env python3
"""Overhead of the tensor collector on training step time, against no collector, in the same process.

    python benchmarks/tensors.py [--rounds 10]

A CPU training (an MLP of 4 x 1024-wide layers, 4.2 M parameters, batch 64, Adam, one thread) with the collector
recording weights, gradients and update norms (VanishingGradient, ExplodingTensor, WeightUpdateRatio, AllZero). On a
machine shared with other work a block's mean step time moves by more than the effect measured, so the benchmark
takes medians of single steps from short interleaved blocks, ``--rounds`` times each:

* the hooks alone: the collector installed but not sampling, against no collector (blocks of 50 steps);
* a sampled step: the collector at save_interval 1 (every step sampled), against no collector (blocks of 20 steps).

The ratio at save_interval N is 1 + (hooks - base + (sampled - base) / N) / base, printed for 500 and 100 with the
targets (under 1 % at 500, under 3 % at 100). The collector writes to a temporary folder (no upload).
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


def steps_with(step, steps: int, interval: int | None, folder: str) -> list[float]:
    """Wall time of each of ``steps`` steps, with the collector at ``interval`` (None: no collector)."""
    if interval is not None:
        config = {"version": 1, "save_interval": interval, "weights": {}, "gradients": {}, "updates": {}}
        if not api.start(config, local_dir=folder, node="algo-1", env={}):
            raise SystemExit("the collector did not start")
        step()  # step 0 is always sampled: outside the measured steps when measuring the hooks alone
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    if interval is not None:
        status = api.status() or {}
        api.stop()
        if status.get("failures"):
            raise SystemExit(f"the collector failed: {status}")
    return times


def interleaved(step, rounds: int, steps: int, interval: int, folder: str) -> tuple[float, float]:
    """(median step without, median step with the collector at ``interval``) over interleaved blocks."""
    base: list[float] = []
    other: list[float] = []
    for _ in range(rounds):
        base += steps_with(step, steps, None, folder)
        other += steps_with(step, steps, interval, folder)
    return statistics.median(base), statistics.median(other)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    step, parameters = make_training()
    for _ in range(20):  # warm-up: allocator, Adam state
        step()
    with tempfile.TemporaryDirectory() as folder:
        base_a, hooks = interleaved(step, args.rounds, 50, 10**9, folder)
        base_b, sampled = interleaved(step, args.rounds, 20, 1, folder)
    base = statistics.mean([base_a, base_b])
    print(f"model: {parameters / 1e6:.1f} M parameters; median step {base * 1e3:.2f} ms; hooks alone "
          f"{(hooks - base_a) * 1e6:+.0f} us/step; a sampled step {(sampled - base_b) * 1e3:+.2f} ms")
    worst = 0.0
    for interval, target in TARGETS.items():
        ratio = 1 + ((hooks - base_a) + (sampled - base_b) / interval) / base
        overhead = (ratio - 1) * 100
        worst = max(worst, overhead - target)
        print(f"save_interval {interval}: ratio {ratio:.4f} ({overhead:+.2f} %, target < {target:g} %) "
              f"{'ok' if overhead < target else 'OVER TARGET'}")
    return 0 if worst < 0 else 1


if __name__ == "__main__":
    sys.exit(main())
