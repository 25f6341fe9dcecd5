"""Each client's latest figures of a local-data run as stored (SQLite and PostgreSQL)."""

from __future__ import annotations

import math

import pytest
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from phalanx.reports import ClientRound
from phalanx.store import NotFoundError, client_rounds, rounds
from tests.support.local_runs import ATTACKER, UNUSUAL, seed_local_run
from tests.support.store_rows import new_run, round_data


def test_each_client_shows_its_part_latest_distance_latest_evaluation_and_flags(
    db_session_factory: sessionmaker[Session],
) -> None:
    seeded = seed_local_run(db_session_factory)

    with db_session_factory() as session:
        view = client_rounds.client_view(session, seeded.run_id)

    assert [v.worker for v in view] == [0, 1, 2]
    honest, unusual, attacker = view
    assert (honest.part, honest.samples, honest.client_id) == (90, 72, seeded.clients[0])
    assert (honest.distance_round, honest.distance_ratio) == (3, 1.0)
    # Round 3 ran the latest federated evaluation (round 2 ran none).
    assert (honest.eval_round, honest.eval_status, honest.eval_accuracy) == (3, "counted", 0.73)
    assert (unusual.worker, unusual.distance_ratio, unusual.flags) == (UNUSUAL, 2.8, 0)
    assert (attacker.worker, attacker.distance_ratio, attacker.flags) == (ATTACKER, 15.0, 2)
    assert (attacker.eval_status, attacker.eval_accuracy, attacker.eval_samples) == (
        "refused",
        None,
        None,
    )


def test_a_run_without_rows_lists_its_partitions_clients_or_nobody(
    db_session: Session,
) -> None:
    run = new_run(db_session)
    db_session.commit()
    assert client_rounds.client_view(db_session, run.id) == []
    with pytest.raises(NotFoundError):
        client_rounds.client_view(db_session, "no-such-run")


@pytest.mark.parametrize(
    "bad",
    [
        {"eval_accuracy": 7.0, "eval_status": "counted"},
        {"eval_accuracy": -0.5, "eval_status": "counted"},
        {"distance": -1.0},
        {"eval_loss": -1.0, "eval_status": "counted"},
        {"eval_status": "made-up"},
        {"distance": math.inf},
        {"distance_ratio": math.inf},
    ],
)
def test_the_table_refuses_numbers_the_coordinator_never_writes(
    db_session: Session, bad: dict[str, object]
) -> None:
    run = new_run(db_session)
    row = ClientRound(worker=0, client_id=None, **bad)  # type: ignore[arg-type]
    with pytest.raises(IntegrityError):
        rounds.record_round(db_session, run.id, round_data(1), clients=[row])
        db_session.flush()
