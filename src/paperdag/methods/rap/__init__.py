"""rap: rasterization-augmented planning (RAP, ICLR 2026, arXiv 2510.04333) on the numpy driving world.

Cheap rasters of annotated primitives stand in for camera images: recovery perturbations (pose +-0.5 m, yaw +-15 deg,
speed +-20 %, acceleration +-10 %) supervised by the expert future re-expressed from the perturbed pose, and views
from other agents supervised by their futures; Raster-to-Real alignment = DANN domain classifier behind a gradient
reversal layer (lambda = 2 / (1 + exp(-10 p)) - 1) plus the paired raster/real feature L2. Closed-loop PDMS.
"""

from __future__ import annotations

from paperdag._lazy import attach

# each submodule is imported on first use of one of its names (model and train need torch; augment and metrics do
# not): importing the package alone imports none of them
__getattr__, __dir__, __all__ = attach(__name__, {
    "augment": ["Augmentation", "Perturbation", "augment_frames", "cross_agent_candidates", "future_in_frame", "perturb",
                "recovery_sample"],
    "metrics": ["COMFORT_BOUNDS", "comfort_values", "comfortable", "ego_progress", "episode_rows", "l2_at", "pdm_score"],
    "model": ["DomainClassifier", "Planner", "dann_lambda", "grad_reverse", "images_to_tensor", "load_planner",
              "planner_state"],
    "train": ["Samples", "batch_indices", "frames_samples", "history_summary", "pair_terms", "samples_of", "TrainConfig", "predict",
              "train_arm", "train_planner"],
})
SOURCES = ("real_log", "raster_log", "recovery", "cross_agent")  # the training sample kinds augment writes, arms choose from
__all__ = sorted([*__all__, "SOURCES"])
