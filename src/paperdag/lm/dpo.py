"""Direct Preference Optimisation (Rafailov et al., 2023) for any causal LM of paperdag.lm: the loss, and the
sequence log-probabilities it compares.

    L_DPO = -log sigma( beta * [ (log pi_theta(y_w|x) - log pi_ref(y_w|x)) - (log pi_theta(y_l|x) - log pi_ref(y_l|x)) ] )

y_w the chosen continuation, y_l the rejected one, pi_ref a frozen copy of the starting policy. A pair is two
collated rows (paperdag.lm.causal.collate: labels IGNORE outside the continuation); `sequence_logps` sums the
continuation's token log-probabilities per row. TRL's DPOTrainer does the same through a `datasets` pipeline and a
Trainer; this is the loss alone, for step-level pairs on tiny models (the caller owns the loop: paperdag.lm.train.fit).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from paperdag.lm.causal import IGNORE


def sequence_logps(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B,) sum over each row's labelled positions of log p(token_t | tokens_<t)."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1].float()  # (B, T-1, V)
    targets = batch["labels"][:, 1:]  # (B, T-1): position t predicts token t + 1
    keep = targets != IGNORE
    picked = logits.log_softmax(-1).gather(-1, targets.clamp(min=0)[..., None])[..., 0]  # (B, T-1)
    return (picked * keep).sum(-1)


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, reference_chosen: torch.Tensor,
             reference_rejected: torch.Tensor, beta: float) -> dict[str, torch.Tensor]:
    """The mean DPO loss over pairs from (B,) sequence log-probabilities, with the implicit rewards
    r = beta * (log pi_theta - log pi_ref) of chosen and rejected and the share of pairs whose chosen reward is higher."""
    if beta <= 0:
        raise ValueError(f"dpo_loss: beta must be positive; got {beta}")
    chosen_reward = beta * (policy_chosen - reference_chosen)  # (B,)
    rejected_reward = beta * (policy_rejected - reference_rejected)  # (B,)
    loss = -F.logsigmoid(chosen_reward - rejected_reward).mean()
    return {"loss": loss, "chosen_reward": chosen_reward.mean().detach(), "rejected_reward": rejected_reward.mean().detach(),
            "accuracy": (chosen_reward > rejected_reward).float().mean().detach()}
