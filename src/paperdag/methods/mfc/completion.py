"""Metric forest completion with representatives (Veldt et al., ICLR 2026): join the t trees of a learned
forest into one spanning tree using only edges incident to a few representative points per component.

Read top to bottom, the stages of the paper:
  1. representatives of each component P_i in farthest-first order, with covering radius rho_i(k) after k reps;
  2. allocation: r_i >= 1 reps per component, R = sum_i r_i = t + B (`simple`, `fixed-r`, `greedy-B`, `dp-B`),
     or every point a representative (`opt`: the exact Theta(n^2) completion);
  3. candidate edges: for every pair (i, j), the lightest edge from a rep of i to any point of j, and vice versa;
  4. completion: Kruskal on the t-node component graph, edges mapped back to point pairs.
Distance calls: O(n * R) for the candidates plus sum_i r_i |P_i| for choosing reps; `opt` makes n^2.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from paperdag.methods.mfc.forest import LearnedForest
from paperdag.methods.mfc.metrics import MetricSpace

VARIANTS: tuple[str, ...] = ("simple", "fixed-r", "greedy-B", "dp-B", "opt")
_BLOCK_ENTRIES = 1 << 23  # distances held at once when scoring a block of reps against all points


@dataclass(frozen=True)
class Completion:
    """The added edges, the representatives used, and what they cost."""

    variant: str
    edges: np.ndarray  # (t - 1, 2) point pairs joining the components
    weights: np.ndarray  # (t - 1,)
    reps_per_component: np.ndarray  # (t,) r_i
    radius_sum: float  # sum_i rho_i(r_i): covering radii of the reps used (alpha = 1 + radius_sum / w(F_t))
    selection_calls: int  # distance calls spent choosing reps (farthest-first)
    candidate_calls: int  # distance calls spent scoring candidate edges

    @property
    def cost(self) -> float:
        """Weight of the added edges alone."""
        return float(self.weights.sum())

    @property
    def calls(self) -> int:
        return self.selection_calls + self.candidate_calls

    @property
    def total_reps(self) -> int:
        return int(self.reps_per_component.sum())


# ---------------------------------------------------------------- 1. representatives, farthest first


class RepresentativeCurve:
    """Farthest-first representatives of one component P_i, extended lazily.

    reps[k] is the (k+1)-th representative; radii[k-1] = rho_i(k) = max_{p in P_i} min_{q in first k reps} d(p, q).
    Choosing rep k+1 needs rho_i(k), i.e. |P_i| distance calls per rep beyond the first.
    """

    def __init__(self, space: MetricSpace, members: np.ndarray) -> None:
        self.members = members  # global ids of P_i
        self.space = space.take(members)
        self.reps: list[int] = [0]  # local indices into members; the first rep is arbitrary
        self.radii: list[float] = []
        self._nearest = np.full(len(members), np.inf)  # d(p, closest rep evaluated so far)

    def __len__(self) -> int:
        return len(self.members)

    def radius(self, k: int) -> float:
        """rho_i(k), computing reps up to k (and choosing the (k+1)-th)."""
        while len(self.radii) < k:
            newest = self.reps[len(self.radii)]
            dist = self.space.take([newest]).pairwise(self.space)[0]
            np.minimum(self._nearest, dist, out=self._nearest)
            self.radii.append(float(self._nearest.max()))
            if len(self.reps) < len(self.members):
                self.reps.append(int(np.argmax(self._nearest)))
        return self.radii[k - 1]

    def first(self, k: int) -> np.ndarray:
        """Global ids of the first k reps."""
        if k > 1:
            self.radius(k - 1)
        return self.members[np.asarray(self.reps[:k], dtype=np.int64)]


# ---------------------------------------------------------------- 2. allocation of R = t + B reps


def allocate_greedy(curves: list[RepresentativeCurve], budget: int, cap: int | None = None) -> np.ndarray:
    """greedy-B: start at r_i = 1; give each of the B extra reps to the largest decrease rho_i(r_i) - rho_i(r_i + 1)."""
    limits = _limits(curves, cap)
    reps = np.ones(len(curves), dtype=np.int64)
    heap = [(-(c.radius(1) - c.radius(2)), i) for i, c in enumerate(curves) if limits[i] > 1]
    heapq.heapify(heap)
    for _ in range(budget):
        if not heap:
            break
        _, i = heapq.heappop(heap)
        reps[i] += 1
        r = int(reps[i])
        if r < limits[i]:
            heapq.heappush(heap, (-(curves[i].radius(r) - curves[i].radius(r + 1)), i))
    return reps


def allocate_dp(curves: list[RepresentativeCurve], budget: int, cap: int | None = None) -> np.ndarray:
    """dp-B: the allocation r_i in [1, cap_i] with sum_i (r_i - 1) = B minimising sum_i rho_i(r_i), exactly.

    f_i(b) = min_e f_{i-1}(b - e) + rho_i(1 + e): a knapsack over components, O(t * B * cap) time.
    """
    limits = _limits(curves, cap)
    budget = min(budget, int((limits - 1).sum()))
    f = np.full(budget + 1, np.inf)  # f(b): least radius sum of the components so far using b extra reps
    f[0] = 0.0
    choice = np.zeros((len(curves), budget + 1), dtype=np.int64)
    for i, curve in enumerate(curves):
        # rho_i(1..min(cap_i, B + 1)): no component can take more than B extra reps, so deeper radii are never needed
        rho = np.array([curve.radius(k) for k in range(1, min(int(limits[i]), budget + 1) + 1)])
        g = np.full(budget + 1, np.inf)
        for extra in range(min(len(rho), budget + 1)):
            cand = f[: budget + 1 - extra] + rho[extra]
            better = cand < g[extra:]
            g[extra:][better] = cand[better]
            choice[i, extra:][better] = extra
        f = g
    reps = np.ones(len(curves), dtype=np.int64)
    b = budget
    for i in range(len(curves) - 1, -1, -1):
        reps[i] += choice[i, b]
        b -= int(choice[i, b])
    return reps


def _limits(curves: list[RepresentativeCurve], cap: int | None) -> np.ndarray:
    sizes = np.array([len(c) for c in curves], dtype=np.int64)
    return sizes if cap is None else np.minimum(sizes, max(cap, 1))


# ---------------------------------------------------------------- 3-4. candidate edges and Kruskal


def complete_forest(
    space: MetricSpace,
    forest: LearnedForest,
    variant: str,
    *,
    r: int = 2,
    budget: int = 0,
    max_reps_per_component: int | None = None,
) -> Completion:
    """Complete `forest` into a spanning tree of `space` with the named variant (see VARIANTS).

    r: reps per component for `fixed-r`; budget: B extra reps for `greedy-B` and `dp-B`;
    max_reps_per_component: cap on r_i for the budgeted variants (None = |P_i|).
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown MFC variant {variant!r}; choose one of {VARIANTS}")
    members = forest.members()
    t = len(members)
    calls_before = space.counter.calls
    curves = [RepresentativeCurve(space, m) for m in members]
    if variant == "simple":
        counts = np.ones(t, dtype=np.int64)
    elif variant == "fixed-r":
        counts = np.minimum([len(m) for m in members], max(r, 1)).astype(np.int64)
    elif variant == "opt":
        counts = np.array([len(m) for m in members], dtype=np.int64)
    else:
        allocate = allocate_greedy if variant == "greedy-B" else allocate_dp
        counts = allocate(curves, budget, max_reps_per_component)
    if variant == "opt":  # every point is a representative; no farthest-first needed
        reps = [m for m in members]
    else:
        reps = [c.first(int(k)) for c, k in zip(curves, counts, strict=True)]
    selection_calls = space.counter.calls - calls_before

    edges, weights, radii = _complete_with_reps(space, forest.labels, members, reps, covering=variant != "opt")
    return Completion(
        variant=variant,
        edges=edges,
        weights=weights,
        reps_per_component=counts,
        radius_sum=float(radii.sum()),
        selection_calls=selection_calls,
        candidate_calls=space.counter.calls - calls_before - selection_calls,
    )


