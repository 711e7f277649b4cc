"""The synthkg pipeline at smoke scale, end to end (the shared repo conftest.py `smoke_build` built once; what every
pipeline must satisfy is tests/pipelines/test_contract.py): the composition of what each stage wrote, and each claim
failing once the method's output is its baseline's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from support import judged_after, smoke_group

pytestmark = smoke_group("synthkg")

CLAIMS = {"distilled_within_5_of_teacher", "distilled_far_above_single_step", "graph_beats_dense_hits", "graph_beats_ppr_hits",
          "graph_beats_dense_em", "graph_beats_ppr_em"}
DATA = "data/synthkg"


@pytest.fixture(scope="module")
def repo(smoke_build) -> Path:
    """The synthkg smoke repo after its one `dvc repro` (shared: copy it before changing it)."""
    return smoke_build("synthkg").repo


def _params(repo: Path) -> dict:
    return yaml.safe_load((repo / "params.yaml").read_text())["synthkg"]


def items(repo: Path) -> list:
    from paperdag.engine import Item

    return [Item({"replicate": r}) for r in _params(repo)["replicates"]]


def test_worlds_questions_and_rankings_have_the_declared_composition(repo: Path) -> None:
    """Per replicate: a page per non-country entity of each world, the check pages, `questions` per template and
    split; a ranking of max_k distinct chunks per (question, method), BM25's only of chunks sharing a term; eval pages only in the distilled KGs."""
    p = _params(repo)
    syn = p["synthesize"]
    pages = pl.read_parquet(repo / DATA / "pages.parquet")
    questions = pl.read_parquet(repo / DATA / "questions.parquet")
    for r in p["replicates"]:
        mine = pages.filter(pl.col("replicate") == r)
        for world in ("train", "eval"):
            counts = syn[f"{world}_world"]
            assert mine.filter(pl.col("world") == world).height == counts["person"] + counts["org"] + counts["city"]
        assert mine.filter(pl.col("split") == "check").height == syn["check_pages"]
        per = questions.filter(pl.col("replicate") == r).group_by("template", "split").len()
        assert per.height == 20 and set(per["len"]) <= {syn["questions"]["val"], syn["questions"]["test"]}
    assert not set(pages.filter(pl.col("world") == "train")["entity"]) & set(pages.filter(pl.col("world") == "eval")["entity"])
    ranks = pl.read_parquet(repo / DATA / "retrieve/rankings.parquet")
    assert ranks.height == 4 * questions.height
    lengths = dict(ranks.group_by("method").agg(pl.col("chunks").list.len().max().alias("n"), pl.col("chunks").list.len().min().alias("m"))
                   .select("method", pl.struct("m", "n")).iter_rows())
    assert all(v == {"m": p["retrieve"]["max_k"], "n": p["retrieve"]["max_k"]} for m, v in lengths.items() if m != "bm25")
    assert lengths["bm25"]["n"] <= p["retrieve"]["max_k"]  # BM25: a chunk sharing no term with the question is no hit
    assert all(len(set(c)) == len(c) for c in ranks["chunks"])
    eval_pages = set(pages.filter(pl.col("world") == "eval")["page"])
    for item in items(repo):
        assert set(pl.read_parquet(repo / DATA / f"distill/kg/{item}.parquet")["page"]) <= eval_pages
    assert np.load(repo / DATA / "graph/embeddings.npy").shape[0] == pl.read_parquet(repo / DATA / "graph/texts.parquet").height


def _judged(repo: Path, distilled=None, rankings=None) -> dict[str, dict]:
    """The claims on the metrics evaluate computes after `distilled(item, df)` / `rankings(df)` rewrote its inputs."""
    def edit(inputs: dict) -> None:
        if distilled:
            inputs["distilled"] = {i: distilled(i, df) for i, df in inputs["distilled"].items()}

    return judged_after(repo, "synthkg:evaluate", edit, rankings=rankings)


def test_claims_are_declared_and_judged(repo: Path) -> None:
    from paperdag.engine.claims import evaluate_pipeline

    claims = evaluate_pipeline(repo, "synthkg")
    assert set(claims) == CLAIMS and all(c["status"] in {"held", "within_noise", "not_held"} for c in claims.values())


def _single_step_as_distilled(repo: Path):
    kg = pl.read_parquet(repo / DATA / "teacher/kg.parquet")

    def swap(item, df: pl.DataFrame) -> pl.DataFrame:
        rows = kg.filter((pl.col("extractor") == "single_step") & (pl.col("world") == "eval") & (pl.col("replicate") == item.replicate))
        return rows.select("replicate", "page", "source", "relation", "target")

    return swap


def test_coverage_claims_fail_when_the_distilled_kg_is_single_steps(repo: Path) -> None:
    """The distilled KGs replaced by single-step extraction's: distilled - single-step is exactly 0 (not > 10), and
    distilled - teacher falls below -5 (coreference the single step leaves unresolved)."""
    claims = _judged(repo, distilled=_single_step_as_distilled(repo))
    far = claims["distilled_far_above_single_step"]
    assert far["status"] == "not_held" and far["value"] == 0
    close = claims["distilled_within_5_of_teacher"]
    assert close["status"] == "not_held" and close["value"] < -5


def test_coverage_within_5_holds_when_the_distilled_kg_is_the_teachers(repo: Path) -> None:
    """The distilled KGs replaced by the teacher's own: a difference of exactly 0, inside the margin."""
    kg = pl.read_parquet(repo / DATA / "teacher/kg.parquet")

    def swap(item, df):
        return kg.filter((pl.col("extractor") == "teacher") & (pl.col("world") == "eval") & (pl.col("replicate") == item.replicate)).select(
            "replicate", "page", "source", "relation", "target")

    assert _judged(repo, distilled=swap)["distilled_within_5_of_teacher"]["value"] == 0


@pytest.mark.parametrize("baseline", ["dense", "ppr"])
def test_retrieval_claims_fail_when_graph_retrieval_is_the_baseline(repo: Path, baseline: str) -> None:
    """Graph retrieval's rankings replaced by the baseline's: Hits@K and EM differences of exactly 0, not > 0."""
    def swap(ranks: pl.DataFrame) -> pl.DataFrame:
        base = ranks.filter(pl.col("method") == baseline)
        return pl.concat([ranks.filter(pl.col("method") != "graph"), base.with_columns(pl.lit("graph").alias("method"))])

    claims = _judged(repo, rankings=swap)
    for metric in ("hits", "em"):
        claim = claims[f"graph_beats_{baseline}_{metric}"]
        assert claim["status"] == "not_held" and claim["value"] == 0
