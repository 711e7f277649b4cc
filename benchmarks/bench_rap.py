"""Benchmark the rasteriser (rap.md: >= 500 frames/s at 64 x 128 on one CPU core, vectorised numpy) side by side
with the "real" renderer of the same scenes, the bird's-eye raster, and one planner training step, in one process.

Frames per wall-clock second and per CPU second of this process (numpy single-threaded: one core's throughput
even on a machine shared with other jobs). Every renderer draws the same expert-logged poses of the same scenarios; runs are interleaved and the fastest of
--repeats counts. The ratio raster seconds per sample / training seconds per sample says whether augmentation could
ever dominate training.

    .venv/bin/python benchmarks/bench_rap.py     # writes benchmarks/results/rap.json, prints a table
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core: no BLAS threads behind numpy's small matmuls
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from paperdag.methods.rap import Samples, TrainConfig, train_planner  # noqa: E402
from paperdag.sim.driving import Camera, ScenarioConfig, bev_view, log_expert, make_scenario  # noqa: E402
from paperdag.sim.driving.render import raster_view, real_view  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "rap.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", type=int, default=3, help="scenarios whose expert logs give the poses")
    ap.add_argument("--frames", type=int, default=600, help="frames drawn per renderer and run")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved runs per renderer; the fastest counts")
    ap.add_argument("--train-steps", type=int, default=30, help="planner training steps timed (params.yaml's rap.train shape)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    scenes = []
    for _ in range(args.scenarios):
        sc = make_scenario(rng, ScenarioConfig())
        ego, agents = log_expert(sc, 20.0, 0.1)
        scenes += [(sc.road(), agents[t], ego[t]) for t in range(0, len(ego), 2)]
    poses = [scenes[i % len(scenes)] for i in range(args.frames)]
    big, small = Camera(64, 128), Camera(32, 64)
    renderers = {
        "raster 64x128": lambda r, a, e: raster_view(r, a, e, big),
        "real 64x128": lambda r, a, e: real_view(r, a, e, big, rng),
        "raster 32x64 (training size)": lambda r, a, e: raster_view(r, a, e, small),
        "bev raster 64x64": lambda r, a, e: bev_view(r, a, e),
    }
    best: dict[str, dict] = {}
    order = list(renderers)
    for rep in range(args.repeats):
        random.Random(rep).shuffle(order)
        for name in order:
            start, cpu = time.perf_counter(), time.process_time()
            for road, agents, ego in poses:
                renderers[name](road, agents, ego)
            seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
            if name not in best or seconds < best[name]["seconds"]:
                best[name] = {"seconds": seconds, "cpu_seconds": cpu_seconds, "frames": len(poses),
                              "frames_per_s": len(poses) / seconds, "frames_per_cpu_s": len(poses) / cpu_seconds}
    images = np.stack([raster_view(r, a, e, small) for r, a, e in poses[:256]])
    samples = Samples(images, np.zeros((len(images), 2), np.float32), np.zeros((len(images), 8, 2), np.float32))
    cfg = TrainConfig(args.train_steps, 32, 2e-3, (8, 16, 32), 64, True, True, 0.5, 1.0, 16)  # params.yaml rap.train, R2R on
    start = time.perf_counter()
    train_planner(samples, images[:64], images[:64], cfg, seed=0, description="bench train")
    step_s = (time.perf_counter() - start) / args.train_steps
    raster_per_sample = 1 / best["raster 32x64 (training size)"]["frames_per_s"]
    per_step_samples = cfg.batch_size + 2 * cfg.pair_batch
    result = {
        "machine": platform.platform(), "threads": 1, "frames": args.frames, "repeats": args.repeats, "renderers": best,
        "raster_over_real_speed_64x128": best["raster 64x128"]["frames_per_s"] / best["real 64x128"]["frames_per_s"],
        "train_step_seconds_rap_r2r": step_s,
        "raster_seconds_per_training_sample_over_train_seconds_per_sample": raster_per_sample / (step_s / per_step_samples),
        "target": "raster >= 500 frames/s at 64x128 on one core; rendering a sample costs less than training on it",
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'renderer':<30} {'frames/s':>10} {'frames/cpu-s':>13}")
    for name, row in best.items():
        print(f"{name:<30} {row['frames_per_s']:>10.0f} {row['frames_per_cpu_s']:>13.0f}")
    print(f"train step (R2R, batch {cfg.batch_size} + {cfg.pair_batch} pairs): {step_s * 1000:.1f} ms; raster s/sample over train s/sample: "
          f"{result['raster_seconds_per_training_sample_over_train_seconds_per_sample']:.3f}")


if __name__ == "__main__":
    main()