def _complete_with_reps(
    space: MetricSpace, labels: np.ndarray, members: list[np.ndarray], reps: list[np.ndarray], covering: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps 3-4: candidate edge per component pair from the reps, Kruskal on the t-node graph.

    Also returns rho_i(r_i) = max_{p in P_i} min_{q in reps_i} d(p, q) per component, read off the same distance
    blocks (no extra calls); with covering=False (every point a rep) it is 0."""
    t = len(members)
    if t <= 1:
        return np.zeros((0, 2), np.int64), np.zeros(0), np.zeros(t)
    order = np.concatenate(members)  # points grouped by component
    starts = np.cumsum([0] + [len(m) for m in members[:-1]])  # segment of P_j in `order`
    grouped = space.take(order)
    all_reps = np.concatenate(reps)  # (R,) grouped by component
    rep_comp = labels[all_reps]
    rep_starts = np.cumsum([0] + [len(q) for q in reps[:-1]])

    # 3. nearest[q, j] = min_{p in P_j} d(q, p) for every representative q: a (block, n) matrix at a time
    nearest = np.empty((len(all_reps), t))
    covered = np.full(len(order), np.inf)  # min over the reps of its own component, per point (grouped order)
    ends = starts + np.array([len(m) for m in members])
    block = max(1, _BLOCK_ENTRIES // max(len(order), 1))
    for lo in range(0, len(all_reps), block):
        dist = space.take(all_reps[lo : lo + block]).pairwise(grouped)  # (block, n)
        nearest[lo : lo + block] = np.minimum.reduceat(dist, starts, axis=1)
        if covering:
            for row, c in enumerate(rep_comp[lo : lo + block]):
                seg = slice(starts[c], ends[c])
                np.minimum(covered[seg], dist[row, seg], out=covered[seg])
    radii = np.maximum.reduceat(covered, starts) if covering else np.zeros(t)  # (t,) rho_i(r_i)
    nearest[np.arange(len(all_reps)), rep_comp] = np.inf  # an edge must leave its component
    # W[i, j] = lightest edge from a rep of i into P_j, and which rep realises it
    weight = np.minimum.reduceat(nearest, rep_starts, axis=0)  # (t, t)
    via = np.stack(
        [rep_starts[i] + np.argmin(nearest[rep_starts[i] : rep_starts[i] + len(reps[i])], axis=0) for i in range(t)]
    )  # (t, t) row of `nearest` (= index into all_reps)
    # the pair (i, j) keeps the lighter of "rep of i -> P_j" and "rep of j -> P_i"
    from_i = weight <= weight.T
    sym = np.where(from_i, weight, weight.T)

    # 4. Kruskal on the complete graph over the t components
    iu, ju = np.triu_indices(t, k=1)
    parent = np.arange(t)

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = int(parent[x])
        return x

    chosen: list[tuple[int, int]] = []  # (rep q, target component) per completion edge
    for e in np.argsort(sym[iu, ju], kind="stable"):
        i, j = int(iu[e]), int(ju[e])
        a, b = find(i), find(j)
        if a == b:
            continue
        parent[a] = b
        src, dst = (i, j) if from_i[i, j] else (j, i)
        chosen.append((int(all_reps[via[src, dst]]), dst))
        if len(chosen) == t - 1:
            break

    # map each component edge back to a point pair: the point of P_dst nearest to the rep q
    edges = np.zeros((t - 1, 2), dtype=np.int64)
    weights = np.zeros(t - 1)
    for k, (q, dst) in enumerate(chosen):
        dist = space.take([q]).pairwise(space.take(members[dst]))[0]
        p = int(np.argmin(dist))
        edges[k] = (q, members[dst][p])
        weights[k] = dist[p]
    return edges, weights, radii
