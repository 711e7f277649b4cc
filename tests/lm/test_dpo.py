"""paperdag.lm.dpo: the DPO loss against a hand-computed value, and sequence log-probabilities against a direct
computation."""

from __future__ import annotations

import math

import pytest
import torch

from paperdag.lm.causal import collate, tiny_causal_lm, tiny_llama_config
from paperdag.lm.dpo import dpo_loss, sequence_logps


def test_dpo_loss_matches_a_hand_computed_value() -> None:
    """beta 0.4; pair 1: rewards 0.4 * (-1 + 1.5) = 0.2 and 0.4 * (-2 + 1.5) = -0.2, loss -log sigma(0.4) =
    log(1 + e^-0.4) = 0.5130152523; pair 2: equal rewards, loss log 2 = 0.6931471806; mean 0.6030812164."""
    out = dpo_loss(torch.tensor([-1.0, -0.5]), torch.tensor([-2.0, -0.5]), torch.tensor([-1.5, -0.5]),
                   torch.tensor([-1.5, -0.5]), beta=0.4)
    assert out["loss"].item() == pytest.approx(0.6030812164, abs=1e-7)
    assert out["chosen_reward"].item() == pytest.approx((0.2 + 0.0) / 2)
    assert out["rejected_reward"].item() == pytest.approx((-0.2 + 0.0) / 2)
    assert out["accuracy"].item() == pytest.approx(0.5)
    assert math.log1p(math.exp(-0.4)) == pytest.approx(0.5130152523)
    with pytest.raises(ValueError, match="beta"):
        dpo_loss(torch.zeros(1), torch.zeros(1), torch.zeros(1), torch.zeros(1), beta=0.0)


def test_sequence_logps_sums_the_continuation_only() -> None:
    """log p of the target tokens, summed, equals the log-softmax read directly off the model's logits."""
    torch.manual_seed(0)
    model = tiny_causal_lm(tiny_llama_config(20, hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=32)).eval()
    prompt, target = [3, 4, 5], [6, 7]
    got = sequence_logps(model, collate([(prompt, target), ([3], [9])], pad_id=0))
    with torch.no_grad():
        logp = model(input_ids=torch.tensor([prompt + target])).logits[0].log_softmax(-1)
    expected = logp[2, 6] + logp[3, 7]  # position t predicts token t + 1
    assert got[0].item() == pytest.approx(expected.item(), abs=1e-5)
    assert got.shape == (2,)
