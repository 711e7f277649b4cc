"""CK-PLUG's decoding rule (Bi et al., "Parameters vs. Context", ICLR 2026; arXiv 2503.15888), per step, on the
next-token distributions of two views of one example:

    p_ctx = p(x | context, question, y<t)        p_par = p(x | question, y<t)

    CG = H(p_par) - H(p_ctx)                                   confidence gain (entropy shift from the context)
    conflict: CG < 0  (paper)   or   CG - H(p_ctx) < 0  (official code)
    entropies: over the full vocabulary ("vocab") or, as the official code, over V_head (both distributions restricted
    to it and renormalised: "head"); the same choice feeds CG, the conflict test and Eq. 10
    q_par  = log p_par                                          parametric score
    q_cont = log p_ctx - log p_par                              contextual score (what the context adds)
    p_hat  = softmax_{x in V_head}(alpha q_par + (1 - alpha) q_cont)    on conflict steps, else p_ctx
    V_head = {x : log p(x) >= max log p + log(relative_top)} for p_ctx or p_par (each keeping >= min_head tokens)
    adaptive: alpha = H(p_ctx) / (H(p_par) + H(p_ctx))         (Eq. 10)

alpha = 0 trusts the context, alpha = 1 parametric memory. CAD (Shi et al., 2023), the peer baseline, contrasts the
same two views: (1 + beta) logit_ctx - beta logit_par.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import get_args

import torch

from paperdag.methods.ckplug.data import ConflictRule, EntropyOver

CONFLICT_RULES: tuple[str, ...] = get_args(ConflictRule)
ENTROPY_OVER: tuple[str, ...] = get_args(EntropyOver)
NEG_INF = float("-inf")


def entropy(log_p: torch.Tensor) -> torch.Tensor:
    """H(p) = -sum_x p(x) log p(x) in nats, over the last axis of log-probabilities (-inf entries count 0)."""
    p = log_p.exp()
    return -(p * torch.where(p > 0, log_p, torch.zeros_like(log_p))).sum(-1)


def confidence_gain(log_p_par: torch.Tensor, log_p_ctx: torch.Tensor) -> torch.Tensor:
    """CG = H(p_par) - H(p_ctx): positive when the context makes the model surer, negative on a knowledge conflict."""
    return entropy(log_p_par) - entropy(log_p_ctx)


def is_conflict(log_p_par: torch.Tensor, log_p_ctx: torch.Tensor, rule: str = "paper") -> torch.Tensor:
    """The steps to adjust: CG < 0 (the paper's negative confidence gain) or CG - H(p_ctx) < 0 (the official code)."""
    cg = confidence_gain(log_p_par, log_p_ctx)
    if rule == "paper":
        return cg < 0
    if rule == "code":
        return cg - entropy(log_p_ctx) < 0
    raise ValueError(f"conflict rule {rule!r}: choose one of {CONFLICT_RULES}")


def head_mask(log_p: torch.Tensor, relative_top: float = 0.01, min_head: int = 10) -> torch.Tensor:
    """Tokens within log(relative_top) of the max log-probability, widened to the min_head most likely (B, V) -> bool."""
    k = min(min_head, log_p.shape[-1])
    kth = log_p.topk(k, dim=-1).values[..., -1:]  # (B, 1) the k-th largest
    threshold = torch.minimum(log_p.max(-1, keepdim=True).values + math.log(relative_top), kth)
    return log_p >= threshold


def adjusted_distribution(
    log_p_par: torch.Tensor, log_p_ctx: torch.Tensor, alpha: float | torch.Tensor, relative_top: float = 0.01, min_head: int = 10
) -> torch.Tensor:
    """log p_hat = log softmax over V_head of alpha q_par + (1 - alpha) q_cont (-inf outside V_head); alpha a float or
    a (B,) tensor."""
    alpha = torch.as_tensor(alpha, dtype=log_p_par.dtype)
    if alpha.dim() == 1:
        alpha = alpha[:, None]  # (B, 1)
    q_par = log_p_par
    q_cont = log_p_ctx - log_p_par
    score = alpha * q_par + (1 - alpha) * q_cont  # (B, V)
    head = head_mask(log_p_ctx, relative_top, min_head) | head_mask(log_p_par, relative_top, min_head)  # V_head
    return torch.where(head, score, torch.full_like(score, NEG_INF)).log_softmax(-1)


def adaptive_alpha(log_p_par: torch.Tensor, log_p_ctx: torch.Tensor) -> torch.Tensor:
    """Eq. 10: alpha = H(p_ctx) / (H(p_par) + H(p_ctx)); an unsure context leans on memory, an unsure memory on the
    context. 0.5 when both are certain (0 / 0)."""
    h_par, h_ctx = entropy(log_p_par), entropy(log_p_ctx)
    total = h_par + h_ctx
    return torch.where(total > 0, h_ctx / total.clamp(min=1e-12), torch.full_like(total, 0.5))


def filtered(log_p_par: torch.Tensor, log_p_ctx: torch.Tensor, relative_top: float = 0.01,
             min_head: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    """Both distributions restricted to V_head (the union of their relative-top heads) and renormalised (-inf
    outside): what the official code takes its entropies on (its relative_top_filter masks the tokens below both
    thresholds in both views)."""
    head = head_mask(log_p_par, relative_top, min_head) | head_mask(log_p_ctx, relative_top, min_head)
    return tuple(torch.where(head, lp, torch.full_like(lp, NEG_INF)).log_softmax(-1) for lp in (log_p_par, log_p_ctx))


def ckplug_step(
    log_p_par: torch.Tensor,
    log_p_ctx: torch.Tensor,
    alpha: float | None,
    conflict_rule: str = "paper",
    relative_top: float = 0.01,
    min_head: int = 10,
    entropy_over: str = "vocab",
) -> torch.Tensor:
    """One CK-PLUG step: log p_hat on conflict rows, log p_ctx elsewhere; alpha=None is the adaptive mode. Entropies
    (CG, the conflict test, Eq. 10) over the full vocabulary or over V_head."""
    if entropy_over not in ENTROPY_OVER:
        raise ValueError(f"entropy_over {entropy_over!r}: choose one of {ENTROPY_OVER}")
    if entropy_over == "head":
        h_par, h_ctx = filtered(log_p_par, log_p_ctx, relative_top, min_head)
    else:
        h_par, h_ctx = log_p_par, log_p_ctx
    a = adaptive_alpha(h_par, h_ctx) if alpha is None else alpha
    adjusted = adjusted_distribution(log_p_par, log_p_ctx, a, relative_top, min_head)
    conflict = is_conflict(h_par, h_ctx, conflict_rule)[:, None]  # (B, 1)
    return torch.where(conflict, adjusted, log_p_ctx)


def ckplug_rule(alpha: float | None, conflict_rule: str = "paper", relative_top: float = 0.01, min_head: int = 10,
                entropy_over: str = "vocab"):
    """A generation StepRule over the views (context prompt, parametric prompt)."""
    if alpha is not None and not 0.0 <= alpha <= 1.0:
        raise ValueError(f"CK-PLUG alpha must lie in [0, 1]; got {alpha}")
    if conflict_rule not in CONFLICT_RULES:
        raise ValueError(f"conflict rule {conflict_rule!r}: choose one of {CONFLICT_RULES}")
    if entropy_over not in ENTROPY_OVER:
        raise ValueError(f"entropy_over {entropy_over!r}: choose one of {ENTROPY_OVER}")

    def rule(logits: Sequence[torch.Tensor]) -> torch.Tensor:
        ctx, par = logits
        return ckplug_step(par.log_softmax(-1), ctx.log_softmax(-1), alpha, conflict_rule, relative_top, min_head, entropy_over)

    return rule


def cad_rule(beta: float = 0.5):
    """Context-aware decoding over the views (context prompt, parametric prompt): (1 + beta) l_ctx - beta l_par."""

    def rule(logits: Sequence[torch.Tensor]) -> torch.Tensor:
        ctx, par = logits
        return (1 + beta) * ctx - beta * par

    return rule
