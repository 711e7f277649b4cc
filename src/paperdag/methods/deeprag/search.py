"""DeepRAG's binary tree search (paper section 3.2, "binary tree search") and the walks every policy takes through the
same tree. Pure Python: the LM answers reach it through a callable.

The MDP: state s_t = (x, [(q_1, a_1), ..., (q_{t-1}, a_{t-1})]); at step t the subquery q_t is given by the question's
decomposition (here: scripted from the relation chain and a_{t-1}), the atomic decision d_t in {P, R} is
P = answer q_t from parametric knowledge, R = retrieve documents for q_t and answer from them. A node of the tree is
the decision prefix d_1..d_t (a string over "PR"); its answer a_t is the LM's answer to q_t under d_t.

search: best-first over nodes ordered by the number of retrievals so far (ties: fewer retrievals earlier, then
lexicographic, P before R), the first complete path whose final answer matches the gold one (normalised match) is
returned: the correct path with the fewest retrievals.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

PARAMETRIC, RETRIEVE = "P", "R"


def retrievals(path: str) -> int:
    return path.count(RETRIEVE)


def minimal_retrieval_path(hops: int, answer: Callable[[str], str], correct: Callable[[str], bool],
                           depth_limit: int) -> str | None:
    """The decision path d_1..d_hops with the fewest retrievals whose final answer `answer(path)` is `correct`, or
    None (no path correct, or more hops than `depth_limit`). `answer(prefix)` gives a_t at the node `prefix`; it is
    called only on the complete paths the search reaches, in the order it explores them."""
    if hops < 1:
        raise ValueError(f"minimal_retrieval_path: hops must be >= 1; got {hops}")
    if hops > depth_limit:
        return None
    frontier: list[tuple[int, str]] = [(0, "")]  # (retrievals so far, decision prefix)
    while frontier:
        cost, prefix = heapq.heappop(frontier)
        if len(prefix) == hops:
            if correct(answer(prefix)):
                return prefix
            continue
        heapq.heappush(frontier, (cost, prefix + PARAMETRIC))
        heapq.heappush(frontier, (cost + 1, prefix + RETRIEVE))
    return None


def all_prefixes(hops: int) -> list[str]:
    """Every node of a full binary tree of depth `hops`, level by level."""
    levels, out = [""], []
    for _ in range(hops):
        levels = [p + d for p in levels for d in (PARAMETRIC, RETRIEVE)]
        out += levels
    return out


def walk(hops: int, decide: Callable[[str, int], str]) -> str:
    """The path a policy takes: at depth t (0-based) after `prefix`, decide(prefix, t) in {P, R}."""
    path = ""
    for t in range(hops):
        d = decide(path, t)
        if d not in (PARAMETRIC, RETRIEVE):
            raise ValueError(f"walk: a decision is 'P' or 'R'; got {d!r}")
        path += d
    return path


def best_paths(trees: dict[str, dict[str, dict]], questions: list[dict], depth_limit: int) -> dict[str, str]:
    """question id -> its minimal-retrieval correct path over its answered tree (normalised substring match of the
    final answer, as the paper's search); questions with no correct path within the depth limit are left out."""
    from paperdag.lm.factworld import contains_answer

    out = {}
    for q in questions:
        tree = trees[q["id"]]
        path = minimal_retrieval_path(q["hops"], lambda p, tree=tree: tree[p]["answer"],
                                      lambda a, gold=q["answer"]: contains_answer(a, gold), depth_limit)
        if path is not None:
            out[q["id"]] = path
    return out
