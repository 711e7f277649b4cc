"""DeepRAG's binary tree search on hand-built trees: the minimal-retrieval correct path, ties, the depth limit, and
the baselines' walks through the same tree."""

from __future__ import annotations

import pytest

from paperdag.methods.deeprag.baselines import strategy_labels, strategy_path, threshold_path, tune_threshold
from paperdag.methods.deeprag.search import all_prefixes, best_paths, minimal_retrieval_path, walk


def _tree(final: dict[str, str]) -> dict[str, dict]:
    """A 3-hop tree whose leaves answer `final[path]` (default 'wrong'); inner nodes answer 'x'."""
    return {p: {"answer": final.get(p, "wrong") if len(p) == 3 else "x", "confidence": 0.5} for p in all_prefixes(3)}


def test_returns_the_correct_path_with_fewest_retrievals() -> None:
    """Correct leaves RRR, PRR and RPP: the search returns RPP (one retrieval), not the two- or three-retrieval ones."""
    tree = _tree({"RRR": "red", "PRR": "red", "RPP": "red"})
    asked: list[str] = []

    def answer(p: str) -> str:
        asked.append(p)
        return tree[p]["answer"]

    assert minimal_retrieval_path(3, answer, lambda a: a == "red", depth_limit=6) == "RPP"
    assert asked[0] == "PPP" and "RRR" not in asked  # explored by retrievals: the 0-retrieval leaf first, never the 3-retrieval one


def test_ties_prefer_retrieving_later_and_no_path_is_none() -> None:
    """Among one-retrieval paths PPR < PRP < RPP (parametric first); no correct leaf gives None."""
    tree = _tree({"RPP": "red", "PPR": "red"})
    assert minimal_retrieval_path(3, lambda p: tree[p]["answer"], lambda a: a == "red", 6) == "PPR"
    assert minimal_retrieval_path(3, lambda p: tree[p]["answer"], lambda a: a == "blue", 6) is None


def test_depth_limit() -> None:
    """A question with more hops than the depth limit has no path."""
    tree = _tree({"PPP": "red"})
    assert minimal_retrieval_path(3, lambda p: tree[p]["answer"], lambda a: a == "red", 2) is None
    with pytest.raises(ValueError, match="hops"):
        minimal_retrieval_path(0, lambda p: "", lambda a: True, 2)


def test_best_paths_uses_normalised_match() -> None:
    """best_paths matches answers after normalisation ('The Red.' is 'red'); unsolved questions are left out."""
    trees = {"a": _tree({"PRP": "The Red."}), "b": _tree({})}
    questions = [{"id": "a", "hops": 3, "answer": "red"}, {"id": "b", "hops": 3, "answer": "red"}]
    assert best_paths(trees, questions, 6) == {"a": "PRP"}


def test_baseline_walks() -> None:
    """Threshold: retrieve where the closed-book answer's confidence < theta; strategies A/B/C; labels = the simplest
    strategy answering right, C when none does; theta tuned to the best validation EM."""
    tree = _tree({"PPP": "red", "RRR": "red"})
    tree["P"]["confidence"] = 0.9  # node P: the closed-book answer at step 1
    tree["PP"]["confidence"], tree["PPP"]["confidence"] = 0.2, 0.9
    assert threshold_path(tree, 3, 0.5) == "PRP"
    assert threshold_path(tree, 3, 0.0) == "PPP" and threshold_path(tree, 3, 1.01) == "RRR"
    assert [strategy_path(s, 3) for s in "ABC"] == ["PPP", "RPP", "RRR"]
    q = [{"id": "q", "hops": 3, "answer": "red"}]
    assert strategy_labels({"q": tree}, q) == ["A"]
    assert strategy_labels({"q": _tree({"RPP": "red"})}, q) == ["B"]
    assert strategy_labels({"q": _tree({})}, q) == ["C"]
    theta, sweep = tune_threshold({"q": tree}, q, [0.0, 0.5, 1.01])
    assert theta == 0.0 and [r["em"] for r in sweep] == [100.0, 0.0, 100.0]  # tie at 100: fewer retrievals wins
    assert walk(2, lambda prefix, t: "R" if t == 1 else "P") == "PR"
