"""A plain training loop: AdamW with linear warm-up and decay, gradient clipping, a progress bar, loss history.

The caller owns the model and the data: it passes the parameters to optimise and a step function giving the named
losses of step i (sampling its own batch; "loss" is the one minimised, any other is a logged component), so the loop
reads the same for any objective: fit -> TrainingReport. train_loop is fit for a single loss.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

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


@dataclass
class TrainingReport:
    """What a fit did: every named loss at every step ("loss" the minimised one), the steps and the wall time."""

    losses: dict[str, list[float]] = field(default_factory=dict)
    steps: int = 0
    seconds: float = 0.0

    def final(self, name: str = "loss", last: int = 50) -> float | None:
        """Mean of the last `last` values of loss `name` (None when no step ran)."""
        tail = self.losses.get(name, [])[-last:]
        return sum(tail) / len(tail) if tail else None


def fit(
    parameters: Iterable[torch.nn.Parameter],
    step: Callable[[int], Mapping[str, torch.Tensor]],
    config: TrainConfig,
    description: str = "training",
    progress: bool = True,
) -> TrainingReport:
    """Minimise step(i)["loss"] for i = 0..steps-1; every loss step(i) names is recorded (as a float) per step."""
    start = time.perf_counter()
    torch.manual_seed(config.seed)
    params = [p for p in parameters if p.requires_grad]
    if not params:
        raise ValueError(f"{description}: no parameter requires a gradient")
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)

    def schedule(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        return max(0.0, (config.steps - step) / max(1, config.steps - config.warmup_steps))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    report = TrainingReport()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("loss {task.fields[loss]:.4f}"),
               TimeRemainingColumn())
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task(description, total=config.steps, loss=float("nan"))
        for i in range(config.steps):
            optimizer.zero_grad(set_to_none=True)
            losses = step(i)
            loss = losses["loss"]
            if not torch.isfinite(loss):
                raise FloatingPointError(f"{description}: loss is {loss.item()} at step {i}; lower the learning rate")
            loss.backward()
            if config.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            optimizer.step()
            scheduler.step()
            for name, value in losses.items():
                report.losses.setdefault(name, []).append(float(value.detach()))
            report.steps = i + 1
            bar.update(task, advance=1, loss=report.losses["loss"][-1])
    report.seconds = time.perf_counter() - start
    return report


def train_loop(
    parameters: Iterable[torch.nn.Parameter],
    loss_at_step: Callable[[int], torch.Tensor],
    config: TrainConfig,
    description: str = "training",
    progress: bool = True,
) -> list[float]:
    """Minimise loss_at_step(i) for i = 0..steps-1; returns the loss of every step."""
    return fit(parameters, lambda i: {"loss": loss_at_step(i)}, config, description, progress).losses.get("loss", [])
