"""A plain training loop: AdamW with linear warm-up and decay, gradient clipping, a progress bar, loss history.

The caller owns the model and the data: it passes the parameters to optimise and a function giving the loss of
step i (sampling its own batch), so the loop reads the same for any objective.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


@dataclass(frozen=True)
class TrainConfig:
    steps: int  # optimiser steps
    lr: float  # peak learning rate
    warmup_steps: int = 0  # linear warm-up from 0 to lr, then linear decay to 0 at `steps`
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0  # clip the global gradient norm (0: no clipping)
    seed: int = 0  # torch seed set before the first step


def train_loop(
    parameters: Iterable[torch.nn.Parameter],
    loss_at_step: Callable[[int], torch.Tensor],
    config: TrainConfig,
    description: str = "training",
    progress: bool = True,
) -> list[float]:
    """Minimise loss_at_step(i) for i = 0..steps-1; returns the loss of every step."""
    torch.manual_seed(config.seed)
    params = [p for p in parameters if p.requires_grad]
    if not params:
        raise ValueError("train_loop: no parameter requires a gradient")
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)

    def schedule(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        return max(0.0, (config.steps - step) / max(1, config.steps - config.warmup_steps))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    history: list[float] = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("loss {task.fields[loss]:.4f}"),
               TimeRemainingColumn())
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task(description, total=config.steps, loss=float("nan"))
        for step in range(config.steps):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_at_step(step)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"{description}: loss is {loss.item()} at step {step}; lower the learning rate")
            loss.backward()
            if config.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            history.append(float(loss.detach()))
            bar.update(task, advance=1, loss=history[-1])
    return history
