"""Scores: exact match, ROUGE-L (LCS F-measure over whitespace tokens), multiset F1 for tool selection and arguments,
and forgetting (round-1 score right after round 1 minus after the last round)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np


def exact_match(prediction: str, answer: str) -> bool:
    return " ".join(prediction.split()) == " ".join(answer.split())


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (dynamic programme, one row at a time)."""
    row = np.zeros(len(b) + 1, dtype=np.int64)
    for x in a:
        prev_diag = 0
        for j, y in enumerate(b, start=1):
            prev_diag, row[j] = row[j], prev_diag + 1 if x == y else max(row[j], row[j - 1])
    return int(row[-1])


def rouge_l(prediction: str, answer: str) -> float:
    """ROUGE-L F1 = 2 P R / (P + R), P = LCS / |prediction|, R = LCS / |answer|, over whitespace tokens."""
    p, a = prediction.split(), answer.split()
    lcs = lcs_length(p, a)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(p), lcs / len(a)
    return 2 * precision * recall / (precision + recall)


def multiset_f1(predicted: Sequence[Sequence[object]], gold: Sequence[Sequence[object]]) -> float:
    """Micro F1 over examples: true positives are the multiset intersection of predicted and gold items per example."""
    tp = sum(sum((Counter(p) & Counter(g)).values()) for p, g in zip(predicted, gold, strict=True))
    n_pred, n_gold = sum(len(p) for p in predicted), sum(len(g) for g in gold)
    if tp == 0:
        return 0.0
    precision, recall = tp / n_pred, tp / n_gold
    return 2 * precision * recall / (precision + recall)


def forgetting(round1_scores: Sequence[float]) -> float:
    """Score on round-1 procedures right after round 1 minus after the last round (positive = forgotten)."""
    return round1_scores[0] - round1_scores[-1]
