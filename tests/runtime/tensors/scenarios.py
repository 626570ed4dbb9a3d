"""Small real CPU trainings for the tensor rules, each a few seconds: ``python scenarios.py NAME``.

The collector is not imported here: the sampler bundle's sitecustomize starts it when this script imports torch,
as in a training job. Every scenario is deterministic (fixed seeds, one thread).
"""

from __future__ import annotations

import sys

import torch
from torch import nn


def blobs(n: int, classes: int = 2, minority: float | None = None, dim: int = 16, separation: float = 3.0
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian clusters; ``minority`` gives class 1 that share of the samples (else balanced)."""
    g = torch.Generator().manual_seed(1)
    if minority is None:
        y = torch.arange(n) % classes
    else:
        y = (torch.rand(n, generator=g) < minority).long()
    centers = torch.randn(classes, dim, generator=g) * separation
    x = centers[y] + torch.randn(n, dim, generator=g)
    return x, y


def mlp(widths: list[int], activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(widths[:-2], widths[1:-1], strict=False):
        layers += [nn.Linear(a, b), activation()]
    layers.append(nn.Linear(widths[-2], widths[-1]))
    return nn.Sequential(*layers)


def classify(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int, lr: float, batch: int = 32,
             optimizer: str = "adam") -> None:
    params = [p for p in model.parameters()]
    opt = torch.optim.Adam(params, lr=lr) if optimizer == "adam" else torch.optim.SGD(params, lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(steps):
        i = (torch.arange(batch) + step * batch) % len(x)
        opt.zero_grad()
        loss = loss_fn(model(x[i]), y[i])
        loss.backward()
        opt.step()
    print(f"final loss {loss.item():.4g}")


def healthy() -> None:
    x, y = blobs(4096, separation=0.4)  # overlapping classes: the loss keeps a gradient to follow
    classify(mlp([16, 32, 32, 2]), x, y, steps=60, lr=3e-3)


def vanishing() -> None:
    x, y = blobs(4096)
    classify(mlp([16] + [32] * 16 + [2], nn.Sigmoid), x, y, steps=30, lr=1e-2, optimizer="sgd")


def exploding() -> None:
    """Regression with a learning rate far too large: the weights grow geometrically to Inf, then NaN."""
    x, _ = blobs(4096)
    target = x.sum(1, keepdim=True) * 10
    model = mlp([16, 32, 32, 1])
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(40):
        i = (torch.arange(32) + step * 32) % len(x)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x[i]), target[i])
        loss.backward()
        opt.step()
    print(f"final loss {loss.item():.4g}")


def frozen() -> None:
    x, y = blobs(4096)
    model = mlp([16, 32, 32, 2])
    model[0].requires_grad_(False)  # still handed to the optimizer, which skips it: its weights never change
    classify(model, x, y, steps=60, lr=1e-2)


def dead_relu() -> None:
    x, y = blobs(4096)
    model = mlp([16, 32, 32, 2])
    with torch.no_grad():
        model[0].bias.fill_(-100.0)  # a bad bias: every unit of the first ReLU is negative for every input
    classify(model, x, y, steps=60, lr=1e-3)


def imbalanced() -> None:
    x, y = blobs(4096, minority=0.04)
    classify(mlp([16, 32, 32, 2]), x, y, steps=60, lr=1e-2)


SCENARIOS = {f.__name__: f for f in (healthy, vanishing, exploding, frozen, dead_relu, imbalanced)}

if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(1)
    SCENARIOS[sys.argv[1]]()
