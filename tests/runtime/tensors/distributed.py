"""Distributed and compiled trainings for the collector: ``python distributed.py ddp|fsdp`` under torchrun (gloo,
CPU), ``python distributed.py compile`` in one process. The collector is started by the bundle's sitecustomize."""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
from scenarios import blobs, classify, mlp
from torch import nn


def batches(rank: int, world: int, steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The same global batches in every run; each rank trains on its half of each."""
    x, y = blobs(4096, separation=0.4)
    out = []
    for step in range(steps):
        i = (torch.arange(64) + step * 64) % len(x)
        out.append((x[i].chunk(world)[rank], y[i].chunk(world)[rank]))
    return out


def distributed(mode: str) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model: nn.Module = mlp([16, 32, 32, 2])
    if mode == "ddp":
        model = nn.parallel.DistributedDataParallel(model)
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (world,))
        for layer in (model[0], model[2], model[4]):
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    for x, y in batches(rank, world, 30):
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank} done")


def compiled(scenario: str) -> None:
    """A torch.compile'd model: the hooks are on the optimizer and on modules, not in the graph."""
    torch.manual_seed(0)
    x, y = blobs(4096)
    if scenario == "vanishing":
        model = mlp([16] + [32] * 16 + [2], nn.Sigmoid)
    else:
        model = mlp([16, 32, 32, 2])
        with torch.no_grad():
            model[0].bias.fill_(-100.0)
    compiled_model = torch.compile(model)
    classify(compiled_model, x, y, steps=30, lr=1e-2, optimizer="sgd")
    print("compiled:", type(compiled_model).__name__)


if __name__ == "__main__":
    torch.set_num_threads(1)
    if sys.argv[1] in ("ddp", "fsdp"):
        distributed(sys.argv[1])
    else:
        compiled(sys.argv[2] if len(sys.argv) > 2 else "vanishing")
    sys.stdout.flush()
    os.sync() if hasattr(os, "sync") else None
