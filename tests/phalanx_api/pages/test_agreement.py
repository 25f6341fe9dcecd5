"""What the dashboard draws, from real detection output: graph, explanations, charts.

The graphs and the evidence come from :func:`phalanx.detection.detect` on real
replicas, stored the way the coordinator stores them
(``AgreementRecord.to_dict``, ``Evidence.to_dict``, through JSON), so these tests
break if the stored shapes and the dashboard's reading of them drift apart.
"""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import pytest
import torch
from torch import Tensor

from phalanx.agreement_record import AgreementRecord
from phalanx.assignment import Assignment, bibd_assignment
from phalanx.detection import Replica, Verdict, detect, payload_digest
from phalanx.event_kinds import EventKind
from phalanx_api.pages import charts
from phalanx_api.pages.agreement import MAX_FULL, AgreementGraph, RoundEvent, agreement_graph
from phalanx_api.pages.evidence import KIND_HEADLINES, explain, headline, is_rejection
from phalanx_api.pages.formatting import ago, duration, human_bytes, percent

DIM = 16


def honest_value(file: int) -> Tensor:
    return torch.randn(DIM, generator=torch.Generator().manual_seed(1000 + file))


def replica(worker: int, file: int, value: Tensor) -> Replica:
    value = value.to(torch.float32)
    return Replica(worker, file, value, payload_digest(value.numpy().tobytes()))


def attacked(assignment: Assignment, liars: set[int], *, collude: bool = True) -> list[Replica]:
    return [
        replica(w, f, -honest_value(f) + (0 if collude else w) if w in liars else honest_value(f))
        for f, workers in enumerate(assignment.files)
        for w in workers
    ]


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


# ---------------------------------------------------------------- agreement graph


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


# ------------------------------------------------------------------- evidence


def test_a_flag_is_explained_file_by_file() -> None:
    assignment = bibd_assignment(7, 3)
    verdict = detect(assignment, attacked(assignment, {4}))
    stored = verdict.evidence[4].to_dict()
    words = explain(EventKind.OUTSIDE_MAX_CLIQUE, 4, stored)

    assert words.summary == stored["summary"]
    assert words.headline == "Disagreed with the largest group of agreeing workers"
    assert not words.is_rejection and words.advice
    assert dict(words.facts)["Disagreed with"] == "workers 0, 1, 2, 3, 5 and 6"
    assert len(words.files) == 3  # worker 4 computes three files in STS(7)
    for record in words.files:
        subject = next(r for r in record.replicas if r.is_subject)
        assert subject.worker == 4 and subject.group == 2  # the flagged worker's value
        used = [r for r in record.replicas if r.accepted]
        assert len(used) == 1 and used[0].group == 1  # the value the model used
        others = [r for r in record.replicas if not r.is_subject]
        assert all(r.agrees_with_subject is False and r.distance for r in others)
        assert record.sentence.startswith(f"File {record.file}: worker 4's update differed")
        assert f"taken from worker {used[0].worker} instead" in record.sentence


def test_colluders_are_said_to_send_the_same_update() -> None:
    assignment = bibd_assignment(7, 3)
    verdict = detect(assignment, attacked(assignment, {2, 5}))
    words = explain(EventKind.OUTSIDE_MAX_CLIQUE, 2, verdict.evidence[2].to_dict())
    shared = [f for f in words.files if {r.worker for r in f.replicas} >= {2, 5}]
    assert len(shared) == 1
    assert "worker 2 sent the same update as worker 5" in shared[0].sentence
    assert {r.group for r in shared[0].replicas if r.worker in (2, 5)} == {2}


def test_a_refused_reply_is_explained_by_its_reason() -> None:
    words = explain(EventKind.BAD_SIGNATURE, 3, {"reason": "signature does not verify", "round": 2})
    assert words.is_rejection and words.files == ()
    assert words.summary == "The coordinator refused worker 3's reply: signature does not verify."
    assert headline(EventKind.BAD_SIGNATURE) == "Reply signature did not verify"
    assert is_rejection(EventKind.STALE_ROUND) and not is_rejection(EventKind.OUTLIER)
    assert headline("brand_new_kind") == "Brand new kind"


def test_every_kind_the_coordinator_writes_has_a_headline() -> None:
    assert set(KIND_HEADLINES) == set(EventKind)
    assert all(isinstance(kind, EventKind) for kind in KIND_HEADLINES)


# --------------------------------------------------------------------- charts


def test_a_line_chart_places_rounds_left_to_right_and_values_bottom_to_top() -> None:
    chart = charts.line_chart(
        "accuracy", "Accuracy", [1, 2, 3], [("acc", "A", [0.2, None, 0.8])], fmt=percent, floor=0.0
    )
    (series,) = chart.series
    assert [p.round for p in series.points] == [1, 3]  # a missing value is skipped
    first, last = series.points
    assert chart.left == first.x < last.x == chart.right
    assert first.y > last.y  # higher values are drawn higher
    assert chart.top <= last.y and first.y <= chart.bottom
    assert chart.y_ticks[0].label == "0.0%"
    assert [t.label for t in chart.x_ticks] == ["1", "2", "3"]


def test_an_empty_chart_says_so() -> None:
    chart = charts.line_chart("loss", "Loss", [], [("loss", "Loss", [])], fmt=str)
    assert chart.empty and chart.num_points == 0
    with pytest.raises(ValueError, match="2 values for 3 rounds"):
        charts.line_chart("x", "X", [1, 2, 3], [("x", "X", [1.0, 2.0])], fmt=str)


@pytest.mark.parametrize(("span", "step"), [(1.0, 0.2), (4.27e6, 1e6), (7.0, 2.0), (0.03, 0.01)])
def test_ticks_fall_on_round_numbers(span: float, step: float) -> None:
    assert charts.nice_step(span) == pytest.approx(step)


def test_the_flag_matrix_has_a_row_per_flagged_worker_and_a_mark_per_round() -> None:
    marks = [
        (1, 4, EventKind.OUTSIDE_MAX_CLIQUE),
        (2, 4, EventKind.OUTSIDE_MAX_CLIQUE),
        (2, 6, EventKind.BAD_SIGNATURE),
    ]
    matrix = charts.flag_matrix([1, 2, 3], marks, rejections=frozenset({EventKind.BAD_SIGNATURE}))
    assert [(r.worker, r.count) for r in matrix.rows] == [(4, 2), (6, 1)]
    assert [(c.round, c.worker, c.rejected) for c in matrix.cells] == [
        (1, 4, False),
        (2, 4, False),
        (2, 6, True),
    ]
    few = charts.flag_matrix([1, 2, 3], marks, rejections=frozenset(), max_rows=1)
    assert [r.worker for r in few.rows] == [4] and few.hidden == 1


# ----------------------------------------------------------------- formatting


def test_numbers_are_written_for_people() -> None:
    assert human_bytes(4_271_226) == "4.27 MB" and human_bytes(512) == "512 B"
    assert percent(0.64345) == "64.3%" and percent(None) == "–"
    assert duration(42.1) == "42.1 s" and duration(185) == "3 min 5 s"
    assert ago(None) == "never"
