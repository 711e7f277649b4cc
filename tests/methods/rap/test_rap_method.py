"""RAP's pieces on hand-computed cases: DANN schedule and gradient reversal, PDM score, L2, expert futures in a
perturbed frame, perturbation ranges, cross-agent candidates, the planner checkpoint and the R2R switches."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from paperdag.methods.rap import (
    Perturbation,
    Samples,
    TrainConfig,
    cross_agent_candidates,
    dann_lambda,
    ego_progress,
    future_in_frame,
    grad_reverse,
    l2_at,
    load_planner,
    pdm_score,
    perturb,
    planner_state,
    predict,
    recovery_sample,
    train_planner,
)


def test_dann_lambda_schedule() -> None:
    """lambda = 2 / (1 + exp(-10 p)) - 1: 0 at the start, 2 / (1 + e^-5) - 1 half-way, ~1 at the end."""
    assert dann_lambda(0.0) == 0.0
    assert dann_lambda(0.5) == pytest.approx(2 / (1 + math.exp(-5)) - 1)
    assert dann_lambda(1.0) == pytest.approx(0.9999092, abs=1e-6)


def test_gradient_reversal_is_identity_forward_and_negates_backward() -> None:
    """GRL with lambda 0.5: the same values forward, gradient -0.5 backward."""
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = grad_reverse(x, 0.5)
    assert torch.equal(y, x.detach())
    (3 * y).sum().backward()
    assert x.grad.tolist() == [-1.5, -1.5, -1.5]


def test_pdm_score_formula() -> None:
    """PDMS = NC * DAC * (5 TTC + 5 EP + 2 C) / 12."""
    assert pdm_score(1, 1, 1, 1, 1) == 1.0
    assert pdm_score(0, 1, 1, 1, 1) == 0.0 and pdm_score(1, 0, 1, 1, 1) == 0.0
    assert pdm_score(1, 1, 0, 1, 1) == pytest.approx(7 / 12)
    assert pdm_score(1, 1, 1, 0.5, 0) == pytest.approx(7.5 / 12)


def test_ego_progress_follows_navsim() -> None:
    """NAVSIM's EP: progress over the best non-failing proposal's (expert or ego), clipped; 0 when the ego fails;
    normalised by the ego itself when the expert fails; 1 when the best progress is at most 5 m."""
    assert ego_progress(50.0, True, 100.0, True) == 0.5
    assert ego_progress(120.0, True, 100.0, True) == 1.0  # the ego is the best non-failing proposal
    assert ego_progress(50.0, True, 100.0, False) == 1.0  # the expert failed: normalised by the ego alone
    assert ego_progress(50.0, False, 100.0, True) == 0.0
    assert ego_progress(1.0, True, 4.0, True) == 1.0 and ego_progress(1.0, True, 6.0, True) == pytest.approx(1 / 6)


def test_l2_at_horizons() -> None:
    """Waypoints every 0.5 s: the 1 s error is waypoint 2's, the 2 s error waypoint 4's (3-4-5 triangles)."""
    target = np.zeros((2, 4, 2))
    pred = np.zeros((2, 4, 2))
    pred[:, 1] = [3.0, 4.0]
    pred[0, 3] = [6.0, 8.0]
    assert l2_at(pred, target, 0.5, (1.0, 2.0)) == {"1s": 5.0, "2s": 5.0}
    with pytest.raises(ValueError, match="horizon"):
        l2_at(pred, target, 0.5, (3.0,))


def _straight_log(n: int = 50) -> np.ndarray:
    """An ego going along +x at 10 m/s, sampled every 0.1 s."""
    t = np.arange(n) * 0.1
    return np.stack([10 * t, np.zeros(n), np.zeros(n), np.full(n, 10.0), np.zeros(n)], axis=1)


def test_future_in_frame_from_the_logged_and_a_rotated_pose() -> None:
    """From its own pose the future of a straight log is (5, 0), (10, 0), ...; from a pose at the same place turned
    90 degrees left, the path lies to the right: (0, -5), (0, -10)."""
    log = _straight_log()
    np.testing.assert_allclose(future_in_frame(log, 0, log[0], 5, 3), [[5, 0], [10, 0], [15, 0]], atol=1e-12)
    turned = log[0].copy()
    turned[2] = np.pi / 2
    np.testing.assert_allclose(future_in_frame(log, 0, turned, 5, 2), [[0, -5], [0, -10]], atol=1e-12)
    with pytest.raises(ValueError, match="needs"):
        future_in_frame(log, 40, log[40], 5, 8)


def test_perturbation_stays_in_the_papers_ranges() -> None:
    """x, y within +-0.5 m, yaw within +-15 deg, speed within +-20 %, acceleration within +-10 %, and they do vary."""
    rng = np.random.default_rng(0)
    state = np.array([10.0, 5.0, 0.3, 10.0, 1.0])
    out = np.stack([perturb(state, rng, Perturbation()) for _ in range(2000)])
    delta = out - state
    assert np.abs(delta[:, :2]).max() <= 0.5 and np.abs(delta[:, :2]).max() > 0.45
    assert np.degrees(np.abs(delta[:, 2])).max() <= 15 and np.degrees(np.abs(delta[:, 2])).max() > 14
    assert (out[:, 3] >= 8).all() and (out[:, 3] <= 12).all() and (out[:, 4] >= 0.9).all() and (out[:, 4] <= 1.1).all()


def test_recovery_target_leads_back_to_the_expert_path() -> None:
    """From a pose shifted right of the straight expert path, the target waypoints lie left of the vehicle (y > 0)
    and are the logged future points in world coordinates."""
    log = _straight_log()
    rng = np.random.default_rng(1)
    for _ in range(20):
        pose, target = recovery_sample(log, 0, rng, Perturbation(position=0.5, yaw_deg=0.0), 5, 4)
        world = pose[:2] + target  # yaw unchanged: the frame is a translation
        np.testing.assert_allclose(world, log[[5, 10, 15, 20], :2], atol=1e-9)
        assert np.sign(target[-1, 1]) == -np.sign(pose[1]) or abs(pose[1]) < 1e-9


def test_cross_agent_candidates_by_radius_and_road_end() -> None:
    """Agents within the radius whose road position is before the road's end are viewpoints."""
    ego = np.array([0.0, 0.0, 0.0, 10.0, 0.0])
    agents = np.array([[10.0, 0.0, 0, 8, 0], [50.0, 0.0, 0, 8, 0], [-20.0, 3.0, 0, 8, 0], [15.0, -3.0, 0, 8, 0]])
    s = np.array([110.0, 150.0, 80.0, 480.0])
    assert cross_agent_candidates(ego, agents, 30.0, 400.0, s).tolist() == [0, 2]


