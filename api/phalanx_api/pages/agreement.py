"""A round's agreement graph, drawn from the record stored with the round.

In the agreement graph two workers are joined when they agreed on every file
they both computed (:mod:`phalanx.detection`). The coordinator stores the graph
with each round (:mod:`phalanx.agreement_record`): the workers that replied, the
pairs that disagreed, the rule that decided. This module only lays it out on a
circle:

- every two workers that replied are joined, agreeing unless the record lists
  them as a conflict (a full drawing has at most :data:`MAX_FULL` workers, whose
  conflicts a record always lists in full);
- detection's flags come from the record; a flag raised after the comparison
  (an update that made the aggregate overflow) comes from the round's events;
- workers whose reply was refused (from the round's events) are drawn apart,
  without edges; workers that sent nothing that could be compared are grey;
- with one replica per file (``r = 1``), or no file with two replies, nothing
  was compared and there is no graph to draw;
- a large round is reduced to the flagged workers and those they disagreed with;
- a round recorded before rounds kept their graph says so and draws nothing:
  its graph cannot be rebuilt.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from phalanx.agreement_record import AgreementRecord, AgreementRecordError, ConflictEdge
from phalanx.english_list import name_numbers
from phalanx.event_kinds import FLAG_KINDS

#: Size of the drawing's ``viewBox`` (square).
SIZE = 360.0
#: Most workers drawn with every edge; beyond this only disagreements are drawn.
MAX_FULL = 40
#: Most workers drawn in the reduced drawing.
MAX_REDUCED = 60

NodeState = Literal["trusted", "flagged", "rejected", "silent"]
EdgeState = Literal["agree", "disagree", "unknown"]
Drawing = Literal["full", "disagreements", "none", "unrecorded"]


@dataclass(frozen=True)
class RoundEvent:
    """What the graph needs of one detection event of the round."""

    worker: int | None
    kind: str
    client_id: str | None


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
    degree : int or None
        How many workers it agreed with (``None`` when it did not reply).
    """

    worker: int
    x: float
    y: float
    state: NodeState
    client_id: str | None
    degree: int | None = None


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
    drawing : {"full", "disagreements", "none", "unrecorded"}
        Every worker with every edge; only flagged workers and whom they disagreed
        with; nothing, as nothing was compared; or nothing, as the round's graph
        was not recorded (or cannot be read).
    nodes, edges : tuples
        What to draw.
    flagged : tuple of int
        Workers flagged this round.
    notes : tuple of str
        What the reader must know to read it (ties, reductions, r = 1).
    node_radius : float
        Radius of a worker's circle.
    replied : int
        How many workers' replies were compared.
    """

    round: int
    drawing: Drawing
    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]
    flagged: tuple[int, ...]
    notes: tuple[str, ...]
    node_radius: float
    replied: int = 0
    size: float = SIZE

    @property
    def dense(self) -> bool:
        """Whether there are so many lines that they are drawn thinner."""
        return len(self.edges) > 60

    def count(self, state: str) -> int:
        """Return how many nodes or edges are in ``state``."""
        return sum(n.state == state for n in self.nodes) + sum(e.state == state for e in self.edges)


def agreement_graph(
    round_number: int,
    stored: Mapping[str, Any] | None,
    *,
    num_workers: int,
    replication: int,
    events: Sequence[RoundEvent],
) -> AgreementGraph:
    """Lay out the agreement graph of one round from its stored record.

    Parameters
    ----------
    round_number : int
        The round.
    stored : Mapping or None
        The record stored with the round
        (:meth:`~phalanx.agreement_record.AgreementRecord.to_dict`); ``None`` for
        a round recorded before rounds kept it.
    num_workers : int
        Workers in the round's assignment (its summary's ``num_workers``).
    replication : int
        Replicas per file (the summary's ``r``).
    events : Sequence[RoundEvent]
        The round's detection events: who was refused, flagged later, and which
        client each worker is.

    Returns
    -------
    AgreementGraph
        Nodes on a circle, edges between them, and notes for the reader.
    """
    flagged_by_event = {e.worker for e in events if e.worker is not None and e.kind in FLAG_KINDS}
    if stored is None:
        return _unreadable(
            round_number,
            flagged_by_event,
            "This round's comparisons were not recorded: it ran before each round kept its "
            "agreement graph, so the graph cannot be drawn. Its events are listed beside.",
        )
    try:
        record = AgreementRecord.from_dict(stored)
    except AgreementRecordError as err:
        return _unreadable(
            round_number,
            flagged_by_event,
            f"This round's stored agreement graph cannot be read ({err}), so it is not drawn. "
            "Its events are listed beside.",
        )
    flagged = set(record.flagged) | flagged_by_event
    flagged_sorted = tuple(sorted(flagged))
    if not record.compared:
        return AgreementGraph(
            round=round_number,
            drawing="none",
            nodes=(),
            edges=(),
            flagged=flagged_sorted,
            notes=(_nothing_compared(record, replication),),
            node_radius=0.0,
            replied=len(record.replied),
        )
    clients: dict[int, str | None] = {}
    for event in events:
        if event.worker is not None:
            clients.setdefault(event.worker, event.client_id)
    replied = set(record.replied)
    rejected = {w for w in clients if w not in replied and w not in flagged}
    workers = max(num_workers, max([*clients, *replied, -1]) + 1)
    if workers > MAX_FULL:
        return _reduced(round_number, record, flagged, clients)
    silent = set(range(workers)) - replied - rejected - flagged
    notes = _notes(record, flagged_by_event - set(record.flagged), silent)
    order = list(range(workers))
    places = _circle(order)
    nodes = tuple(
        GraphNode(
            worker=w,
            x=places[w][0],
            y=places[w][1],
            state=_state(w, flagged, rejected, silent),
            client_id=clients.get(w),
            degree=record.degree(w),
        )
        for w in order
    )
    conflicts = {(e.a, e.b) for e in record.conflicts}
    edges = []
    for a, b in itertools.combinations(record.replied, 2):
        if (a, b) in conflicts:
            state: EdgeState = "disagree"
        elif not record.complete:
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
        replied=len(replied),
    )


def _unreadable(round_number: int, flagged: set[int], note: str) -> AgreementGraph:
    return AgreementGraph(
        round=round_number,
        drawing="unrecorded",
        nodes=(),
        edges=(),
        flagged=tuple(sorted(flagged)),
        notes=(note,),
        node_radius=0.0,
    )


def _nothing_compared(record: AgreementRecord, replication: int) -> str:
    flags = (
        "; flags rest on how far each update lies from the others."
        if record.rule == "outlier"
        else "."
    )
    if replication <= 1:
        return (
            "Each file went to a single worker in this round, so no two workers computed "
            f"the same thing and there is no agreement graph{flags}"
        )
    return (
        "No file got replies from two workers in this round, so nothing was compared and "
        f"there is no agreement graph{flags}"
    )


def _notes(record: AgreementRecord, flagged_later: set[int], silent: set[int]) -> list[str]:
    notes = []
    if record.num_conflicts == 0 and not record.flagged and not flagged_later:
        notes.append(
            "Nobody was flagged in this round: every worker that replied agreed with every "
            "other on the files they shared."
        )
    if record.num_max_cliques > 1:
        decided = {
            "unanimity": "a file kept a value only where its unflagged replicas all agreed, "
            "and disputed files were left out",
            "majority": "each disputed file took the value held by a strict majority of its "
            "unflagged replicas",
        }.get(record.rule, "disputed files were decided by the run's tie policy")
        notes.append(
            f"{record.num_max_cliques} groups of agreeing workers tied for largest, so no group "
            f"could be trusted as the honest one: {decided}. No worker inside a tied group is "
            "flagged for it."
        )
    elif record.suspects:
        # The largest group was unique, yet its outsiders were left unflagged: the round
        # ran with the evidence across rounds, which alone flags (judge's "suspect").
        who = name_numbers("Worker", "Workers", record.suspects)
        one = len(record.suspects) == 1
        notes.append(
            f"{who} disagreed with the largest group of agreeing workers but "
            f"{'is' if one else 'are'} not flagged: colluders who share a file can outvote "
            "an honest worker, so one round proves nothing; the disputed files were left out."
        )
    if flagged_later:
        who = name_numbers("Worker", "Workers", sorted(flagged_later))
        notes.append(
            f"{who} agreed where compared but {'was' if len(flagged_later) == 1 else 'were'} "
            "flagged afterwards; the events beside say why."
        )
    if not record.complete:
        notes.append(
            f"The round had {record.num_conflicts} disagreeing pairs; the "
            f"{len(record.conflicts)} kept with it are drawn, and pairs not kept are dotted."
        )
    if silent:
        who = name_numbers("Worker", "Workers", sorted(silent))
        notes.append(f"{who} sent no reply that could be compared (grey).")
    return notes


def _reduced(
    round_number: int,
    record: AgreementRecord,
    flagged: set[int],
    clients: Mapping[int, str | None],
) -> AgreementGraph:
    """Draw only the flagged workers and those they disagreed with, joined by disagreements."""
    shown_edges: Sequence[ConflictEdge] = [e for e in record.conflicts if flagged & {e.a, e.b}]
    if not flagged:  # tied groups flag nobody: their disagreements are all there is to show
        shown_edges = record.conflicts
    involved = sorted(flagged | {w for e in shown_edges for w in (e.a, e.b)})
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
            degree=record.degree(w),
        )
        for w in shown
    )
    edges = tuple(
        _edge(e.a, e.b, places, "disagree") for e in shown_edges if e.a in places and e.b in places
    )
    notes = [
        "This round had too many workers to draw every pair: shown are the flagged workers "
        "and the workers they disagreed with, joined where they disagreed."
    ]
    if not involved:
        notes.append(
            "Nobody disagreed: every worker that replied agreed with every other on the files "
            "they shared."
        )
    left_out = len(involved) - len(shown)
    if left_out:
        notes.append(f"{left_out} more workers are left out.")
    if not record.complete:
        notes.append(
            f"The round had {record.num_conflicts} disagreeing pairs; the "
            f"{len(record.conflicts)} kept with it are drawn."
        )
    return AgreementGraph(
        round=round_number,
        drawing="disagreements",
        nodes=nodes,
        edges=edges,
        flagged=tuple(sorted(flagged)),
        notes=tuple(notes),
        node_radius=_radius(len(nodes)),
        replied=len(record.replied),
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
