#!/usr/bin/env python3
"""Overhead of the tensor collector on training step time, against no collector, in the same process.

    python benchmarks/tensors.py [--rounds 10]

A CPU training (an MLP of 4 x 1024-wide layers, 4.2 M parameters, batch 64, Adam, one thread) with the collector
recording weights, gradients and update norms (VanishingGradient, ExplodingTensor, WeightUpdateRatio, AllZero). On a
machine shared with other work, step times drift by more than the effect measured, so the benchmark pairs short
blocks with and without the collector, takes the difference of their median step times pair by pair, and reports the
median difference (drift between pairs cancels out):

* the hooks alone: the collector installed but not sampling, on a tiny model (their cost per step does not depend
  on the model, and on a tiny model many steps fit in a short block), CPU time of the training thread per step;
* a sampled step: the collector at save_interval 1, every step sampled (CPU time of the process, the writer thread
  included).

The ratio at save_interval N is 1 + (hooks + sampled / N) / step, printed for 500 and 100 with the targets (under 1 %
at 500, under 3 % at 100). The collector writes to a temporary folder (no upload).
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


def steps_with(step, steps: int, interval: int | None, folder: str, clock) -> list[float]:
    """``clock`` time of each of ``steps`` steps, with the collector at ``interval`` (None: no collector)."""
    if interval is not None:
        config = {"version": 1, "save_interval": interval, "weights": {}, "gradients": {}, "updates": {}}
        if not api.start(config, local_dir=folder, node="algo-1", env={}):
            raise SystemExit("the collector did not start")
        step()  # step 0 is always sampled: outside the measured steps when measuring the hooks alone
    times = []
    for _ in range(steps):
        started = clock()
        step()
        times.append(clock() - started)
    if interval is not None:
        status = api.status() or {}
        api.stop()
        if status.get("failures"):
            raise SystemExit(f"the collector failed: {status}")
    return times


def paired(step, pairs: int, steps: int, interval: int, folder: str, clock) -> tuple[float, float]:
    """(median step time without the collector, median over pairs of the added time per step at ``interval``)."""
    base: list[float] = []
    added: list[float] = []
    for _ in range(pairs):
        without = steps_with(step, steps, None, folder, clock)
        with_collector = steps_with(step, steps, interval, folder, clock)
        base += without
        added.append(statistics.median(with_collector) - statistics.median(without))
    return statistics.median(base), statistics.median(added)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12, help="pairs of sampled blocks (3x as many for the hooks)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    step, parameters = make_training()
    for _ in range(20):  # warm-up: allocator, Adam state
        step()
    tiny, _ = make_training(width=4, layers=1, batch=2)
    for _ in range(200):
        tiny()
    with tempfile.TemporaryDirectory() as folder:
        _, hooks = paired(tiny, args.rounds, 500, 10**9, folder, time.thread_time)
        base, sampled = paired(step, args.rounds, 4, 1, folder, time.process_time)
    print(f"model: {parameters / 1e6:.1f} M parameters; median step {base * 1e3:.2f} ms CPU; hooks alone "
          f"{hooks * 1e6:+.0f} us/step; a sampled step {sampled * 1e3:+.2f} ms")
    worst = 0.0
    for interval, target in TARGETS.items():
        ratio = 1 + (hooks + sampled / interval) / base
        overhead = (ratio - 1) * 100
        worst = max(worst, overhead - target)
        print(f"save_interval {interval}: ratio {ratio:.4f} ({overhead:+.2f} %, target < {target:g} %) "
              f"{'ok' if overhead < target else 'OVER TARGET'}")
    return 0 if worst < 0 else 1


if __name__ == "__main__":
    sys.exit(main())
