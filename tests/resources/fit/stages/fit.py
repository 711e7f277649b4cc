"""A 300-step MLP fit: the smallest training stage whose bits depend on the CPU kernels and thread count."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TrainParams:
    steps: int
    seed: int


def train(params: TrainParams) -> dict[str, object]:
    g = torch.Generator().manual_seed(params.seed)
    x, y = torch.randn(512, 64, generator=g), torch.randn(512, 1, generator=g)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.LayerNorm(256), torch.nn.Linear(256, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(params.steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return {"weights": {k: v.detach().clone() for k, v in model.state_dict().items()}}
