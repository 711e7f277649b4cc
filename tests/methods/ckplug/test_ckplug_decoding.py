"""CK-PLUG's decoding rule on hand-computed distributions: entropy, confidence gain, conflict rules, V_head, the
adjusted distribution, the adaptive alpha, and CAD."""

from __future__ import annotations

import math

import pytest
import torch

from paperdag.methods.ckplug import (
    adaptive_alpha,
    adjusted_distribution,
    cad_rule,
    ckplug_rule,
    ckplug_step,
    confidence_gain,
    entropy,
    filtered,
    head_mask,
    is_conflict,
)


def logp(*rows: list[float]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64).log()


def test_entropy_is_log_k_for_uniform_and_zero_for_one_hot() -> None:
    """H(uniform over 4) = log 4 nats; a one-hot distribution (with -inf log-probs) has H = 0, not nan."""
    h = entropy(logp([0.25] * 4, [1.0, 0.0, 0.0, 0.0]))
    assert h[0].item() == pytest.approx(math.log(4))
    assert h[1].item() == 0.0


def test_confidence_gain_is_entropy_drop_from_context() -> None:
    """CG = H(p_par) - H(p_ctx): ln 2 when a 50/50 memory becomes certain with the context; negative when a sure
    memory meets a 50/50 context."""
    cg = confidence_gain(logp([0.5, 0.5], [0.9, 0.1]), logp([1.0, 0.0], [0.5, 0.5]))
    assert cg[0].item() == pytest.approx(math.log(2))
    h_sure = -(0.9 * math.log(0.9) + 0.1 * math.log(0.1))
    assert cg[1].item() == pytest.approx(h_sure - math.log(2))


def test_conflict_rules_paper_and_official_code_differ_where_expected() -> None:
    """paper: CG < 0; code: CG - H(p_ctx) < 0. p_par = (.5, .5), p_ctx = (.8, .2): CG = +0.19 (no conflict for the
    paper) but CG - H(p_ctx) = -0.31 (conflict for the code); p_par = (.9, .1), p_ctx = (.5, .5) is a conflict for both."""
    par, ctx = logp([0.5, 0.5], [0.9, 0.1]), logp([0.8, 0.2], [0.5, 0.5])
    assert is_conflict(par, ctx, "paper").tolist() == [False, True]
    assert is_conflict(par, ctx, "code").tolist() == [True, True]
    with pytest.raises(ValueError, match="conflict rule"):
        is_conflict(par, ctx, "other")


def test_head_mask_keeps_tokens_within_relative_top_and_at_least_min_head() -> None:
    """With relative_top 0.01 and max p = .5, a token at p = .004 (< .005) leaves V_head; min_head = 4 keeps all 4."""
    lp = logp([0.5, 0.3, 0.004, 0.196])
    assert head_mask(lp, 0.01, min_head=1).tolist() == [[True, True, False, True]]
    assert head_mask(lp, 0.01, min_head=4).tolist() == [[True, True, True, True]]


def test_adjusted_distribution_at_alpha_0_half_and_1() -> None:
    """p_par = (.8, .2), p_ctx = (.4, .6): alpha = 1 gives p_par; alpha = 0 gives p_ctx / p_par normalised
    = (1/7, 6/7); alpha = .5 gives sqrt(p_ctx) normalised."""
    par, ctx = logp([0.8, 0.2]), logp([0.4, 0.6])
    p1 = adjusted_distribution(par, ctx, 1.0, min_head=2).exp()[0].tolist()
    p0 = adjusted_distribution(par, ctx, 0.0, min_head=2).exp()[0].tolist()
    ph = adjusted_distribution(par, ctx, 0.5, min_head=2).exp()[0].tolist()
    assert p1 == pytest.approx([0.8, 0.2])
    assert p0 == pytest.approx([1 / 7, 6 / 7])
    s = math.sqrt(0.4) + math.sqrt(0.6)
    assert ph == pytest.approx([math.sqrt(0.4) / s, math.sqrt(0.6) / s])


def test_adjusted_distribution_is_zero_outside_v_head() -> None:
    """A token far below the max in both distributions gets probability 0 after adjustment, even where its
    contextual score q_cont is the largest (the point of V_head: no amplified noise)."""
    par = logp([0.6, 0.3999, 0.0001])  # V_head cut-offs: .006 here, .005 in p_ctx
    ctx = logp([0.5, 0.496, 0.004])  # token 2: q_cont = log 40, the largest, but below both cut-offs
    p = adjusted_distribution(par, ctx, 0.0, relative_top=0.01, min_head=1).exp()[0]
    assert p[2].item() == 0.0
    assert p.sum().item() == pytest.approx(1.0)


def test_adaptive_alpha_is_ctx_entropy_share() -> None:
    """Eq. 10: H(p_par) = ln 2, H(p_ctx) = ln 4 -> alpha = 2/3; both certain -> 0.5."""
    a = adaptive_alpha(logp([0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]), logp([0.25] * 4, [1.0, 0.0, 0.0, 0.0]))
    assert a[0].item() == pytest.approx(2 / 3)
    assert a[1].item() == 0.5


