"""The checkpoint repository (phalanx.store.checkpoints): the point a run resumes from.

On a migrated SQLite and PostgreSQL database.
"""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import ConflictError, checkpoints, rounds, runs
from tests.support.store_rows import new_run, round_data


def test_round_and_checkpoint_in_one_transaction_give_the_resume_point(
    db_session_factory: sessionmaker[Session],
) -> None:
    with db_session_factory.begin() as session:
        run_id = new_run(session).id
    for number in (1, 2):
        with db_session_factory.begin() as session:
            rounds.record_round(session, run_id, round_data(number))
            checkpoints.save_checkpoint(
                session, run_id, number, path=f"/ckpt/{number}.pt", digest=f"digest-{number}"
            )

    with db_session_factory() as session:
        latest = checkpoints.latest_checkpoint(session, run_id)
        run = runs.get_run(session, run_id)

    assert latest is not None
    assert (latest.round, latest.path, latest.digest) == (2, "/ckpt/2.pt", "digest-2")
    assert run.current_round == latest.round


def test_a_run_without_checkpoints_has_no_latest(db_session: Session) -> None:
    run = new_run(db_session)

    assert checkpoints.latest_checkpoint(db_session, run.id) is None


def test_saving_a_checkpoint_twice_is_a_conflict(db_session: Session) -> None:
    run = new_run(db_session)
    checkpoints.save_checkpoint(db_session, run.id, 0, path="/ckpt/0.pt", digest="d0")

    with pytest.raises(ConflictError, match="round 0"):
        checkpoints.save_checkpoint(db_session, run.id, 0, path="/other.pt", digest="d1")


def test_a_checkpoint_of_an_unknown_run_is_a_conflict(db_session: Session) -> None:
    with pytest.raises(ConflictError, match="the run does not"):
        checkpoints.save_checkpoint(db_session, "nope", 1, path="/ckpt/1.pt", digest="d1")
