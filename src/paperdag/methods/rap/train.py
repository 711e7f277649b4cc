"""Training one arm: L1 on waypoints over the arm's samples, batches holding a fixed share of real-camera samples
(the deployment domain), early stopping on the validation L2 of held-out real frames, plus R2R's two switchable
terms: the domain-adversarial BCE behind the gradient reversal layer and the paired raster/real feature distance,
with the real features as the anchor (detached) as the official code does."""

from __future__ import annotations

import copy
import time
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
    waypoints (N, K, 2) in the vehicle frame, and which samples are real-camera logs (N,) bool."""

    images: np.ndarray
    status: np.ndarray
    target: np.ndarray
    real: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.images)


@dataclass(frozen=True)
class TrainConfig:
    steps: int  # at most; early stopping may end sooner
    batch_size: int
    lr: float
    channels: tuple[int, ...]
    feature_dim: int
    domain_adversarial: bool  # R2R part 1: DANN classifier behind the GRL
    paired_l2: bool  # R2R part 2: distance between features of paired raster and real views
    domain_weight: float
    pair_weight: float
    pair_batch: int
    real_share: float = 0.5  # share of every batch drawn from the real-camera samples when the arm has other kinds
    eval_every: int = 100  # steps between validation L2 evaluations
    patience: int = 0  # evaluations without a better validation L2 before stopping (0: run every step)
    anchor_real: bool = True  # R2R: real-domain features detached, the raster ones move towards them
    pair_distance: str = "cosine"  # "cosine": 1 - cos(f_raster, f_real); "l2": mean squared difference (scale-dependent)


def batch_indices(samples: Samples, size: int, share: float, rng: np.random.Generator) -> np.ndarray:
    """`size` sample indices: round(share * size) drawn uniformly from the real-camera samples, the rest uniformly
    from the others; uniform over all when the arm has one kind only."""
    real = samples.real if samples.real is not None else np.ones(len(samples), bool)
    if real.all() or not real.any():
        return rng.integers(len(samples), size=size)
    n_real = round(share * size)
    real_idx, other_idx = np.flatnonzero(real), np.flatnonzero(~real)
    return np.concatenate([real_idx[rng.integers(len(real_idx), size=n_real)], other_idx[rng.integers(len(other_idx), size=size - n_real)]])


def pair_terms(f_raster: torch.Tensor, f_real: torch.Tensor, distance: str) -> tuple[torch.Tensor, dict[str, float]]:
    """The paired feature loss (f_raster, f_real: (P, F)) and both its scale-free and raw forms for the record."""
    cos = 1.0 - F.cosine_similarity(f_raster, f_real, dim=1).mean()
    l2 = (f_raster - f_real).pow(2).mean()
    record = {"pair_cosine": cos.item(), "pair_l2": l2.item(),
              "pair_l2_normalised": (l2 / (f_raster.pow(2).mean() + f_real.pow(2).mean()).clamp_min(1e-12)).item()}
    return (cos if distance == "cosine" else l2), record


def train_planner(samples: Samples, raster: np.ndarray, real: np.ndarray, cfg: TrainConfig, seed: int, val: Samples | None = None,
                  description: str = "rap train") -> tuple[Planner, list[dict[str, float]]]:
    """Fit a planner with AdamW (linear decay over cfg.steps). raster / real: paired views (P, H, W, 3) of the same
    scenes, used only by the R2R terms. With `val`, the validation L2 is measured every cfg.eval_every steps, the
    best weights are kept, and training stops after cfg.patience evaluations without improvement. Returns the
    model and one dict of losses per step (val_l2 on evaluation steps)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    _, h, w, _ = samples.images.shape
    model = Planner(h, w, cfg.channels, cfg.feature_dim, samples.target.shape[1])
    critic = DomainClassifier(cfg.feature_dim)
    align = cfg.domain_adversarial or cfg.paired_l2
    if align and len(raster) != len(real):
        raise ValueError(f"R2R needs paired views: {len(raster)} raster vs {len(real)} real")
    if cfg.pair_distance not in ("cosine", "l2"):
        raise ValueError(f"pair_distance {cfg.pair_distance!r}: use 'cosine' or 'l2'")
    params = list(model.parameters()) + (list(critic.parameters()) if cfg.domain_adversarial else [])
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 - s / max(1, cfg.steps))
    status = torch.from_numpy(samples.status).float()
    target = torch.from_numpy(samples.target).float()
    history, best, best_state, stale = [], np.inf, None, 0
    for step in track(range(cfg.steps), description=description):
        model.train()
        idx = batch_indices(samples, cfg.batch_size, cfg.real_share, rng)
        pred = model(images_to_tensor(samples.images[idx]), status[idx])
        plan = (pred - target[idx]).abs().mean()
        loss = plan
        record = {"l1": plan.item(), "real_share": float(samples.real[idx].mean()) if samples.real is not None else 1.0}
        if align:
            j = rng.integers(len(raster), size=cfg.pair_batch)
            f_raster = model.features(images_to_tensor(raster[j]))
            f_real = model.features(images_to_tensor(real[j]))
            anchor = f_real.detach() if cfg.anchor_real else f_real  # (P, F)
            if cfg.domain_adversarial:
                lam = dann_lambda(step / max(1, cfg.steps - 1))
                logits = critic(grad_reverse(torch.cat([anchor, f_raster]), lam))
                labels = torch.cat([torch.ones(len(j)), torch.zeros(len(j))])
                domain = F.binary_cross_entropy_with_logits(logits, labels)
                loss = loss + cfg.domain_weight * domain
                record |= {"domain_bce": domain.item(), "lambda": lam,
                           "domain_acc": float(((logits > 0).float() == labels).float().mean())}
            pair, pair_record = pair_terms(f_raster, anchor, cfg.pair_distance)
            record |= pair_record
            if cfg.paired_l2:
                loss = loss + cfg.pair_weight * pair
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if val is not None and ((step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps):
            record["val_l2"] = float(np.linalg.norm(predict(model, val.images, val.status) - val.target, axis=-1).mean())
            if record["val_l2"] < best:
                best, best_state, stale = record["val_l2"], copy.deepcopy(model.state_dict()), 0
            else:
                stale += 1
        history.append(record)
        if cfg.patience and stale >= cfg.patience:
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    return model.eval(), history


@torch.no_grad()
def predict(model: Planner, images: np.ndarray, status: np.ndarray, batch: int = 256) -> np.ndarray:
    """Waypoints (N, K, 2) for images (N, H, W, 3) uint8 and status (N, 2)."""
    model.eval()
    out = [model(images_to_tensor(images[i : i + batch]), torch.from_numpy(status[i : i + batch]).float()).numpy()
           for i in range(0, len(images), batch)]
    return np.concatenate(out) if out else np.zeros((0, model.waypoints, 2))


def samples_of(train_set: pl.DataFrame, sources: list[str], images: dict[str, np.ndarray]) -> Samples:
    """The rows of the training table of the given sample kinds, with their images picked from `images` (name ->
    (N, H, W, 3) array, as the table's `image` column names them); real_log rows are the real-camera samples."""
    rows = train_set.filter(pl.col("source").is_in(sources))
    picked = np.zeros((len(rows), *images["real"].shape[1:]), np.uint8)
    kind, index = rows["image"].to_numpy(), rows["index"].to_numpy()
    for name, array in images.items():
        sel = kind == name
        picked[sel] = array[index[sel]]
    target = np.array(rows["target"].to_list(), np.float32)
    return Samples(picked, rows.select("speed", "accel").to_numpy().astype(np.float32), target.reshape(len(rows), -1, 2),
                   (rows["source"] == "real_log").to_numpy())


def frames_samples(frames: pl.DataFrame, real: np.ndarray) -> Samples:
    """Logged frames (columns frame, speed, accel, target) as real-camera samples: validation and open-loop sets."""
    idx = frames["frame"].to_numpy()
    target = np.array(frames["target"].to_list(), np.float32).reshape(len(idx), -1, 2)
    return Samples(real[idx], frames.select("speed", "accel").to_numpy().astype(np.float32), target, np.ones(len(idx), bool))


def train_arm(train_set: pl.DataFrame, frames: pl.DataFrame, images: dict[str, np.ndarray], sources: list[str], cfg: TrainConfig,
              seed: int, description: str = "rap train") -> tuple[Planner, dict[str, object]]:
    """One arm's planner on its sample kinds of the training table, R2R on the real_log frames paired with their
    rasters, early-stopped on the real frames of the validation split; with its training stats."""
    start = time.perf_counter()
    samples = samples_of(train_set, sources, images)
    val = frames.filter(pl.col("split") == "val")
    if not len(val):
        raise ValueError("train: frames.parquet has no validation frames (params.yaml rap.synthesize.val_scenarios)")
    paired = train_set.filter(pl.col("source") == "real_log")["index"].to_numpy()
    model, history = train_planner(samples, images["raster"][paired], images["real"][paired], cfg, seed, frames_samples(val, images["real"]),
                                   description)
    stats = {"samples": len(samples), "samples_by_source": dict(train_set.filter(pl.col("source").is_in(sources)).group_by("source").len().iter_rows()),
             **history_summary(history), "train_seconds": time.perf_counter() - start}
    return model, stats


def history_summary(history: list[dict[str, float]]) -> dict[str, object]:
    """Each logged value's mean over the last tenth of the steps, the L1 per step, the validation L2 curve, the
    steps run and the share of real-camera samples over all batches."""
    tail = history[-max(1, len(history) // 10):]
    keys = [k for k in tail[0] if k != "val_l2"] if tail else []
    val = [(i + 1, h["val_l2"]) for i, h in enumerate(history) if "val_l2" in h]
    return {"final": {k: float(np.mean([h[k] for h in tail])) for k in keys}, "l1": [h["l1"] for h in history],
            "val_l2": [v for _, v in val], "val_steps": [s for s, _ in val], "best_val_l2": min((v for _, v in val), default=None),
            "steps_run": len(history), "real_share": float(np.mean([h["real_share"] for h in history])) if history else None}
