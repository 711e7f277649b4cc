"""The planner (small CNN encoder + MLP waypoint head) and R2R's domain classifier behind a gradient reversal layer.

Ganin & Lempitsky (2015) DANN: features f, classifier D, loss BCE(D(GRL_lambda(f)), domain); the GRL is the identity
forward and multiplies the gradient by -lambda backward, lambda = 2 / (1 + exp(-10 p)) - 1 with p the training progress.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class Planner(nn.Module):
    """images (B, 3, H, W) in [0, 1], ego status (B, 2) -> pooled features (B, F) -> waypoints (B, K, 2)."""

    def __init__(self, height: int, width: int, channels: tuple[int, ...], feature_dim: int, waypoints: int):
        super().__init__()
        layers, c_in = [], 3
        for c in channels:
            layers += [nn.Conv2d(c_in, c, 3, stride=2, padding=1), nn.ReLU()]
            c_in = c
        self.encoder = nn.Sequential(*layers, nn.Flatten())
        scale = 2 ** len(channels)
        flat = c_in * math.ceil(height / scale) * math.ceil(width / scale)
        self.pool = nn.Sequential(nn.Linear(flat, feature_dim), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(feature_dim + 2, 128), nn.ReLU(), nn.Linear(128, 2 * waypoints))
        self.waypoints = waypoints

    def features(self, images: torch.Tensor) -> torch.Tensor:
        return self.pool(self.encoder(images - 0.5))  # (B, F)

    def plan(self, features: torch.Tensor, status: torch.Tensor) -> torch.Tensor:
        out = self.head(torch.cat([features, status * torch.tensor([0.1, 0.5])], dim=1))
        return 10.0 * out.view(-1, self.waypoints, 2)  # metres

    def forward(self, images: torch.Tensor, status: torch.Tensor) -> torch.Tensor:
        return self.plan(self.features(images), status)


class _Reverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, lam: float) -> torch.Tensor:
        ctx.lam = lam
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return -ctx.lam * grad, None


def grad_reverse(x: torch.Tensor, lam: float) -> torch.Tensor:
    """Identity forward; gradient times -lam backward."""
    return _Reverse.apply(x, lam)


def dann_lambda(progress: float) -> float:
    """DANN's schedule lambda = 2 / (1 + exp(-10 p)) - 1 for training progress p in [0, 1]."""
    return 2.0 / (1.0 + math.exp(-10.0 * progress)) - 1.0


class DomainClassifier(nn.Module):
    """3-layer MLP on pooled features -> logit of "real"."""

    def __init__(self, feature_dim: int, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(feature_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features).squeeze(-1)


def images_to_tensor(images) -> torch.Tensor:
    """(B, H, W, 3) uint8 numpy -> (B, 3, H, W) float in [0, 1]."""
    return torch.from_numpy(images).permute(0, 3, 1, 2).float().div_(255.0)


def planner_state(model: Planner, height: int, width: int, channels: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """The planner's weights plus its shape (meta.*), enough to rebuild it with load_planner."""
    meta = {"meta.image_size": torch.tensor([height, width]), "meta.channels": torch.tensor(channels),
            "meta.feature_dim": torch.tensor([model.pool[0].out_features]), "meta.waypoints": torch.tensor([model.waypoints])}
    return {**{k: v.detach().clone() for k, v in model.state_dict().items()}, **meta}


def load_planner(state: dict) -> Planner:
    """Rebuild a planner from planner_state's dict (numpy arrays or tensors)."""
    t = {k: torch.as_tensor(v) for k, v in state.items()}
    missing = {"meta.image_size", "meta.channels", "meta.feature_dim", "meta.waypoints"} - set(t)
    if missing:
        raise ValueError(f"planner checkpoint lacks {sorted(missing)}: write it with planner_state")
    h, w = (int(x) for x in t["meta.image_size"])
    model = Planner(h, w, tuple(int(c) for c in t["meta.channels"]), int(t["meta.feature_dim"][0]), int(t["meta.waypoints"][0]))
    model.load_state_dict({k: v for k, v in t.items() if not k.startswith("meta.")})
    return model.eval()
