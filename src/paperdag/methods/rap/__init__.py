"""rap: rasterization-augmented planning (RAP, ICLR 2026, arXiv 2510.04333) on the numpy driving world.

Cheap rasters of annotated primitives stand in for camera images: recovery perturbations (pose +-0.5 m, yaw +-15 deg,
speed +-20 %, acceleration +-10 %) supervised by the expert future re-expressed from the perturbed pose, and views
from other agents supervised by their futures; Raster-to-Real alignment = DANN domain classifier behind a gradient
reversal layer (lambda = 2 / (1 + exp(-10 p)) - 1) plus the paired raster/real feature L2. Closed-loop PDMS.
"""

from __future__ import annotations

from paperdag.methods.rap.augment import Perturbation, cross_agent_candidates, future_in_frame, perturb, recovery_sample
from paperdag.methods.rap.metrics import ego_progress, l2_at, pdm_score
from paperdag.methods.rap.model import (
    DomainClassifier,
    Planner,
    dann_lambda,
    grad_reverse,
    images_to_tensor,
    load_planner,
    planner_state,
)
from paperdag.methods.rap.train import SOURCES, Samples, TrainConfig, predict, train_planner

__all__ = [
    "SOURCES", "DomainClassifier", "Perturbation", "Planner", "Samples", "TrainConfig", "cross_agent_candidates",
    "dann_lambda", "ego_progress", "future_in_frame", "grad_reverse", "images_to_tensor", "l2_at", "load_planner", "pdm_score", "planner_state",
    "perturb", "predict", "recovery_sample", "train_planner",
]
