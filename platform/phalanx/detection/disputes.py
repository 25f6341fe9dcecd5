"""Evidence across rounds: the run's disputes, and the workers who cannot all be honest.

Two honest replicas of a file always agree, so every *dispute* (two workers whose
replicas of a file disagreed) has a liar on at least one side. Across the rounds of a
run the disputes form a graph over stable worker ids, the *dispute graph*, in which the
adversaries cover every edge. If at most ``bound`` workers lie, an honest worker's
dispute partners are all liars, so it has at most ``bound`` of them, and moreover those
partners together with a cover of the remaining disputes fit in ``bound`` workers.

:func:`proven_liars` turns that into a flag with no false positive: worker ``w`` is
flagged when its distinct partners, plus a lower bound on the liars needed to cover the
disputes that involve neither ``w`` nor a partner (a matching: each of its edges needs a
liar of its own) and the workers already proven, exceed ``bound``. Were ``w`` honest,
all of those would be distinct liars, more than ``bound`` of them. The argument holds
while honest replicas never disagree, that is with ``exact`` comparisons or honest noise
below the tolerance; a worker that lied only against up to ``bound`` partners in the
whole run stays unflagged, since, from agreement alone, its partners could be the liars
instead.

With per-round relabelling, a colluder meets new honest workers every round and its
partners grow, while an honest worker's partners stay among the colluders. The rule
needs no estimate of how often an honest worker is disputed: its false-positive bound
is zero under the premise above, for any attack, over any number of rounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

import networkx as nx


@dataclass
class DisputeRecord:
    """Every dispute of a run so far, by pair of stable worker ids.

    Attributes
    ----------
    rounds : dict of (int, int) to list of int
        For each pair ``(a, b)``, ``a < b``, that ever disagreed, the rounds in which
        they did (ascending, without repeats).
    """

    rounds: dict[tuple[int, int], list[int]] = field(default_factory=dict)

    def add_round(self, t: int, conflicts: Iterable[tuple[int, int]]) -> None:
        """Record round ``t``'s disputed pairs (each ``(a, b)`` in either order)."""
        for a, b in conflicts:
            if a == b:
                raise ValueError(f"a worker cannot dispute with itself: {a}")
            seen = self.rounds.setdefault((min(a, b), max(a, b)), [])
            if not seen or seen[-1] != t:
                seen.append(t)

    def partners(self, worker: int) -> dict[int, list[int]]:
        """Each distinct worker ``worker`` disputed with, and the rounds they did."""
        found: dict[int, list[int]] = {}
        for (a, b), ts in self.rounds.items():
            if worker in (a, b):
                found[b if a == worker else a] = ts
        return dict(sorted(found.items()))

    def graph(self) -> nx.Graph:
        """Return the dispute graph: workers joined when they ever disagreed."""
        g = nx.Graph()
        # Sorted, so that a record restored from a checkpoint yields the same matchings.
        g.add_edges_from(sorted(self.rounds))
        return g

    def to_state(self) -> list[list[int]]:
        """Checkpoint form: one ``[a, b, round, round, ...]`` per pair."""
        return [[a, b, *ts] for (a, b), ts in sorted(self.rounds.items())]

    @classmethod
    def from_state(cls, state: object, *, num_workers: int | None = None) -> DisputeRecord:
        """Rebuild a record from :meth:`to_state`.

        A checkpoint is read back like any stored input: each row must be two different
        workers (below ``num_workers`` when given) and at least one round, all integers.

        Raises
        ------
        ValueError
            Naming the first row that is not.
        """
        record = cls()
        for row in _rows(state, "disputes"):
            if not isinstance(row, list | tuple) or len(row) < 2:
                raise ValueError(f"a dispute {row!r:.60} is not a pair of workers and rounds")
            a, b = (_worker(x, num_workers) for x in row[:2])
            if a == b:
                raise ValueError(f"worker {a} is recorded in a dispute with itself")
            ts = sorted({_integer(x, "a round") for x in row[2:]})
            if not ts or ts[0] < 1:
                raise ValueError(f"the dispute of workers {a} and {b} names no round from 1 on")
            record.rounds[(min(a, b), max(a, b))] = ts
        return record


def _rows(state: object, what: str) -> list[Any] | tuple[Any, ...]:
    if not isinstance(state, list | tuple):
        raise ValueError(f"{what} of the evidence across rounds is not a list")
    return state


def _integer(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} {value!r:.40} is not an integer")
    return value


def _worker(value: object, num_workers: int | None) -> int:
    worker = _integer(value, "a worker")
    if worker < 0 or (num_workers is not None and worker >= num_workers):
        top = "" if num_workers is None else f" to {num_workers - 1}"
        raise ValueError(f"worker {worker} is not a worker of this run (0{top})")
    return worker


