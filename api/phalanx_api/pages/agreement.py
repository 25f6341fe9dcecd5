"""A round's agreement graph, rebuilt from its detection events and laid out on a circle.

In the agreement graph two workers are joined when they agreed on every file
they both computed (:mod:`phalanx.detection`). The coordinator does not store
the graph itself; it stores, with each flagged worker, the agreeing group it was
measured against (``clique``) and every worker it disagreed with
(``disagreed_with``). That is enough to draw it:

- every disagreement has a flagged end (workers of the unique largest agreeing
  group agree with one another), so the flagged workers' ``disagreed_with``
  lists are all the missing edges, and every other pair of workers that replied
  is joined;
- when several largest groups tied (``num_max_cliques > 1``), disagreements
  between two unflagged workers were not recorded: those pairs are drawn as
  *not recorded* rather than guessed;
- a round without events had nobody outside the agreeing group; its workers
  are drawn fully joined;
- with one replica per file (``r = 1``) nothing was compared and there is no
  graph to draw.

Workers whose reply was refused are drawn apart, without edges. Large rounds
are reduced to the flagged workers and those they disagreed with.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from phalanx.english_list import name_numbers
from phalanx.event_kinds import FLAG_KINDS, EventKind

#: Size of the drawing's ``viewBox`` (square).
SIZE = 360.0
#: Most workers drawn with every edge; beyond this only disagreements are drawn.
MAX_FULL = 40
#: Most workers drawn in the reduced drawing.
MAX_REDUCED = 60

NodeState = Literal["trusted", "flagged", "rejected", "silent"]
EdgeState = Literal["agree", "disagree", "unknown"]
Drawing = Literal["full", "disagreements", "none"]


@dataclass(frozen=True)
class RoundEvent:
    """What the graph needs of one detection event."""

    worker: int | None
    kind: str
    client_id: str | None
    evidence: Mapping[str, Any]


@dataclass(frozen=True)
class GraphNode:
    """A worker, where it is drawn and what became of it this round.

    Attributes
    ----------
    worker : int
        The worker's index in the run.
    x, y : float
        Centre, in viewBox units.
    state : {"trusted", "flagged", "rejected", "silent"}
        In the agreeing group; flagged; reply refused; or not compared (no
        reply, or nothing in common with the others).
    client_id : str or None
        The client behind the worker, when an event named it.
    """

    worker: int
    x: float
    y: float
    state: NodeState
    client_id: str | None


@dataclass(frozen=True)
class GraphEdge:
    """A pair of workers: agreed, disagreed, or not recorded."""

    a: int
    b: int
    x1: float
    y1: float
    x2: float
    y2: float
    state: EdgeState


@dataclass(frozen=True)
class AgreementGraph:
    """The drawing of one round's agreement graph.

    Attributes
    ----------
    round : int
        The round drawn.
    drawing : {"full", "disagreements", "none"}
        Every worker with every edge; only flagged workers and whom they disagreed
        with; or nothing (nothing was compared).
    nodes, edges : tuples
        What to draw.
    flagged : tuple of int
        Workers flagged this round.
    notes : tuple of str
        What the reader must know to read it (ties, reductions, r = 1).
    node_radius : float
        Radius of a worker's circle.
    """

    round: int
    drawing: Drawing
    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]
    flagged: tuple[int, ...]
    notes: tuple[str, ...]
    node_radius: float
    size: float = SIZE

    @property
    def dense(self) -> bool:
        """Whether there are so many lines that they are drawn thinner."""
        return len(self.edges) > 60

    def count(self, state: str) -> int:
        """Return how many nodes or edges are in ``state``."""
        return sum(n.state == state for n in self.nodes) + sum(e.state == state for e in self.edges)


def agreement_graph(
    round_number: int, num_workers: int, replication: int, events: Sequence[RoundEvent]
) -> AgreementGraph:
    """Rebuild and lay out the agreement graph of one round.

    Parameters
    ----------
    round_number : int
        The round.
    num_workers : int
        Workers in the round's assignment (its summary's ``num_workers``).
    replication : int
        Replicas per file (the summary's ``r``); 1 means nothing was compared.
    events : Sequence[RoundEvent]
        The round's detection events.

    Returns
    -------
    AgreementGraph
        Nodes on a circle, edges between them, and notes for the reader.
    """
    clients: dict[int, str | None] = {}
    flagged: set[int] = set()
    rejected: set[int] = set()
    clique: set[int] = set()
    conflicts: set[frozenset[int]] = set()
    tied = False
    outliers = False
    for event in events:
        if event.worker is None:
            continue
        clients.setdefault(event.worker, event.client_id)
        if event.kind not in FLAG_KINDS:
            rejected.add(event.worker)
            continue
        flagged.add(event.worker)
        outliers = outliers or event.kind == EventKind.OUTLIER
        clique.update(_ints(event.evidence.get("clique")))
        for other in _ints(event.evidence.get("disagreed_with")):
            if other != event.worker:
                conflicts.add(frozenset((event.worker, other)))
        count = event.evidence.get("num_max_cliques")
        tied = tied or (isinstance(count, int) and count > 1)
    rejected -= flagged
    flagged_sorted = tuple(sorted(flagged))
    workers = max(num_workers, max([*clients, -1]) + 1)
    if replication <= 1 or outliers:
        return AgreementGraph(
            round=round_number,
            drawing="none",
            nodes=(),
            edges=(),
            flagged=flagged_sorted,
            notes=(
                "Each file went to a single worker in this round, so no two workers computed "
                "the same thing and there is no agreement graph; flags rest on how far each "
                "update lies from the others.",
            ),
            node_radius=0.0,
        )
    notes: list[str] = []
    compared = clique | flagged | {w for pair in conflicts for w in pair}
    if not compared:  # no flag this round: everyone who replied agreed
        compared = set(range(workers)) - rejected
        notes.append(
            "Nobody was flagged in this round: every worker that replied agreed with every "
            "other on the files they shared."
        )
    silent = set(range(workers)) - compared - rejected
    if len(compared) > MAX_FULL:
        return _reduced(round_number, flagged_sorted, conflicts, clients)
    if tied:
        notes.append(
            "Several groups of agreeing workers tied for largest, so no group could be trusted "
            "as the honest one: disputed files were left out (or, under the majority policy, "
            "decided by majority). Disagreements between two unflagged workers were not "
            "recorded; those pairs are drawn dotted."
        )
    if silent:
        who = name_numbers("Worker", "Workers", sorted(silent))
        notes.append(f"{who} sent no reply that could be compared (grey).")
    order = sorted(range(workers))
    places = _circle(order)
    nodes = tuple(
        GraphNode(
            worker=w,
            x=places[w][0],
            y=places[w][1],
            state=_state(w, flagged, rejected, silent),
            client_id=clients.get(w),
        )
        for w in order
    )
    edges = []
    for a, b in itertools.combinations(sorted(compared), 2):
        pair = frozenset((a, b))
        if pair in conflicts:
            state: EdgeState = "disagree"
        elif tied and a not in flagged and b not in flagged:
            state = "unknown"
        else:
            state = "agree"
        edges.append(_edge(a, b, places, state))
    # Draw agreement on top of disagreement, so the agreeing group stands out.
    edges.sort(key=lambda e: {"disagree": 0, "unknown": 1, "agree": 2}[e.state])
    return AgreementGraph(
        round=round_number,
        drawing="full",
        nodes=nodes,
        edges=tuple(edges),
        flagged=flagged_sorted,
        notes=tuple(notes),
        node_radius=_radius(len(nodes)),
    )


def _reduced(
    round_number: int,
    flagged: tuple[int, ...],
    conflicts: set[frozenset[int]],
    clients: Mapping[int, str | None],
) -> AgreementGraph:
    """Draw only the flagged workers and those they disagreed with, joined by disagreements."""
    involved = sorted(set(flagged).union(*conflicts) if conflicts else set(flagged))
    shown = sorted(
        [w for w in involved if w in flagged][:MAX_REDUCED]
        + [w for w in involved if w not in flagged][: max(0, MAX_REDUCED - len(flagged))]
    )
    places = _circle(shown)
    nodes = tuple(
        GraphNode(
            worker=w,
            x=places[w][0],
            y=places[w][1],
            state="flagged" if w in flagged else "trusted",
            client_id=clients.get(w),
        )
        for w in shown
    )
    edges = tuple(
        _edge(a, b, places, "disagree")
        for a, b in sorted(tuple(sorted(pair)) for pair in conflicts)
        if a in places and b in places
    )
    left_out = len(involved) - len(shown)
    notes = [
        "This round had too many workers to draw every pair: shown are the flagged workers "
        "and the workers they disagreed with, joined where they disagreed."
    ]
    if left_out:
        notes.append(f"{left_out} more workers are left out.")
    return AgreementGraph(
        round=round_number,
        drawing="disagreements",
        nodes=nodes,
        edges=edges,
        flagged=flagged,
        notes=tuple(notes),
        node_radius=_radius(len(nodes)),
    )


def _state(worker: int, flagged: set[int], rejected: set[int], silent: set[int]) -> NodeState:
    if worker in flagged:
        return "flagged"
    if worker in rejected:
        return "rejected"
    if worker in silent:
        return "silent"
    return "trusted"


def _radius(count: int) -> float:
    """Return a node radius that leaves room between neighbours on the circle."""
    spacing = 2 * math.pi * (SIZE / 2 - 30.0) / max(count, 1)
    return max(4.0, min(17.0, 0.4 * spacing))


def _circle(workers: Sequence[int]) -> dict[int, tuple[float, float]]:
    """Place workers clockwise on a circle, the first at the top."""
    centre = SIZE / 2
    radius = centre - 30.0
    count = max(len(workers), 1)
    places = {}
    for i, worker in enumerate(workers):
        angle = -math.pi / 2 + 2 * math.pi * i / count
        places[worker] = (centre + radius * math.cos(angle), centre + radius * math.sin(angle))
    return places


def _edge(a: int, b: int, places: Mapping[int, tuple[float, float]], state: EdgeState) -> GraphEdge:
    (x1, y1), (x2, y2) = places[a], places[b]
    return GraphEdge(a=a, b=b, x1=x1, y1=y1, x2=x2, y2=y2, state=state)


def _ints(value: object) -> list[int]:
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
