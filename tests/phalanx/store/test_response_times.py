"""Workers' response times in the store: written with their round, summarised per run and client.

On a migrated SQLite and PostgreSQL database.
"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import DataError, IntegrityError
from sqlalchemy.orm import Session

from phalanx.response_times import WorkerResponse, median, summarize
from phalanx.store import (
    DetectionEvent,
    NotFoundError,
    Round,
    WorkerResponseRow,
    response_times,
    rounds,
    runs,
)
from tests.support.store_rows import T0, new_client, new_run, round_data


def straggling(t: int, clients: dict[int, str] | None = None) -> list[WorkerResponse]:
    """Round ``t``: workers 0..3 answer in time, worker 4 late after 40 s, worker 5 never."""
    clients = clients or {}
    times = {0: 1.0, 1: 1.5, 2: 2.0, 3: 2.5, 4: 40.0 + t}
    responses = [
        WorkerResponse(w, s, "late" if w == 4 else "kept", clients.get(w)) for w, s in times.items()
    ]
    return [*responses, WorkerResponse(5, None, "missing", clients.get(5))]


def record(session: Session, run_id: str, rounds_: range, **clients: str) -> None:
    by_worker = {int(k.removeprefix("w")): v for k, v in clients.items()}
    for t in rounds_:
        rounds.record_round(
            session, run_id, round_data(t, num_flagged=0), responses=straggling(t, by_worker)
        )
    session.commit()


def test_a_round_is_written_with_its_responses_and_summarised_per_worker(
    db_session: Session,
) -> None:
    run = new_run(db_session)
    client = new_client(db_session, "straggler")
    record(db_session, run.id, range(1, 6), w4=client)

    got = response_times.run_response_times(db_session, run.id)

    expected = summarize((t, r) for t in range(1, 6) for r in straggling(t, {4: client}))
    assert got == expected
    assert got.median_s == 2.0
    slow = {w.worker: w for w in got.slow}
    assert sorted(slow) == [4, 5]
    assert (slow[4].client_id, slow[4].late, slow[4].p90_s) == (client, 5, 45.0)
    assert slow[5].missing == 5 and slow[5].mean_s is None
    # Slow is not lying: nothing of it is a detection event.
    assert db_session.scalar(select(func.count()).select_from(DetectionEvent)) == 0


def test_a_run_without_timed_rounds_has_no_responses_and_an_unknown_run_is_not_found(
    db_session: Session,
) -> None:
    run = new_run(db_session)
    rounds.record_round(db_session, run.id, round_data(1))
    db_session.commit()

    assert response_times.run_response_times(db_session, run.id).workers == ()
    with pytest.raises(NotFoundError):
        response_times.run_response_times(db_session, "no-such-run")


def test_a_round_whose_responses_fail_leaves_neither_round_nor_responses(
    db_session: Session,
) -> None:
    run = new_run(db_session)
    twice = [WorkerResponse(0, 1.0, "kept"), WorkerResponse(0, 2.0, "late")]

    with pytest.raises(IntegrityError):
        rounds.record_round(db_session, run.id, round_data(1), responses=twice)

    assert db_session.scalar(select(func.count()).select_from(Round)) == 0
    assert db_session.scalar(select(func.count()).select_from(WorkerResponseRow)) == 0
    assert runs.get_run(db_session, run.id).current_round is None


@pytest.mark.parametrize(
    ("seconds", "status"),
    [
        (math.nan, "kept"),
        (math.inf, "late"),
        (-math.inf, "late"),
        (-1.0, "kept"),
        (None, "kept"),
        (2.0, "missing"),
        (2.0, "slow"),
        ("fast", "kept"),
    ],
)
def test_the_database_refuses_a_time_no_clock_gives(
    db_session: Session, seconds: object, status: str
) -> None:
    run = new_run(db_session)
    db_session.commit()

    with pytest.raises((IntegrityError, DataError)):
        db_session.execute(
            text(
                "INSERT INTO worker_responses (run_id, round, worker, seconds, status) "
                "VALUES (:run, 1, 0, :seconds, :status)"
            ),
            {"run": run.id, "seconds": seconds, "status": status},
        )
    db_session.rollback()
    assert db_session.scalar(select(func.count()).select_from(WorkerResponseRow)) == 0


def test_run_medians_match_the_median_of_every_time_in_one_query(db_session: Session) -> None:
    odd, even, silent = (new_run(db_session, name=n) for n in ("odd", "even", "silent"))
    rounds.record_round(db_session, odd.id, round_data(1), responses=straggling(1))
    rounds.record_round(
        db_session,
        even.id,
        round_data(1),
        responses=[WorkerResponse(w, s, "kept") for w, s in enumerate([4.0, 1.0, 3.0, 0.5])],
    )
    rounds.record_round(
        db_session, silent.id, round_data(1), responses=[WorkerResponse(0, None, "missing")]
    )
    db_session.commit()

    got = response_times.run_medians(db_session, [odd.id, even.id, silent.id, "unknown"])

    assert got == {odd.id: median([1.0, 1.5, 2.0, 2.5, 41.0]), even.id: median([4, 1, 3, 0.5])}
    assert got[even.id] == 2.0
    assert response_times.run_medians(db_session, []) == {}


def test_each_client_shows_its_latest_run_and_whether_it_was_slow_there(
    db_session: Session,
) -> None:
    earlier = new_run(db_session, name="earlier", created_at=T0)
    later = new_run(db_session, name="later", created_at=T0 + timedelta(hours=1))
    steady, straggler, idle = (new_client(db_session, n) for n in ("steady", "straggler", "idle"))
    # In the earlier run the straggler was steady worker 0; in the later one it is worker 4.
    record(db_session, earlier.id, range(1, 6), w0=straggler, w1=steady)
    record(db_session, later.id, range(1, 4), w4=straggler)

    got = response_times.latest_by_client(db_session, [steady, straggler, idle, "nobody"])

    assert sorted(got) == sorted([steady, straggler])
    assert (got[steady].run_name, got[steady].summary.slow) == ("earlier", False)
    mine = got[straggler]
    assert (mine.run_id, mine.run_name, mine.summary.worker) == (later.id, "later", 4)
    assert (mine.summary.rounds, mine.summary.late, mine.summary.slow) == (3, 3, True)
    assert mine.run_median_s == response_times.run_medians(db_session, [later.id])[later.id]
    assert mine.summary == response_times.run_response_times(db_session, later.id).workers[4]
    assert response_times.latest_by_client(db_session, []) == {}


def test_deleting_a_client_keeps_its_responses_without_it(db_session: Session) -> None:
    run = new_run(db_session)
    client = new_client(db_session, "leaving")
    record(db_session, run.id, range(1, 2), w4=client)

    db_session.execute(text("DELETE FROM clients WHERE id = :id"), {"id": client})
    db_session.commit()

    (row,) = db_session.scalars(select(WorkerResponseRow).where(WorkerResponseRow.worker == 4))
    assert row.client_id is None and row.seconds == 41.0
