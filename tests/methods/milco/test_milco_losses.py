"""MILCO's losses on hand-computed cases: SMSE, the alignment sum, KL distillation over a group, FLOPS."""

from __future__ import annotations

import math

import torch

from paperdag.methods.milco import alignment_loss, flops, kl_distillation, smse


def test_smse_averages_only_coordinates_active_on_either_side() -> None:
    """SMSE([2, 0, 0, -1], [1, 0, 3, 0]) = mean((2-1)^2, (0-3)^2) = 5: coordinates zero (or negative) on both sides are ignored."""
    a = torch.tensor([[2.0, 0.0, 0.0, -1.0]])
    b = torch.tensor([[1.0, 0.0, 3.0, 0.0]])
    assert torch.isclose(smse(a, b), torch.tensor(5.0))


def test_smse_is_zero_with_gradient_when_nothing_is_active() -> None:
    """With no positive coordinate anywhere SMSE is 0 and still backpropagates (zero gradient, no NaN)."""
    a = torch.tensor([[-1.0, 0.0]], requires_grad=True)
    loss = smse(a, torch.zeros(1, 2))
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(a.grad, torch.zeros(1, 2))


def test_alignment_loss_sums_foreign_and_english_terms() -> None:
    """SMSE(m, e) + SMSE(me, e): m = [1, 0], me = [0, 2], e = [3, 0] -> (2^2)/1 + (3^2 + 2^2)/2 = 4 + 6.5."""
    m, me, e = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 2.0]]), torch.tensor([[3.0, 0.0]])
    assert torch.isclose(alignment_loss(m, me, e), torch.tensor(10.5))


def test_kl_distillation_matches_the_formula_and_vanishes_at_the_teacher() -> None:
    """KL(softmax(t) || softmax(s)) averaged over queries equals sum p (log p - log q); 0 when s = t + c."""
    t = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    s = torch.tensor([[0.0, 0.0], [2.0, 0.0]])
    p1 = [math.exp(1) / (math.exp(1) + 1), 1 / (math.exp(1) + 1)]
    kl1 = sum(p * (math.log(p) - math.log(0.5)) for p in p1)
    q2 = [math.exp(2) / (math.exp(2) + 1), 1 / (math.exp(2) + 1)]
    kl2 = sum(0.5 * (math.log(0.5) - math.log(q)) for q in q2)
    assert math.isclose(kl_distillation(s, t).item(), (kl1 + kl2) / 2, rel_tol=1e-6)
    assert kl_distillation(t + 3.0, t).abs().item() < 1e-6


def test_flops_squares_the_mean_absolute_weight_per_term() -> None:
    """FLOPS([[1, 0, 2], [3, 0, 0]]) = (2)^2 + 0 + (1)^2 = 5."""
    assert torch.isclose(flops(torch.tensor([[1.0, 0.0, 2.0], [3.0, 0.0, 0.0]])), torch.tensor(5.0))
