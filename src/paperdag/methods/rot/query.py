"""How a query meets the thought graph's nodes: the cosine of a node's step text with the query, the query seen as

    problem   the whole problem text, one embedding (the official code: cos(query, node));
    opening   the problem's opening clause (where the problem, so its solution, begins);
    clauses   every clause of the problem, the best one: max_c cos(c, node) (the clause that asks for the step).

RoT scores a step against a query. A sentence encoder's cosine between a whole multi-step problem and one step is
diluted by the other steps (MiniLM, validation: 0.43 on average for a needed step, 0.20 for another, ranges
overlapping), so the code's thresholds, calibrated on its encoder and texts, fall in no gap; clause by clause a needed
step is one clause's topic (0.79 against 0.26, a gap between 0.47 and 0.56)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

VIEWS = ("problem", "opening", "clauses")
CLAUSE_END = re.compile(r"(?<=[.?!;])\s+")  # a clause ends at a sentence end or a semicolon


def clauses(text: str) -> list[str]:
    """The problem's clauses in order: split after '.', '?', '!' or ';' (the whole text when there is none)."""
    parts = [p.strip() for p in CLAUSE_END.split(text.strip()) if p.strip()]
    return parts or [text]


@dataclass(frozen=True)
class Query:
    """A query's embeddings, unit rows: the whole text (d,) and its clauses (k, d); None where no view needs them."""

    whole: np.ndarray | None
    parts: np.ndarray | None


def query_texts(text: str, views: set[str] | tuple[str, ...]) -> list[str]:
    """What a query is encoded as for `views`: the whole text when a view is "problem", then its clauses when a view
    is "opening" or "clauses"."""
    unknown = set(views) - set(VIEWS)
    if unknown:
        raise ValueError(f"rot query views {sorted(unknown)} unknown; use {VIEWS}")
    return ([text] if "problem" in views else []) + (clauses(text) if set(views) - {"problem"} else [])


def _query(emb: np.ndarray, views: set[str] | tuple[str, ...]) -> Query:
    """The Query whose query_texts were embedded as emb (rows in that order)."""
    whole = "problem" in views
    return Query(emb[0] if whole else None, emb[int(whole):] if set(views) - {"problem"} else None)


def encode_query(embed: Callable[[list[str]], np.ndarray], text: str, views: set[str] | tuple[str, ...]) -> Query:
    """One encoder call: embed(texts) -> (k, d) unit rows."""
    return _query(embed(query_texts(text, views)), views)


def encode_queries(embed: Callable[[list[str]], np.ndarray], texts: list[str], views: set[str] | tuple[str, ...]) -> list[Query]:
    """encode_query for many texts in one encoder call (the validation split)."""
    parts = [query_texts(t, views) for t in texts]
    emb = embed([t for p in parts for t in p])  # (total, d)
    ends = np.cumsum([len(p) for p in parts])
    return [_query(emb[e - len(p) : e], views) for p, e in zip(parts, ends, strict=True)]


def similarity(query: Query, node_emb: np.ndarray, view: str) -> np.ndarray:
    """(n,) cos(query seen as `view`, e_v) for every node v; node_emb (n, d) unit rows."""
    if view == "problem":
        return node_emb @ query.whole  # (n,)
    if view == "opening":
        return node_emb @ query.parts[0]  # (n,)
    if view == "clauses":
        return (query.parts @ node_emb.T).max(axis=0)  # (k, n) -> (n,)
    raise ValueError(f"rot query view {view!r} unknown; use {VIEWS}")
