"""Red team of `maximum_cliques`: ties with exponentially many largest groups (issue 17).

A liar ``z`` that disputes ``k`` pairs (a fellow liar and an honest worker, each pair
also disputing) makes one conflict component, a windmill, with ``2^k`` maximum
independent sets. Listing them all took 4 s at k = 16 and grows fourfold every two
more liars, so a few dozen colluders stalled the coordinator's round; these tests fail
if the search lists them all again (they would not finish) or if the shortcut gets
the workers inside some or every largest group wrong.
"""

from __future__ import annotations

import networkx as nx
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from phalanx.assignment import Assignment
from phalanx.detection import Replica, detect, maximum_cliques, payload_digest
from phalanx.detection import cliques as cliques_module


def windmill(k: int) -> nx.Graph:
    """Hub 0 joined to k disjoint edges (i, k + i)."""
    g = nx.Graph()
    for i in range(1, k + 1):
        g.add_edges_from([(0, i), (0, k + i), (i, k + i)])
    return g


def test_a_windmill_of_forty_blades_is_solved_without_listing_its_sets() -> None:
    """2^40 maximum cliques: would never finish if they were listed."""
    k = 40
    found = maximum_cliques(windmill(k))
    assert not found.is_unique
    assert found.truncated == (True,)
    assert found.count == cliques_module.MAX_LISTED_PER_COMPONENT  # a lower bound
    assert found.union == frozenset(range(1, 2 * k + 1))  # everyone but the hub
    assert found.core == frozenset()
    assert found.size == k
    assert all(len(c) == k for c in found.cliques(5))


def test_a_round_with_a_forty_blade_windmill_of_disputes_is_judged() -> None:
    """Through `detect`: liar 0 and liars 1..k each forge a different value on the file
    they share with honest worker k + i. Only the hub is outside every largest group."""
    k = 40
    honest_block = tuple(range(2 * k + 1, 2 * k + 6))
    files = (*((0, i, k + i) for i in range(1, k + 1)), honest_block)
    assignment = Assignment(2 * k + 6, files)

    def replica(w: int, f: int) -> Replica:
        lie = 1.0 if w == 0 else 2.0 if f < k and w == f + 1 else 0.0
        v = torch.tensor([float(f), lie], dtype=torch.float32)
        return Replica(w, f, v, payload_digest(v.numpy().tobytes()))

    replicas = [replica(w, f) for f, ws in enumerate(files) for w in ws]
    verdict = detect(assignment, replicas, mode="exact")
    assert verdict.flagged == {0}
    assert verdict.suspects == frozenset(range(1, 2 * k + 1))
    assert set(verdict.dropped) == set(range(k))
    assert verdict.num_max_cliques >= cliques_module.MAX_LISTED_PER_COMPONENT


@st.composite
def graphs(draw: st.DrawFn) -> nx.Graph:
    n = draw(st.integers(2, 11))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=20))
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from((a, b) for a, b in edges if a != b)
    return g


@given(graphs(), st.integers(1, 3))
def test_workers_in_some_and_every_largest_group_match_the_full_listing(
    g: nx.Graph, limit: int
) -> None:
    """Could fail if deciding membership worker by worker disagreed with listing."""
    full = maximum_cliques(g)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cliques_module, "MAX_LISTED_PER_COMPONENT", limit)
        cut = maximum_cliques(g)
    assert (cut.union, cut.core, cut.size) == (full.union, full.core, full.size)
    assert cut.is_unique == full.is_unique
    assert cut.count == min(full.count, cut.count) and cut.count >= 1
    listed = set(full.cliques())
    assert all(c in listed for c in cut.cliques())