@dataclass(frozen=True)
class CrossRoundEvidence:
    """Why the disputes of a run prove ``worker`` a liar.

    Attributes
    ----------
    worker : int
        The flagged worker.
    partners : dict of int to tuple of int
        Each worker it disputed with, and the rounds in which it did.
    known_liars : int
        Workers proven liars before, other than its partners.
    independent_disputes : int
        Disputes among the remaining workers (none involving ``worker``, a partner or
        a known liar) that need a liar each: a matching of the rest of the graph.
    bound : int
        The most liars the run assumes (``detection.max_adversaries``).
    """

    worker: int
    partners: Mapping[int, tuple[int, ...]]
    known_liars: int
    independent_disputes: int
    bound: int

    @property
    def rounds(self) -> tuple[int, ...]:
        """Rounds in which the worker was in a dispute."""
        return tuple(sorted({t for ts in self.partners.values() for t in ts}))

    @property
    def liars_if_honest(self) -> int:
        """Liars there would have to be, were the worker honest."""
        return len(self.partners) + self.known_liars + self.independent_disputes

    def summary(self) -> str:
        """Say why, in one paragraph of plain English."""
        n, k = len(self.partners), len(self.rounds)
        disputes = sum(len(ts) for ts in self.partners.values())
        text = (
            f"Worker {self.worker} disagreed with {n} different workers "
            f"({disputes} disputes in {k} round{'s' if k != 1 else ''}). Two honest workers "
            "always agree, so were it honest, all "
            f"{n} would be lying"
        )
        if self.known_liars:
            text += f", beside the {self.known_liars} workers already proven to lie"
        if self.independent_disputes:
            text += (
                f", and {self.independent_disputes} more disputes among other workers would "
                "each need a liar of their own"
            )
        return (
            f"{text}: {self.liars_if_honest} liars, more than the {self.bound} this run "
            "assumes at most. So it is lying."
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form, with the summary."""
        return {
            "worker": self.worker,
            "partners": [{"worker": w, "rounds": list(ts)} for w, ts in self.partners.items()],
            "rounds": list(self.rounds),
            "known_liars": self.known_liars,
            "independent_disputes": self.independent_disputes,
            "liars_if_honest": self.liars_if_honest,
            "bound": self.bound,
            "summary": self.summary(),
        }


def greedy_matching(edges: Iterable[tuple[int, int]], excluded: Set[int]) -> set[int]:
    """Return the ends of the greedy maximal matching of ``edges`` among workers not excluded.

    The matching ``networkx.maximal_matching`` finds in the subgraph without
    ``excluded`` when ``edges`` are that graph's edges in its order (it takes each edge,
    in order, whose ends are both still free), without building the subgraph: the
    judge asks for one per candidate worker, so this is its inner loop.
    """
    ends: set[int] = set()
    for u, v in edges:
        if u != v and u not in ends and v not in ends and u not in excluded and v not in excluded:
            ends.add(u)
            ends.add(v)
    return ends


def proven_liars(
    record: DisputeRecord, bound: int, *, known: Iterable[int] = ()
) -> dict[int, CrossRoundEvidence]:
    """Workers that cannot be honest if at most ``bound`` workers lie.

    Each proof makes the next one easier: once ``w`` is proven, it is a liar whoever
    else is honest, so it counts against every other worker's bound. The search
    repeats until no new worker is proven.

    Parameters
    ----------
    record : DisputeRecord
        The run's disputes so far.
    bound : int
        The most workers assumed to lie, at least 0.
    known : iterable of int
        Workers already proven liars (not judged again; they count as liars).

    Returns
    -------
    dict of int to CrossRoundEvidence
        One record per newly proven liar, by worker.
    """
    if bound < 0:
        raise ValueError(f"bound must be at least 0, got {bound}")
    g = record.graph()
    edges = list(g.edges())
    liars = set(known)
    proven: dict[int, CrossRoundEvidence] = {}
    changed = True
    while changed:
        changed = False
        # The ends of a maximal matching cover every dispute among workers not yet
        # proven, so no matching of what is left around a worker is larger than the part
        # of the cover left there: where even that keeps the worker within the bound,
        # the matching itself (linear in the disputes, per worker) need not be computed.
        cover = greedy_matching(edges, liars)
        for w in sorted(set(g.nodes) - liars):
            partners = set(g.adj[w])
            certain = partners | liars
            rest = 0
            if len(certain) + len(cover - certain - {w}) <= bound:
                continue
            if len(certain) <= bound:
                rest = len(greedy_matching(edges, certain | {w})) // 2
                if len(certain) + rest <= bound:
                    continue
            proven[w] = CrossRoundEvidence(
                worker=w,
                partners={p: tuple(ts) for p, ts in record.partners(w).items()},
                known_liars=len(liars - partners),
                independent_disputes=rest,
                bound=bound,
            )
            liars.add(w)
            changed = True
    return proven


class LiarsAcrossRounds:
    """The run's `DisputeRecord` and the liars it proves, round after round.

    Parameters
    ----------
    bound : int
        The most workers assumed to lie (see `proven_liars`).
    """

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.record = DisputeRecord()
        self.proven: set[int] = set()

    def observe(
        self, t: int, conflicts: Iterable[tuple[int, int]]
    ) -> dict[int, CrossRoundEvidence]:
        """Add round ``t``'s disputed pairs; return the evidence of each newly proven liar."""
        self.record.add_round(t, conflicts)
        proofs = proven_liars(self.record, self.bound, known=self.proven)
        self.proven |= proofs.keys()
        return proofs

    def state(self) -> dict[str, list[int] | list[list[int]]]:
        """Checkpoint form (plain lists of ints)."""
        return {"disputes": self.record.to_state(), "proven": sorted(self.proven)}

    def restore(self, state: Mapping[str, object], *, num_workers: int | None = None) -> None:
        """Continue from :meth:`state` (checked as `DisputeRecord.from_state` says).

        Raises
        ------
        ValueError
            When the state is malformed or names a worker outside ``0 .. num_workers - 1``.
        """
        self.record = DisputeRecord.from_state(state.get("disputes", []), num_workers=num_workers)
        self.proven = {_worker(w, num_workers) for w in _rows(state.get("proven", []), "proven")}
