"""The round repository (phalanx.store.rounds): a round and its events, recorded at once.

On a migrated SQLite and PostgreSQL database.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from phalanx.response_times import LateResponse, WorkerResponse
from phalanx.store import (
    ConflictError,
    EventKind,
    NotFoundError,
    ReviewStatus,
    Severity,
    clients,
    events,
    rounds,
    runs,
)
from phalanx.store.events import EventFilter
from phalanx.store.models import WorkerResponseRow
from phalanx.store.rounds import EventData
from tests.support.store_rows import new_client, new_run, round_data


def test_record_round_writes_the_round_its_events_and_the_current_round(
    db_session: Session,
) -> None:
    run = new_run(db_session)
    client_id = new_client(db_session, "sim-worker-3")
    found = [
        EventData(
            kind=EventKind.OUTSIDE_MAX_CLIQUE,
            severity=Severity.HIGH,
            worker=3,
            client_id=client_id,
            evidence={"clique": [0, 1, 2], "files": [4, 7]},
        ),
        EventData(kind="custom_detector", severity=Severity.LOW, worker=5),
    ]

    rounds.record_round(db_session, run.id, round_data(1), found)
    db_session.commit()
    db_session.expire_all()

    stored = rounds.get_round(db_session, run.id, 1)
    assert stored.metrics == {"accuracy": 0.51, "loss": 1.0}
    assert (stored.bytes_up, stored.bytes_down, stored.duration_s) == (10_000, 40_000, 30.0)
    assert stored.assignment == {"scheme": "subsets", "r": 3}
    assert runs.get_run(db_session, run.id).current_round == 1
    page = events.list_events(db_session, EventFilter(run_id=run.id))
    assert [(e.kind, e.worker, e.client_id, e.round) for e in page.items] == [
        ("custom_detector", 5, None, 1),
        ("outside_max_clique", 3, client_id, 1),
    ]
    assert page.items[1].evidence == {"clique": [0, 1, 2], "files": [4, 7]}
    assert all(e.review_status == ReviewStatus.OPEN for e in page.items)


def test_byte_counts_beyond_32_bits_are_kept(db_session: Session) -> None:
    run = new_run(db_session)

    rounds.record_round(db_session, run.id, round_data(1, bytes_up=2**40, bytes_down=2**41))
    db_session.commit()
    db_session.expire_all()

    stored = rounds.get_round(db_session, run.id, 1)
    assert (stored.bytes_up, stored.bytes_down) == (2**40, 2**41)


def test_a_round_keeps_its_agreement_graph_and_older_rounds_have_none(
    db_session: Session,
) -> None:
    run = new_run(db_session)
    graph = {"version": 1, "rule": "unique_clique", "replied": [[0, 6]], "conflicts": []}
    rounds.record_round(db_session, run.id, round_data(1))
    rounds.record_round(db_session, run.id, round_data(2, agreement=graph))
    db_session.commit()
    db_session.expire_all()

    assert rounds.get_agreement(db_session, run.id, 2) == graph
    assert rounds.get_agreement(db_session, run.id, 1) is None
    with pytest.raises(NotFoundError):
        rounds.get_agreement(db_session, run.id, 3)
    # Listing rounds leaves the graph unloaded until a round's is asked for.
    listed = rounds.list_rounds(db_session, run.id)
    assert all("agreement" not in row.__dict__ for row in listed)
    assert listed[1].agreement == graph


def test_a_failing_event_insert_rolls_back_the_round(db_session: Session) -> None:
    run = new_run(db_session)
    rounds.record_round(db_session, run.id, round_data(1))
    db_session.commit()
    broken = [
        EventData(kind=EventKind.OUTLIER, severity=Severity.LOW, worker=1),
        EventData(kind=EventKind.BAD_SIGNATURE, severity=Severity.HIGH, client_id="no-such-client"),
    ]

    with pytest.raises(IntegrityError):
        rounds.record_round(db_session, run.id, round_data(2), broken)
    db_session.commit()  # the caller's transaction survives the failed round
    db_session.expire_all()

    assert [r.number for r in rounds.list_rounds(db_session, run.id)] == [1]
    assert runs.get_run(db_session, run.id).current_round == 1
    assert events.count_events(db_session, EventFilter(run_id=run.id)) == 0


def test_recording_a_round_again_is_a_conflict(db_session: Session) -> None:
    run = new_run(db_session)
    rounds.record_round(db_session, run.id, round_data(1))
    rounds.record_round(db_session, run.id, round_data(2))

    with pytest.raises(ConflictError, match="already recorded round 2"):
        rounds.record_round(db_session, run.id, round_data(2))


def test_recording_a_round_of_an_unknown_run_raises_not_found(db_session: Session) -> None:
    with pytest.raises(NotFoundError):
        rounds.record_round(db_session, "nope", round_data(1))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("number", 0, "start at 1"), ("bytes_up", -1, "bytes_up"), ("num_flagged", -2, "flagged")],
)
def test_round_data_refuses_impossible_values(field: str, value: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        round_data(1, **{field: value})


def test_event_data_refuses_a_kind_longer_than_the_column() -> None:
    with pytest.raises(ValueError, match="1 to 64"):
        EventData(kind="k" * 65, severity=Severity.LOW)


def test_a_late_reply_turns_its_rounds_response_late_with_the_latest_time_and_nothing_else(
    db_session: Session,
) -> None:
    other = new_run(db_session)
    rounds.record_round(
        db_session, other.id, round_data(1), responses=[WorkerResponse(1, None, "missing")]
    )
    run = new_run(db_session)
    first = [
        WorkerResponse(0, 1.0, "kept"),
        WorkerResponse(1, None, "missing"),
        WorkerResponse(2, None, "missing"),
    ]
    rounds.record_round(db_session, run.id, round_data(1), responses=first)
    rounds.record_round(
        db_session,
        run.id,
        round_data(2),
        responses=[WorkerResponse(w, None, "missing") for w in range(3)],
        late_responses=[
            LateResponse(1, 1, 41.5),
            LateResponse(1, 1, 9.0),  # an earlier one for the same response: the latest counts
            # Its first file came by the close, this one (one message per file) after it.
            LateResponse(1, 0, 7.0),
            LateResponse(1, 0, 0.5),  # earlier than its kept time: nothing to change
            # This round's own, heard while it sent the model again after its close.
            LateResponse(2, 2, 3.0),
            LateResponse(1, 9, 5.0),  # a worker the round did not time
            LateResponse(3, 1, 5.0),  # a later round: not recorded yet, nothing to change
            LateResponse(0, 1, 5.0),  # a round that does not exist
        ],
    )
    db_session.commit()

    stored = db_session.execute(
        select(
            WorkerResponseRow.run_id,
            WorkerResponseRow.round,
            WorkerResponseRow.worker,
            WorkerResponseRow.seconds,
            WorkerResponseRow.status,
        ).order_by(WorkerResponseRow.round, WorkerResponseRow.worker)
    ).all()
    assert [tuple(row[1:]) for row in stored if row[0] == run.id] == [
        (1, 0, 7.0, "late"),
        (1, 1, 41.5, "late"),
        (1, 2, None, "missing"),
        (2, 0, None, "missing"),
        (2, 1, None, "missing"),
        (2, 2, 3.0, "late"),
    ]
    # Another run's round 1, with the same worker missing, is not touched.
    assert [tuple(row[1:]) for row in stored if row[0] == other.id] == [(1, 1, None, "missing")]


def test_a_round_marks_the_clients_it_heard_from_as_seen_at_its_end(db_session: Session) -> None:
    run = new_run(db_session)
    heard, silent = new_client(db_session, "heard"), new_client(db_session, "silent")
    later = new_client(db_session, "seen-later-elsewhere")
    first, second = round_data(1), round_data(2)
    future = second.finished_at.replace(year=second.finished_at.year + 1)
    clients.touch_client(db_session, later, now=future)

    rounds.record_round(db_session, run.id, first, seen_clients=[heard, later])
    rounds.record_round(db_session, run.id, second, seen_clients=[heard, heard])

    def seen(client_id: str) -> object:
        db_session.expire_all()
        return clients.get_client(db_session, client_id).last_seen_at

    assert seen(heard) == second.finished_at
    assert seen(silent) is None
    assert seen(later) == future  # never moved back