def _cfg(**kw) -> TrainConfig:
    base = dict(steps=40, batch_size=16, lr=3e-3, channels=(8, 8), feature_dim=16, domain_adversarial=False, paired_l2=False,
                domain_weight=1.0, pair_weight=1.0, pair_batch=8)
    return TrainConfig(**{**base, **kw})


def _toy(n: int = 64) -> tuple[Samples, np.ndarray, np.ndarray]:
    """Images whose left/right brightness says where the path goes (target y = +-3 m)."""
    rng = np.random.default_rng(0)
    side = rng.choice([-1.0, 1.0], size=n)
    images = np.zeros((n, 8, 16, 3), np.uint8)
    images[side > 0, :, :8] = 255
    images[side < 0, :, 8:] = 255
    target = np.zeros((n, 2, 2), np.float32)
    target[:, :, 0] = [5.0, 10.0]
    target[:, :, 1] = 3 * side[:, None]
    return Samples(images, np.zeros((n, 2), np.float32), target), images[:16], 255 - images[:16]


def test_training_fits_a_toy_task_and_the_checkpoint_reloads() -> None:
    """The planner learns a left/right rule (final L1 well under the constant guess's) and planner_state ->
    load_planner reproduces its predictions exactly."""
    samples, raster, real = _toy()
    model, history = train_planner(samples, raster, real, _cfg(steps=80), seed=0)
    assert np.mean([h["l1"] for h in history[-10:]]) < 0.6 * np.mean([h["l1"] for h in history[:5]])
    assert set(history[-1]) == {"l1", "real_share"}
    state = {k: v.numpy() for k, v in planner_state(model, 8, 16, (8, 8)).items()}
    again = load_planner(state)
    np.testing.assert_array_equal(predict(model, samples.images, samples.status), predict(again, samples.images, samples.status))


