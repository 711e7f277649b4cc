"""Rows <-> the pipeline's tables (no I/O): facts, documents, questions, the memorised set, path steps."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from paperdag.methods.deeprag.world import World, document


def facts_table(world: World) -> pl.DataFrame:
    group = world.group_of()
    rows = [{"entity": e, "relation": r, "value": v, "group": group[e]} for (e, r), v in sorted(world.facts.items())]
    return pl.DataFrame(rows)


def documents_table(facts: pl.DataFrame) -> pl.DataFrame:
    """One knowledge-base document per fact (every group)."""
    return pl.DataFrame({"id": list(range(facts.height)),
                         "text": [document(r, e, v) for e, r, v in facts.select("entity", "relation", "value").iter_rows()]})


def fact_dict(facts: pl.DataFrame) -> dict[tuple[str, str], str]:
    return {(e, r): v for e, r, v in facts.select("entity", "relation", "value").iter_rows()}


def memorised_set(memorised: pl.DataFrame) -> set[tuple[str, str]]:
    return {(e, r) for e, r in memorised.filter(pl.col("memorised")).select("entity", "relation").iter_rows()}


def questions_of(questions: pl.DataFrame, split: str) -> list[dict]:
    rows = questions.filter(pl.col("split") == split).to_dicts()
    if not rows:
        raise ValueError(f"deeprag: questions.parquet holds no {split!r} questions")
    return rows


def path_steps(paths: dict[str, str], trees: dict[str, dict[str, dict]]) -> list[dict]:
    """One row per step of each question's minimal-retrieval path, from its answered tree."""
    rows = []
    for q, path in sorted(paths.items()):
        for t in range(len(path)):
            n = trees[q][path[: t + 1]]
            rows.append({"question": q, "step": t, "path": path, "subquery": n["subquery"], "decision": n["decision"],
                         "context": n["context"], "answer": n["answer"], "entity": n["entity"], "relation": n["relation"]})
    return rows


def check_disjoint(used: Sequence[dict], split: str, what: str) -> None:
    """Every question feeding `what` comes from `split` (a test question never reaches training or tuning)."""
    bad = sorted({q["question"] if "question" in q else q["id"] for q in used} - set())
    offending = [b for b in bad if not b.startswith(f"{split}-")]
    if offending:
        raise ValueError(f"deeprag {what}: questions {offending[:3]} are not {split} questions")
