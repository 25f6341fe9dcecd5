"""The round's agreement graph the run page draws (phalanx_api.pages.agreement).

The graphs come from :func:`phalanx.detection.detect` on real replicas, stored the
way the coordinator stores them (``AgreementRecord.to_dict``, through JSON), so
these tests break if the stored shape and the dashboard's reading of it drift apart.
"""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

from phalanx.agreement_record import AgreementRecord
from phalanx.assignment import Assignment, bibd_assignment
from phalanx.detection import Verdict, detect
from phalanx.event_kinds import EventKind
from phalanx_api.pages.agreement import MAX_FULL, AgreementGraph, RoundEvent, agreement_graph
from tests.support.replicas import attacked, honest_value, replica


def stored_record(verdict: Verdict) -> Any:
    """The round's agreement graph as the coordinator stores it (through JSON)."""
    return json.loads(json.dumps(AgreementRecord.from_verdict(verdict).to_dict()))


def stored_events(verdict: Verdict) -> list[RoundEvent]:
    """The round's events as the coordinator stores them."""
    return [
        RoundEvent(worker=w, kind=e.kind, client_id=f"client-{w}")
        for w, e in sorted(verdict.evidence.items())
    ]


def draw(verdict: Verdict, workers: int, r: int, events: list[RoundEvent] | None = None) -> Any:
    return agreement_graph(
        3,
        stored_record(verdict),
        num_workers=workers,
        replication=r,
        events=stored_events(verdict) if events is None else events,
    )


def edge_states(graph: AgreementGraph) -> dict[frozenset[int], str]:
    return {frozenset((e.a, e.b)): e.state for e in graph.edges}


def test_the_graph_joins_honest_workers_and_marks_the_flagged_ones() -> None:
    assignment = bibd_assignment(7, 3)
    verdict = detect(assignment, attacked(assignment, {2, 5}))
    assert verdict.flagged == {2, 5}
    graph = draw(verdict, 7, 3)

    assert graph.drawing == "full" and graph.flagged == (2, 5)
    assert {n.worker: n.state for n in graph.nodes} == {
        w: "flagged" if w in (2, 5) else "trusted" for w in range(7)
    }
    assert {n.client_id for n in graph.nodes if n.state == "flagged"} == {"client-2", "client-5"}
    assert {n.worker: n.degree for n in graph.nodes} == {0: 4, 1: 4, 2: 1, 3: 4, 4: 4, 5: 1, 6: 4}
    states = edge_states(graph)
    assert len(states) == 21  # every pair of the 7 workers that replied
    honest = [w for w in range(7) if w not in (2, 5)]
    assert all(states[frozenset(p)] == "agree" for p in itertools.combinations(honest, 2))
    # Every pair of workers shares a file in STS(7): each honest-liar pair disagreed,
    # and the colluders agreed with each other.
    assert all(states[frozenset((h, a))] == "disagree" for h in honest for a in (2, 5))
    assert states[frozenset((2, 5))] == "agree"
    assert not graph.notes


def test_nodes_lie_on_a_circle_inside_the_drawing() -> None:
    assignment = bibd_assignment(7, 3)
    graph = draw(detect(assignment, attacked(assignment, {0})), 7, 3)
    centre = graph.size / 2
    radii = {round(math.hypot(n.x - centre, n.y - centre), 6) for n in graph.nodes}
    assert len(radii) == 1
    assert all(0 < n.x < graph.size and 0 < n.y < graph.size for n in graph.nodes)


def test_a_round_without_flags_is_drawn_fully_joined() -> None:
    assignment = bibd_assignment(7, 3)
    graph = draw(detect(assignment, attacked(assignment, set())), 7, 3)
    assert [n.state for n in graph.nodes] == ["trusted"] * 7
    assert set(edge_states(graph).values()) == {"agree"} and len(graph.edges) == 21
    assert "Nobody was flagged" in graph.notes[0]


def test_a_refused_reply_is_drawn_apart_without_edges() -> None:
    assignment = bibd_assignment(7, 3)
    verdict = detect(assignment, [r for r in attacked(assignment, set()) if r.worker != 3])
    events = [RoundEvent(3, EventKind.BAD_SIGNATURE, "c3")]
    graph = draw(verdict, 7, 3, events)
    assert {n.worker: n.state for n in graph.nodes}[3] == "rejected"
    assert all(3 not in (e.a, e.b) for e in graph.edges)
    assert graph.flagged == ()


def test_a_worker_with_work_and_no_reply_is_grey_and_named() -> None:
    assignment = bibd_assignment(7, 3)
    verdict = detect(assignment, [r for r in attacked(assignment, set()) if r.worker != 6])
    graph = draw(verdict, 7, 3, [])
    assert {n.worker: n.state for n in graph.nodes}[6] == "silent"
    assert "Worker 6 sent no reply that could be compared (grey)." in graph.notes


