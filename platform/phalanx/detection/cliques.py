"""Maximum cliques of the agreement graph, one conflict component at a time."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import networkx as nx


@dataclass(frozen=True)
class MaximumCliques:
    """The maximum cliques of an agreement graph, in factored form.

    Every maximum clique is ``free`` plus one choice from each entry of ``alternatives``.

    Attributes
    ----------
    free : frozenset of int
        Workers that conflict with nobody; they belong to every maximum clique.
    alternatives : tuple of tuple of frozenset of int
        Per connected component of the conflict graph, its maximum independent sets
        (sets of workers with no conflict among them), sorted.
    """

    free: frozenset[int]
    alternatives: tuple[tuple[frozenset[int], ...], ...]

    @property
    def size(self) -> int:
        """Number of workers in a maximum clique."""
        return len(self.free) + sum(len(options[0]) for options in self.alternatives)

    @property
    def count(self) -> int:
        """Number of maximum cliques."""
        return math.prod(len(options) for options in self.alternatives)

    @property
    def is_unique(self) -> bool:
        """Whether there is exactly one maximum clique."""
        return all(len(options) == 1 for options in self.alternatives)

    @property
    def union(self) -> frozenset[int]:
        """Workers that belong to at least one maximum clique."""
        return self.free.union(*(s for options in self.alternatives for s in options))

    @property
    def core(self) -> frozenset[int]:
        """Workers that belong to every maximum clique."""
        return self.free.union(*(frozenset.intersection(*options) for options in self.alternatives))

    def cliques(self, limit: int | None = None) -> tuple[frozenset[int], ...]:
        """List the maximum cliques themselves, at most ``limit`` of them."""
        combos = itertools.islice(itertools.product(*self.alternatives), limit)
        return tuple(self.free.union(*combo) for combo in combos)


def maximum_cliques(conflicts: nx.Graph) -> MaximumCliques:
    """Maximum cliques of the agreement graph, found from its complement.

    A worker that conflicts with nobody is joined to everyone, so it is in every maximum
    clique. The rest splits into connected components of the conflict graph, and a set
    of workers is a clique of the agreement graph iff it has no conflict inside, that is
    iff its part in each component is an independent set of that component. Hence the
    maximum cliques are exactly the products of the maximum independent sets of the
    components: each component is solved on its own and nothing is enumerated for the
    whole graph. The clique is unique iff every component's maximum is.

    Parameters
    ----------
    conflicts : networkx.Graph
        `conflict_graph` over every worker that replied (isolated nodes included).
    """
    free = frozenset(v for v in conflicts.nodes if conflicts.degree(v) == 0)
    alternatives = []
    for component in sorted(nx.connected_components(conflicts), key=min):
        if len(component) > 1:
            adjacency = {v: frozenset(conflicts.adj[v]) for v in component}
            options = _maximum_independent_sets(adjacency)
            alternatives.append(tuple(sorted(options, key=sorted)))
    return MaximumCliques(free=free, alternatives=tuple(alternatives))


def _maximum_independent_sets(adj: Mapping[int, frozenset[int]]) -> list[frozenset[int]]:
    """Every maximum independent set of a graph given as adjacency sets.

    Branch and bound on "vertex in / vertex out" (which partitions the sets, so none is
    found twice), with two rules that keep it cheap on the sparse conflict graphs of
    detection: a candidate with no neighbour among the candidates joins at once (every
    maximum extension contains it), and a branch is cut when ``|chosen|`` plus an upper
    bound on what the candidates can add falls below the best size known. The search
    starts from a greedy solution, so only ties and improvements are explored. Unlike
    listing all maximal cliques of the complement (exponentially many on large sparse
    components), it only visits branches that can still reach the maximum.
    """
    best = len(_greedy_independent_set(adj))
    found: list[frozenset[int]] = []
    stack: list[tuple[frozenset[int], frozenset[int]]] = [(frozenset(), frozenset(adj))]
    while stack:
        chosen, candidates = stack.pop()
        isolated = frozenset(v for v in candidates if not adj[v] & candidates)
        chosen, candidates = chosen | isolated, candidates - isolated
        if len(chosen) + _independence_bound(adj, candidates) < best:
            continue
        if not candidates:
            if len(chosen) > best:
                best, found = len(chosen), []
            found.append(chosen)
            continue
        v = max(candidates, key=lambda u: (len(adj[u] & candidates), u))
        stack.append((chosen, candidates - {v}))
        stack.append((chosen | {v}, candidates - adj[v] - {v}))
    return found


def _greedy_independent_set(adj: Mapping[int, frozenset[int]]) -> frozenset[int]:
    """Independent set built by repeatedly taking a vertex of least remaining degree."""
    remaining = set(adj)
    chosen: set[int] = set()
    while remaining:
        v = min(remaining, key=lambda u: (len(adj[u] & remaining), u))
        chosen.add(v)
        remaining -= adj[v] | {v}
    return frozenset(chosen)


def _independence_bound(adj: Mapping[int, frozenset[int]], candidates: frozenset[int]) -> int:
    """Upper bound on the independence number of the graph induced on ``candidates``.

    An independent set holds at most one end of each edge of a matching, so
    ``|candidates| - |matching|`` bounds it; the matching is greedy, low degree first.
    """
    matched: set[int] = set()
    order = sorted(candidates, key=lambda u: (len(adj[u] & candidates), u))
    for v in order:
        if v not in matched:
            partner = next((u for u in sorted(adj[v] & candidates) if u not in matched), None)
            if partner is not None:
                matched.update((v, partner))
    return len(candidates) - len(matched) // 2
