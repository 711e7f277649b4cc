"""The stage graph: a small directed graph over stage addresses (the standard library's graphlib finds cycles).

networkx would do, but it costs every stage process 0.2-0.7 s to import, for five operations on a few dozen nodes.
"""

from __future__ import annotations

import graphlib
import heapq
from collections.abc import Iterable


class Dag:
    """Nodes and edges (producer -> consumer), with the queries the engine makes."""

    def __init__(self, nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> None:
        self.nodes = list(dict.fromkeys(nodes))
        self.edges = set(edges)
        self._pred: dict[str, list[str]] = {n: [] for n in self.nodes}
        self._succ: dict[str, list[str]] = {n: [] for n in self.nodes}
        for a, b in sorted(self.edges):
            self._succ[a].append(b)
            self._pred[b].append(a)

    def predecessors(self, node: str) -> list[str]:
        return list(self._pred[node])

    def successors(self, node: str) -> list[str]:
        return list(self._succ[node])

    def _reach(self, node: str, step: dict[str, list[str]]) -> set[str]:
        seen: set[str] = set()
        todo = list(step[node])
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(step[n])
        return seen

    def ancestors(self, node: str) -> set[str]:
        return self._reach(node, self._pred)

    def descendants(self, node: str) -> set[str]:
        return self._reach(node, self._succ)

    def cycle(self) -> list[str] | None:
        """One dependency cycle as [a, b, ..., a], or None."""
        try:
            graphlib.TopologicalSorter({n: self._pred[n] for n in self.nodes}).prepare()
        except graphlib.CycleError as e:
            return list(e.args[1])  # producer -> consumer, first node repeated last
        return None

    def order(self) -> list[str]:
        """Topological order, ties broken by name (stable across runs and machines)."""
        indegree = {n: len(self._pred[n]) for n in self.nodes}
        ready = [n for n, d in indegree.items() if d == 0]
        heapq.heapify(ready)
        out: list[str] = []
        while ready:
            n = heapq.heappop(ready)
            out.append(n)
            for m in self._succ[n]:
                indegree[m] -= 1
                if indegree[m] == 0:
                    heapq.heappush(ready, m)
        if len(out) != len(self.nodes):
            raise ValueError(f"dependency cycle: {' -> '.join(self.cycle() or [])}")
        return out