def test_tied_groups_show_every_disagreement_stored_with_the_round() -> None:
    # Files are the pairs of 7 workers; 0 and 1 lie only to 2 and 3, 6 lies to everyone:
    # {0, 1, 4, 5} and {2, 3, 4, 5} tie as largest agreeing groups.
    assignment = Assignment(num_workers=7, files=tuple(itertools.combinations(range(7), 2)))
    replicas = []
    for f, (a, b) in enumerate(assignment.files):
        for w, other in ((a, b), (b, a)):
            lies = w == 6 or (w in (0, 1) and other in (2, 3))
            value = -honest_value(f) + w if lies else honest_value(f)
            replicas.append(replica(w, f, value))
    verdict = detect(assignment, replicas)
    assert verdict.rule == "unanimity" and verdict.flagged == {6}
    graph = draw(verdict, 7, 2)
    states = edge_states(graph)
    assert all(states[frozenset((6, w))] == "disagree" for w in range(6))
    # Neither end is flagged; the events could not tell this, the stored record does.
    assert states[frozenset((0, 2))] == "disagree" and states[frozenset((0, 4))] == "agree"
    assert "unknown" not in states.values()
    assert graph.notes[0].startswith("2 groups of agreeing workers tied for largest")
    assert "disputed files were left out" in graph.notes[0]


def test_single_replicas_have_no_graph() -> None:
    assignment = Assignment(num_workers=10, files=tuple((w,) for w in range(10)))
    values = {w: honest_value(w) for w in range(10)}
    values[1] = values[1] * 1000  # far from every other update: an outlier
    verdict = detect(assignment, [replica(w, w, values[w]) for w in range(10)])
    assert verdict.rule == "outlier" and verdict.flagged == {1}
    graph = draw(verdict, 10, 1)
    assert graph.drawing == "none" and graph.nodes == () and graph.flagged == (1,)
    assert "single worker" in graph.notes[0] and "how far each update lies" in graph.notes[0]


def test_a_large_round_draws_only_the_disagreements() -> None:
    workers = MAX_FULL + 20
    assignment = Assignment(
        num_workers=workers, files=tuple((w, w + 1) for w in range(workers - 1))
    )
    liar = workers - 1
    verdict = detect(assignment, attacked(assignment, {liar}))
    graph = draw(verdict, workers, 2)
    assert graph.drawing == "disagreements"
    assert sorted(n.worker for n in graph.nodes) == [liar - 1, liar]
    assert {e.state for e in graph.edges} == {"disagree"} and len(graph.edges) == 1


def test_a_round_recorded_before_graphs_were_stored_says_so_and_draws_nothing() -> None:
    events = [RoundEvent(4, EventKind.OUTSIDE_MAX_CLIQUE, "c4")]
    graph = agreement_graph(2, None, num_workers=7, replication=3, events=events)
    assert graph.drawing == "unrecorded" and graph.nodes == () and graph.edges == ()
    assert graph.flagged == (4,)
    assert "comparisons were not recorded" in graph.notes[0]


def test_a_stored_graph_that_cannot_be_read_is_not_drawn() -> None:
    graph = agreement_graph(2, {"version": 1, "rule": 3}, num_workers=7, replication=3, events=[])
    assert graph.drawing == "unrecorded" and graph.nodes == ()
    assert "cannot be read (rule is not a short string)" in graph.notes[0]


def test_a_worker_flagged_after_the_comparison_is_red_and_explained() -> None:
    assignment = bibd_assignment(7, 3)
    verdict = detect(assignment, attacked(assignment, set()))
    graph = draw(verdict, 7, 3, [RoundEvent(4, EventKind.OVERFLOW, "c4")])
    assert graph.flagged == (4,)
    assert {n.worker: n.state for n in graph.nodes}[4] == "flagged"
    assert graph.notes == (
        "Worker 4 agreed where compared but was flagged afterwards; the events beside say why.",
    )


def test_pairs_a_record_did_not_keep_are_drawn_as_not_recorded() -> None:
    assignment = bibd_assignment(7, 3)
    stored = stored_record(detect(assignment, attacked(assignment, {2})))
    kept = stored["conflicts"][:2]
    stored.update(conflicts=kept, num_conflicts=stored["num_conflicts"] + 3)
    graph = agreement_graph(1, stored, num_workers=7, replication=3, events=[])
    states = edge_states(graph)
    assert [states[frozenset((e["a"], e["b"]))] for e in kept] == ["disagree"] * 2
    assert set(states.values()) == {"disagree", "unknown"}
    assert any("pairs not kept are dotted" in note for note in graph.notes)
