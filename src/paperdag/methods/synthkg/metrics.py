"""SynthKG's evaluation: KG coverage of QA-derived gold triples, Hits@k of the supporting chunks, multi-hop EM with
a deterministic reader, and the headline over replicates (paired: the same world and questions for every method).

Coverage (the paper's): a gold triple's semantic score is the max cosine between it and any triple extracted from
its page (triples rendered as "source predicate target"); coverage(theta) = the share of gold triples whose score
is >= theta."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

from paperdag.methods.synthkg.world import QUESTION_TEMPLATES, TEMPLATE
from paperdag.stats import interval, paired

EXTRACTORS = ("teacher", "distilled", "single_step")
METHODS = ("graph", "dense", "bm25", "ppr")


def semantic_scores(gold: np.ndarray, extracted: Sequence[np.ndarray]) -> np.ndarray:
    """(G,) max cosine of each gold triple (gold: (G, d), unit rows) with its page's extracted triples (extracted[g]:
    (n_g, d), unit rows; 0 when the page gave no triple)."""
    return np.array([float((e @ g).max()) if len(e) else 0.0 for g, e in zip(gold, extracted, strict=True)])


def coverage(scores: np.ndarray, theta: float) -> float:
    """100 x the share of gold triples with semantic score >= theta."""
    return 100.0 * float(np.mean(np.asarray(scores) >= theta))


def hits_at_k(ranked: Sequence[int], supports: Sequence[int], k: int) -> float:
    """The share of a question's supporting chunks among the first k retrieved (one query's recall@k,
    paperdag.retrieval's)."""
    from paperdag.retrieval.metrics import recall_at_k_per_query

    top = np.full((1, max(k, 1)), -1, dtype=np.int64)
    first = list(ranked[:k])
    top[0, : len(first)] = first
    return float(recall_at_k_per_query(top, [sorted(set(supports))], k)[0])


_PARSERS = [(t.key, re.compile("^" + re.escape(t.text).replace(re.escape("{e}"), "(?P<e>.+)") + "$")) for t in QUESTION_TEMPLATES]


def parse_question(text: str) -> tuple[str, str] | None:
    """(template key, start entity) of a question, by the question templates; None when none matches."""
    for key, pattern in _PARSERS:
        if m := pattern.match(text):
            return key, m.group("e")
    return None


def read_answer(question: str, triples: Sequence[tuple[str, str, str]]) -> str | None:
    """The deterministic reader: parse the question's relation chain and start entity, then follow the chain through
    the triples the retrieved chunks state (the teacher's extraction of those chunks); None where a link is missing."""
    parsed = parse_question(question)
    if parsed is None:
        return None
    key, node = parsed
    for rel in TEMPLATE[key].chain:
        nxt = next((t for s, r, t in triples if s == node and r == rel), None)
        if nxt is None:
            return None
        node = nxt
    return node


def headline(per_replicate: Sequence[Mapping[str, float]], theta: float) -> dict[str, object]:
    """Means with 95 % t intervals over replicates, and the claims' paired differences (same seeds and items)."""
    def col(key: str) -> list[float]:
        return [float(r[key]) for r in per_replicate]

    h: dict[str, object] = {"theta": theta, "replicates": len(per_replicate)}
    for key in per_replicate[0]:
        if isinstance(per_replicate[0][key], (int, float)):
            h[key] = interval(col(key))
    h["coverage_distilled_minus_teacher"] = paired(col("coverage_distilled"), col("coverage_teacher"))
    h["coverage_distilled_minus_single_step"] = paired(col("coverage_distilled"), col("coverage_single_step"))
    h["coverage_teacher_minus_single_step"] = paired(col("coverage_teacher"), col("coverage_single_step"))
    for base in ("dense", "ppr", "bm25"):
        h[f"hits_graph_minus_{base}"] = paired(col("hits_graph"), col(f"hits_{base}"))
        h[f"em_graph_minus_{base}"] = paired(col("em_graph"), col(f"em_{base}"))
    return h
