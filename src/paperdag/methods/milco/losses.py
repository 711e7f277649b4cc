"""MILCO's training objectives, named as in the paper.

Stage 1 (sparse alignment pretraining): L_align = SMSE(m, e) + SMSE(me, e).
Stage 2 (contrastive distillation):     L = KL(softmax(s_teacher) || softmax(s_student)) + lambda_q FLOPS(t_q) + lambda_d FLOPS(t_d).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def smse(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Sparse MSE: the mean of (a - b)^2 over the coordinates where a > 0 or b > 0 (0 when there are none)."""
    mask = (a > 0) | (b > 0)
    if not bool(mask.any()):
        return (a - b).sum() * 0.0  # keeps the graph: a zero loss with zero gradients
    return F.mse_loss(a[mask], b[mask])


def alignment_loss(m: torch.Tensor, me: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """SMSE(m, e) + SMSE(me, e): m, me the student's max-pooled logits of the foreign / English sentence, e the
    frozen English teacher's, all (B, V_en)."""
    return smse(m, e) + smse(me, e)


def kl_distillation(student_scores: torch.Tensor, teacher_scores: torch.Tensor) -> torch.Tensor:
    """KL(softmax(teacher) || softmax(student)) over each query's group (B, G), averaged over the B queries."""
    return F.kl_div(torch.log_softmax(student_scores, dim=-1), torch.softmax(teacher_scores, dim=-1), reduction="batchmean")


def flops(x: torch.Tensor) -> torch.Tensor:
    """FLOPS regulariser sum_j (mean_b |x_bj|)^2 of a batch of sparse vectors (B, V)."""
    return (x.abs().mean(dim=0) ** 2).sum()