def test_ckplug_step_adjusts_conflict_rows_only() -> None:
    """Row 0 (context makes the model surer) keeps p_ctx exactly; row 1 (conflict) at alpha = 1 follows memory."""
    par = logp([0.5, 0.5], [0.9, 0.1])
    ctx = logp([0.95, 0.05], [0.3, 0.7])
    out = ckplug_step(par, ctx, alpha=1.0, min_head=2).exp()
    assert out[0].tolist() == pytest.approx([0.95, 0.05])
    assert out[1].tolist() == pytest.approx([0.9, 0.1])


def test_rule_orders_views_context_then_parametric_and_checks_alpha() -> None:
    """ckplug_rule takes logits (context view, parametric view); alpha = 0 picks the context's token on a conflict,
    alpha = 1 the memory's; alpha outside [0, 1] is refused."""
    ctx = logp([0.45, 0.55]).float()  # unsure context, leaning to token 1
    par = logp([0.95, 0.05]).float()  # sure memory: token 0
    assert ckplug_rule(0.0, min_head=2)([ctx, par]).argmax(-1).item() == 1
    assert ckplug_rule(1.0, min_head=2)([ctx, par]).argmax(-1).item() == 0
    assert ckplug_rule(None, min_head=2)([ctx, par]).argmax(-1).item() == 0  # H(p_ctx) >> H(p_par): alpha near 1
    with pytest.raises(ValueError, match="alpha"):
        ckplug_rule(1.5)


def test_cad_contrasts_context_and_parametric_logits() -> None:
    """CAD with beta = 0.5: 1.5 l_ctx - 0.5 l_par, computed on plain numbers."""
    ctx, par = torch.tensor([[2.0, 1.0]]), torch.tensor([[4.0, 0.0]])
    assert cad_rule(0.5)([ctx, par]).tolist() == [[1.0, 1.5]]


def test_entropies_over_the_head_differ_from_the_vocabulary_and_change_the_decision() -> None:
    """The official code's entropies are on both distributions restricted to V_head (the union of their relative-top
    heads): a long tail of tiny probabilities raises the full-vocabulary entropy but not the head's. p_ctx is sure of
    token 0 (.6) with a tail of 1000 tokens at .0004; p_par is (.45, .55). Over the vocabulary H(p_ctx) ~ 3.4 >
    H(p_par) = .69: a conflict, and alpha = 1 follows memory (token 1). Over V_head = {0, 1} H(p_ctx) ~ 0: no
    conflict, p_ctx is kept (token 0)."""
    ctx = torch.tensor([[0.6, 1e-9] + [0.0004] * 1000], dtype=torch.float64).log()
    par = torch.tensor([[0.45, 0.55] + [1e-9] * 1000], dtype=torch.float64).log()  # real LMs have no exact zeros
    f_par, f_ctx = filtered(par, ctx, 0.01, 1)
    assert f_ctx.exp()[0, 0].item() == pytest.approx(1.0) and f_par.exp()[0, :2].tolist() == pytest.approx([0.45, 0.55])
    assert entropy(f_ctx).item() == pytest.approx(0.0, abs=1e-6) and entropy(ctx).item() > 3.0
    assert is_conflict(par, ctx).item() and not is_conflict(f_par, f_ctx).item()
    head = ckplug_step(par, ctx, 1.0, min_head=1, entropy_over="head")
    vocab = ckplug_step(par, ctx, 1.0, min_head=1, entropy_over="vocab")
    assert torch.equal(head, ctx) and vocab.argmax(-1).item() == 1
    with pytest.raises(ValueError, match="entropy_over"):
        ckplug_step(par, ctx, 1.0, entropy_over="other")


def test_head_entropies_are_over_the_union_of_both_heads_as_in_the_official_code() -> None:
    """A token in p_par's head but below p_ctx's threshold keeps its p_ctx mass in the restricted p_ctx (the official
    relative_top_filter masks only tokens below both thresholds): p_ctx = (.5, .004, tail) restricted to {0, 1} has
    entropy > 0, where p_ctx restricted to its own head {0} would have none."""
    ctx = torch.tensor([[0.5, 0.004] + [0.0005] * 992], dtype=torch.float64).log()
    par = torch.tensor([[0.5, 0.5] + [1e-9] * 992], dtype=torch.float64).log()
    f_par, f_ctx = filtered(par, ctx, 0.01, 1)
    assert torch.isfinite(f_ctx[0]).tolist() == [True, True] + [False] * 992
    assert f_ctx.exp()[0, 1].item() == pytest.approx(0.004 / 0.504) and entropy(f_ctx).item() > 0.04
    assert torch.equal(torch.isfinite(f_par), torch.isfinite(f_ctx))