def test_r2r_terms_are_switchable() -> None:
    """domain_adversarial adds the domain BCE (with the DANN lambda reaching ~1), paired_l2 the feature L2; either
    alone adds only its own term."""
    samples, raster, real = _toy(32)
    pair_keys = {"pair_cosine", "pair_l2", "pair_l2_normalised"}  # recorded whenever R2R aligns, scale-free and raw
    _, both = train_planner(samples, raster, real, _cfg(steps=5, domain_adversarial=True, paired_l2=True), seed=0)
    assert set(both[-1]) == {"l1", "real_share", "domain_bce", "domain_acc", "lambda"} | pair_keys
    assert both[0]["lambda"] == 0.0 and both[-1]["lambda"] == pytest.approx(dann_lambda(1.0))
    _, dom = train_planner(samples, raster, real, _cfg(steps=2, domain_adversarial=True), seed=0)
    _, pair = train_planner(samples, raster, real, _cfg(steps=2, paired_l2=True), seed=0)
    _, none = train_planner(samples, raster, real, _cfg(steps=2), seed=0)
    assert set(dom[-1]) == {"l1", "real_share", "domain_bce", "domain_acc", "lambda"} | pair_keys
    assert set(pair[-1]) == {"l1", "real_share"} | pair_keys and set(none[-1]) == {"l1", "real_share"}


def test_paired_term_moves_raster_features_only_when_real_is_the_anchor() -> None:
    """With anchor_real the paired distance's gradient reaches the encoder through the raster features only: a
    real-only batch gets no gradient from it; without the anchor it does. The cosine form is scale-free."""
    from paperdag.methods.rap import Planner, images_to_tensor, pair_terms

    _, raster, real = _toy(32)
    model = Planner(8, 16, (8, 8), 16, 2)
    f_raster, f_real = model.features(images_to_tensor(raster)), model.features(images_to_tensor(real))
    loss, _ = pair_terms(f_raster.detach(), f_real.detach().requires_grad_(), "cosine")
    assert pair_terms(3.0 * f_raster, 3.0 * f_real, "cosine")[0].item() == pytest.approx(pair_terms(f_raster, f_real, "cosine")[0].item(), rel=1e-5)
    assert pair_terms(3.0 * f_raster, 3.0 * f_real, "l2")[0].item() == pytest.approx(9 * pair_terms(f_raster, f_real, "l2")[0].item(), rel=1e-5)
    anchored, _ = pair_terms(f_raster, f_real.detach(), "cosine")
    grads = torch.autograd.grad(anchored, f_real, allow_unused=True)
    assert grads[0] is None
    free, _ = pair_terms(f_raster, f_real, "l2")
    assert torch.autograd.grad(free, f_real)[0].abs().sum() > 0
    assert loss.requires_grad


def test_batches_hold_the_real_share() -> None:
    """With other kinds present, round(share * size) of every batch are real-camera samples; an arm of one kind
    draws uniformly."""
    from paperdag.methods.rap import batch_indices

    rng = np.random.default_rng(0)
    real = np.zeros(100, bool)
    real[:10] = True  # 10 % of the samples
    samples = Samples(np.zeros((100, 1, 1, 3), np.uint8), np.zeros((100, 2), np.float32), np.zeros((100, 1, 2), np.float32), real)
    idx = batch_indices(samples, 32, 0.5, rng)
    assert len(idx) == 32 and real[idx].sum() == 16
    only = Samples(samples.images, samples.status, samples.target, np.ones(100, bool))
    assert len(set(batch_indices(only, 64, 0.5, rng).tolist())) > 32


def test_early_stopping_keeps_the_best_validation_weights() -> None:
    """Validation L2 is recorded every eval_every steps; with patience, training stops after that many evaluations
    without improvement and returns the best weights (their validation L2 is the best recorded)."""
    samples, raster, real = _toy()
    val = Samples(samples.images[:16], samples.status[:16], samples.target[:16])
    model, history = train_planner(samples, raster, real, _cfg(steps=400, eval_every=5, patience=2, lr=3e-2), seed=0, val=val)
    curve = [h["val_l2"] for h in history if "val_l2" in h]
    assert len(curve) == len(history) // 5 and len(history) < 400  # stopped early
    assert curve[-1] > min(curve) and curve[-2] > min(curve)
    final = float(np.linalg.norm(predict(model, val.images, val.status) - val.target, axis=-1).mean())
    assert final == pytest.approx(min(curve), rel=1e-5)
