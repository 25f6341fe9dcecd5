"""Maximum cliques of the agreement graph, one conflict component at a time."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import networkx as nx

MAX_LISTED_PER_COMPONENT = 1024
"""Most maximum independent sets listed for one conflict component. Colluders can give
a component exponentially many (a liar disputing k pairs of a liar and an honest worker
has 2^k); past this many, which workers are in some or in every one is decided worker by
worker instead of by listing them all."""


@dataclass(frozen=True)
class MaximumCliques:
    """The maximum cliques of an agreement graph, in factored form.

    Every maximum clique is ``free`` plus one choice from each component's maximum
    independent sets; ``alternatives`` lists them (all of them unless the component is
    ``truncated``).

    Attributes
    ----------
    free : frozenset of int
        Workers that conflict with nobody; they belong to every maximum clique.
    alternatives : tuple of tuple of frozenset of int
        Per connected component of the conflict graph, its maximum independent sets
        (sets of workers with no conflict among them), sorted; at most
        `MAX_LISTED_PER_COMPONENT` of them.
    truncated : tuple of bool
        Per component, whether it has more maximum independent sets than listed.
    in_some, in_every : frozenset of int
        Workers of the components that belong to at least one (to every) maximum
        independent set of theirs.
    """

    free: frozenset[int]
    alternatives: tuple[tuple[frozenset[int], ...], ...]
    truncated: tuple[bool, ...] = ()
    in_some: frozenset[int] = frozenset()
    in_every: frozenset[int] = frozenset()

    @property
    def size(self) -> int:
        """Number of workers in a maximum clique."""
        return len(self.free) + sum(len(options[0]) for options in self.alternatives)

    @property
    def count(self) -> int:
        """Number of maximum cliques (a lower bound when a component is `truncated`)."""
        return math.prod(len(options) for options in self.alternatives)

    @property
    def is_unique(self) -> bool:
        """Whether there is exactly one maximum clique."""
        return not any(self.truncated) and all(len(o) == 1 for o in self.alternatives)

    @property
    def union(self) -> frozenset[int]:
        """Workers that belong to at least one maximum clique."""
        return self.free | self.in_some

    @property
    def core(self) -> frozenset[int]:
        """Workers that belong to every maximum clique."""
        return self.free | self.in_every

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
    alternatives, truncated = [], []
    in_some: set[int] = set()
    in_every: set[int] = set()
    for component in sorted(nx.connected_components(conflicts), key=min):
        if len(component) > 1:
            adjacency = {v: frozenset(conflicts.adj[v]) for v in component}
            options = _maximum_independent_sets(adjacency, limit=MAX_LISTED_PER_COMPONENT + 1)
            cut = len(options) > MAX_LISTED_PER_COMPONENT
            options = sorted(options, key=sorted)[:MAX_LISTED_PER_COMPONENT]
            alternatives.append(tuple(options))
            truncated.append(cut)
            if cut:
                some, every = _membership(adjacency, len(options[0]))
            else:
                some, every = frozenset().union(*options), frozenset.intersection(*options)
            in_some |= some
            in_every |= every
    return MaximumCliques(
        free=free,
        alternatives=tuple(alternatives),
        truncated=tuple(truncated),
        in_some=frozenset(in_some),
        in_every=frozenset(in_every),
    )


def _membership(
    adj: Mapping[int, frozenset[int]], alpha: int
) -> tuple[frozenset[int], frozenset[int]]:
    """Vertices in some, and in every, maximum independent set (of size ``alpha``).

    ``v`` is in some iff the graph without ``v`` and its neighbours still holds
    ``alpha - 1`` independent vertices, and in every one iff the graph without ``v``
    holds fewer than ``alpha``: one size computation per vertex, never a listing.
    """
    everyone = frozenset(adj)
    some = frozenset(
        v for v in adj if _independence_number(adj, everyone - adj[v] - {v}) == alpha - 1
    )
    every = frozenset(v for v in some if _independence_number(adj, everyone - {v}) < alpha)
    return some, every


def _independence_number(adj: Mapping[int, frozenset[int]], candidates: frozenset[int]) -> int:
    """Size of a maximum independent set of the graph induced on ``candidates``."""
    sub = {v: adj[v] & candidates for v in candidates}
    best = len(_greedy_independent_set(sub))
    stack: list[tuple[int, frozenset[int]]] = [(0, candidates)]
    while stack:
        chosen, left = stack.pop()
        isolated = frozenset(v for v in left if not sub[v] & left)
        chosen, left = chosen + len(isolated), left - isolated
        if chosen + _independence_bound(sub, left) <= best:
            continue
        if not left:
            best = chosen
            continue
        v = max(left, key=lambda u: (len(sub[u] & left), u))
        stack.append((chosen, left - {v}))
        stack.append((chosen + 1, left - sub[v] - {v}))
    return best


def _maximum_independent_sets(
    adj: Mapping[int, frozenset[int]], limit: int | None = None
) -> list[frozenset[int]]:
    """Every maximum independent set of a graph given as adjacency sets (at most ``limit``).

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
            if limit is not None and len(found) >= limit:
                break
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
