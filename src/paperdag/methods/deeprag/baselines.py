"""The baselines, each a walk through the same answered tree (policy.expand_tree on the base LM of train_lm), so
every arm answers each subquery exactly as the base LM would under the decision it takes:

- never retrieve: P at every step;  always retrieve: R at every step;
- confidence threshold (FLARE-like, Jiang et al. 2023): answer closed-book; retrieve when a generated token's
  probability falls below theta; theta tuned on the validation questions (best EM, ties: fewer retrievals), the grid
  reaching both never (theta 0) and always (theta > 1);
- question-complexity classifier (Adaptive-RAG-like, Jeong et al. 2024): a classifier on the question predicts the
  strategy A (no retrieval), B (one retrieval, at the first step) or C (retrieve at every step); labelled on the
  training questions by the simplest strategy that answers right (C when none does, the multi-hop prior); features
  are the base LM's mean last hidden state over the question's tokens; logistic regression, its C tuned on validation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from paperdag.methods.deeprag.policy import matches
from paperdag.methods.deeprag.search import PARAMETRIC, RETRIEVE, retrievals, walk

Tree = dict[str, dict]  # decision prefix -> node of one question
STRATEGIES = ("A", "B", "C")


def by_question(nodes: Sequence[dict]) -> dict[str, Tree]:
    out: dict[str, Tree] = {}
    for n in nodes:
        out.setdefault(n["question"], {})[n["prefix"]] = n
    return out


def strategy_path(strategy: str, hops: int) -> str:
    return {"A": PARAMETRIC * hops, "B": RETRIEVE + PARAMETRIC * (hops - 1), "C": RETRIEVE * hops}[strategy]


def threshold_path(tree: Tree, hops: int, theta: float) -> str:
    """FLARE-like: R at a step whose closed-book answer has a token below probability theta."""
    return walk(hops, lambda prefix, _t: RETRIEVE if tree[prefix + PARAMETRIC]["confidence"] < theta else PARAMETRIC)


def em_and_retrievals(paths: dict[str, str], trees: dict[str, Tree], gold: dict[str, str]) -> tuple[float, float]:
    """(EM %, mean retrievals per question) of one path per question."""
    em = np.mean([matches(trees[q][p]["answer"], gold[q]) for q, p in paths.items()]) * 100
    return float(em), float(np.mean([retrievals(p) for p in paths.values()]))


def tune_threshold(trees: dict[str, Tree], questions: Sequence[dict], thetas: Sequence[float]) -> tuple[float, list[dict]]:
    """theta with the best validation EM (ties: fewer retrievals, then the smaller theta), and the sweep."""
    gold = {q["id"]: q["answer"] for q in questions}
    sweep = []
    for theta in thetas:
        paths = {q["id"]: threshold_path(trees[q["id"]], q["hops"], theta) for q in questions}
        em, ret = em_and_retrievals(paths, trees, gold)
        sweep.append({"theta": float(theta), "em": em, "retrievals": ret})
    best = min(sweep, key=lambda r: (-r["em"], r["retrievals"], r["theta"]))
    return best["theta"], sweep


def strategy_labels(trees: dict[str, Tree], questions: Sequence[dict]) -> list[str]:
    """Adaptive-RAG's labels: the simplest strategy whose answer is right, else C."""
    out = []
    for q in questions:
        tree = trees[q["id"]]
        right = [s for s in STRATEGIES if matches(tree[strategy_path(s, q["hops"])]["answer"], q["answer"])]
        out.append(right[0] if right else "C")
    return out


def question_features(model, steps, texts: Sequence[str], batch_size: int) -> np.ndarray:
    """(N, C) mean last hidden state of the base LM over each question's tokens."""
    import torch

    from paperdag.lm.generate import left_pad

    rows = []
    with torch.inference_mode():
        for lo in range(0, len(texts), batch_size):
            ids, mask = left_pad(steps.encode(texts[lo : lo + batch_size]), steps.pad)
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            base = getattr(model, model.base_model_prefix)
            states = base(input_ids=ids, attention_mask=mask, position_ids=positions).last_hidden_state.float()  # (B, T, C)
            rows.append(((states * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)).numpy())
    return np.concatenate(rows) if rows else np.zeros((0, model.config.hidden_size))


def fit_classifier(x_train: np.ndarray, y_train: Sequence[str], x_val: np.ndarray, val_score: Callable[[list[str]], float],
                   cs: Sequence[float], seed: int):
    """Logistic regression on standardised features; C chosen by val_score(predicted strategies) (validation EM of
    the routed strategies). Returns (predict(x) -> strategies, the chosen C, the sweep). With one label class the
    classifier predicts it."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    labels = sorted(set(y_train))
    if len(labels) == 1:
        return (lambda x: [labels[0]] * len(x)), None, []
    sweep, best = [], None
    for c in cs:
        clf = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000, random_state=seed)).fit(x_train, list(y_train))
        score = val_score(list(clf.predict(x_val)))
        sweep.append({"C": float(c), "val_em": score, "train_acc": float(clf.score(x_train, list(y_train)))})
        if best is None or score > best[0]:
            best = (score, c, clf)
    _, c, clf = best
    return (lambda x: list(clf.predict(x))), float(c), sweep
