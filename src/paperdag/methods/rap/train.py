"""Training one arm: L1 on waypoints over the arm's samples, plus (R2R) the domain-adversarial BCE behind the
gradient reversal layer and the paired raster/real feature L2, each switchable."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import torch
import torch.nn.functional as F
from rich.progress import track

from paperdag.methods.rap.model import (
    DomainClassifier,
    Planner,
    dann_lambda,
    grad_reverse,
    images_to_tensor,
)


@dataclass(frozen=True)
class Samples:
    """Planning samples: camera images (N, H, W, 3) uint8, ego status (N, 2) speed and acceleration, target
    waypoints (N, K, 2) in the vehicle frame."""

    images: np.ndarray
    status: np.ndarray
    target: np.ndarray


@dataclass(frozen=True)
class TrainConfig:
    steps: int
    batch_size: int
    lr: float
    channels: tuple[int, ...]
    feature_dim: int
    domain_adversarial: bool  # R2R part 1: DANN classifier behind the GRL
    paired_l2: bool  # R2R part 2: L2 between features of paired raster and real views
    domain_weight: float
    pair_weight: float
    pair_batch: int


def train_planner(samples: Samples, raster: np.ndarray, real: np.ndarray, cfg: TrainConfig, seed: int,
                  description: str = "rap train") -> tuple[Planner, list[dict[str, float]]]:
    """Fit a planner with AdamW (linear decay). raster / real: paired views (P, H, W, 3) of the same scenes, used only
    by the R2R terms. Returns the model and one dict of losses per step."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    _, h, w, _ = samples.images.shape
    model = Planner(h, w, cfg.channels, cfg.feature_dim, samples.target.shape[1])
    critic = DomainClassifier(cfg.feature_dim)
    align = cfg.domain_adversarial or cfg.paired_l2
    if align and len(raster) != len(real):
        raise ValueError(f"R2R needs paired views: {len(raster)} raster vs {len(real)} real")
    params = list(model.parameters()) + (list(critic.parameters()) if cfg.domain_adversarial else [])
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 - s / max(1, cfg.steps))
    status = torch.from_numpy(samples.status).float()
    target = torch.from_numpy(samples.target).float()
    history = []
    for step in track(range(cfg.steps), description=description):
        idx = rng.integers(len(samples.images), size=cfg.batch_size)
        pred = model(images_to_tensor(samples.images[idx]), status[idx])
        plan = (pred - target[idx]).abs().mean()
        loss, record = plan, {"l1": plan.item()}
        if align:
            j = rng.integers(len(raster), size=cfg.pair_batch)
            f_raster = model.features(images_to_tensor(raster[j]))
            f_real = model.features(images_to_tensor(real[j]))
            if cfg.domain_adversarial:
                lam = dann_lambda(step / max(1, cfg.steps - 1))
                logits = critic(grad_reverse(torch.cat([f_real, f_raster]), lam))
                labels = torch.cat([torch.ones(len(j)), torch.zeros(len(j))])
                domain = F.binary_cross_entropy_with_logits(logits, labels)
                loss = loss + cfg.domain_weight * domain
                record |= {"domain_bce": domain.item(), "lambda": lam,
                           "domain_acc": float(((logits > 0).float() == labels).float().mean())}
            if cfg.paired_l2:
                pair = (f_raster - f_real).pow(2).mean()
                loss = loss + cfg.pair_weight * pair
                record["pair_l2"] = pair.item()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        history.append(record)
    return model, history


@torch.no_grad()
def predict(model: Planner, images: np.ndarray, status: np.ndarray, batch: int = 256) -> np.ndarray:
    """Waypoints (N, K, 2) for images (N, H, W, 3) uint8 and status (N, 2)."""
    model.eval()
    out = [model(images_to_tensor(images[i : i + batch]), torch.from_numpy(status[i : i + batch]).float()).numpy()
           for i in range(0, len(images), batch)]
    return np.concatenate(out) if out else np.zeros((0, model.waypoints, 2))


def samples_of(train_set: pl.DataFrame, sources: list[str], images: dict[str, np.ndarray]) -> Samples:
    """The rows of the training table of the given sample kinds, with their images picked from `images` (name ->
    (N, H, W, 3) array, as the table's `image` column names them)."""
    rows = train_set.filter(pl.col("source").is_in(sources))
    picked = np.zeros((len(rows), *images["real"].shape[1:]), np.uint8)
    kind, index = rows["image"].to_numpy(), rows["index"].to_numpy()
    for name, array in images.items():
        sel = kind == name
        picked[sel] = array[index[sel]]
    target = np.array(rows["target"].to_list(), np.float32)
    return Samples(picked, rows.select("speed", "accel").to_numpy().astype(np.float32), target.reshape(len(rows), -1, 2))


def history_summary(history: list[dict[str, float]]) -> dict[str, object]:
    """Each logged value's mean over the last tenth of the steps, and the L1 per step."""
    tail = history[-max(1, len(history) // 10):]
    return {"final": {k: float(np.mean([h[k] for h in tail])) for k in tail[0]} if tail else {}, "l1": [h["l1"] for h in history]}
