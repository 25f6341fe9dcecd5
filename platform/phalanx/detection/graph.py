"""The conflict graph of a round and its complement, the agreement graph."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import networkx as nx

from phalanx.assignment import Assignment
from phalanx.detection.comparison import (
    DEFAULT_TOL,
    FileComparison,
    Mode,
    Replica,
    compare_replicas,
)


def conflict_graph(workers: Iterable[int], comparisons: Iterable[FileComparison]) -> nx.Graph:
    """Graph over ``workers`` joining two workers iff they disagree on some shared file.

    It is the complement of the agreement graph and, when most workers agree, far
    sparser: detection works on it so that thousands of workers stay cheap.
    """
    graph = nx.Graph()
    graph.add_nodes_from(workers)
    for comparison in comparisons:
        graph.add_edges_from(comparison.conflicts())
    return graph


def agreement_graph(
    assignment: Assignment,
    replicas: Sequence[Replica],
    *,
    mode: Mode = "auto",
    tol: float = DEFAULT_TOL,
) -> nx.Graph:
    """Agreement graph over the workers that replied.

    Workers ``i`` and ``j`` are joined iff they agree on every file they both replied for
    (workers that share no file are joined: no conflict). Quadratic in the number of
    workers; `detect` uses the sparse `conflict_graph` instead.
    """
    comparisons = compare_replicas(assignment, replicas, mode=mode, tol=tol).values()
    return nx.complement(conflict_graph(sorted({r.worker for r in replicas}), comparisons))
