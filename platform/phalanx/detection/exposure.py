"""How many accepted files a few liars that nothing has exposed yet could have supplied.

A file's accepted value is a lie only if every one of its *supporters* (the replicas
that agree with it and may vote, `Verdict.supporters`) lies: colluders who hold all of
a file's replicas agree with one another, and no round can tell their file from an
honest one. If at most ``liars`` of the workers lie, the files they could have
supplied are those whose supporters all lie, inside one set of ``liars`` workers.
That number, maximised over the sets, is what a robust rule after detection must
tolerate (``aggregation.f = "auto"``).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

import numpy as np


def exposed_files(supporters: Mapping[int, Sequence[int]], liars: int) -> int:
    """Count, or bound, the accepted files whose supporters could all be among ``liars`` workers.

    The exact count is the most files whose supporters all lie in one set of ``liars``
    workers. It is computed by trying every such set when there are at most
    `EXACT_BUDGET` (set, file) pairs to check, as on the built-in designs of 15 workers;
    otherwise (it is a densest-subhypergraph problem) the count is bounded by the
    least of four bounds that are each sound, summed over the files grouped by their
    number ``v`` of supporters:

    * the ``n_v`` files themselves;
    * one per ``v``-set of the liars, times ``m_v``, the most files that share one set
      of supporters: ``C(liars, v) m_v``;
    * for ``v >= 2``, each such file holds ``C(v, 2)`` pairs of liars, and two workers
      support at most ``lambda_v`` files together: ``C(liars, 2) lambda_v / C(v, 2)``;
    * each such file has ``v`` supporters among the liars, who support at most the
      ``liars`` largest per-worker counts ``d_v`` between them:
      ``sum(top liars of d_v) / v``.

    On a Steiner triple system of 15 workers (35 files, every pair of workers together
    on one file) with 7 liars the pair bound gives 7, which a Fano subplane reaches
    (PG(3, 2) has fifteen). The built-in STS(15) has none: 7 of its workers hold at
    most 5 files together, which the exact count finds.

    Parameters
    ----------
    supporters : mapping of int to sequence of int
        Each accepted file's supporters.
    liars : int
        The most workers that may lie among those not already excluded.

    Returns
    -------
    int
        At most the number of files with at least one supporter.
    """
    if liars < 0:
        raise ValueError(f"liars must be at least 0, got {liars}")
    by_size: dict[int, list[frozenset[int]]] = {}
    for workers in supporters.values():
        group = frozenset(workers)
        if group:
            by_size.setdefault(len(group), []).append(group)
    bound = sum(_exposed(groups, v, liars) for v, groups in sorted(by_size.items()))
    exact = _exact([g for groups in by_size.values() for g in groups], liars)
    return bound if exact is None else min(bound, exact)


EXACT_BUDGET = 4_000_000
"""The most (set of liars, file) pairs `exposed_files` checks to count exactly."""


def _exact(groups: Sequence[frozenset[int]], liars: int) -> int | None:
    """Count exactly by trying every set of ``liars`` workers; ``None`` when too costly."""
    workers = sorted(set().union(*groups)) if groups else []
    size = min(liars, len(workers))
    if len(workers) > 63 or math.comb(len(workers), size) * len(groups) > EXACT_BUDGET:
        return None
    if not groups or size == 0:
        return 0
    bit = {w: 1 << i for i, w in enumerate(workers)}
    files = np.array([sum(bit[w] for w in g) for g in groups], dtype=np.uint64)
    choices = itertools.combinations(range(len(workers)), size)
    sets = np.array([sum(1 << i for i in chosen) for chosen in choices], dtype=np.uint64)
    inside = (files[None, :] & ~sets[:, None]) == 0
    return int(inside.sum(axis=1).max())


def _exposed(groups: Sequence[frozenset[int]], v: int, liars: int) -> int:
    """`exposed_files` for files of ``v`` supporters each."""
    if liars < v:
        return 0
    same = max(Counter(groups).values())
    load = Counter(w for g in groups for w in g)
    bounds = [
        len(groups),
        math.comb(liars, v) * same,
        sum(heapq.nlargest(liars, load.values())) // v,
    ]
    if v >= 2:
        pairs = Counter(p for g in groups for p in _pairs(g))
        bounds.append(math.comb(liars, 2) * max(pairs.values()) // math.comb(v, 2))
    return min(bounds)


def _pairs(group: frozenset[int]) -> Iterator[tuple[int, ...]]:
    return itertools.combinations(sorted(group), 2)
