"""Migration 0011_silent_evaluations: a client asked to evaluate that never answered is silent."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from phalanx.reports import ClientRound
from phalanx.store import client_rounds, make_engine, rounds, runs, session_factory
from phalanx.store.migrate import current_revision, downgrade, upgrade
from tests.support.store_rows import round_data

REVISION = "0011_silent_evaluations"
BEFORE = "0010_client_rounds"


def _record_silent(database_url: str) -> str:
    engine = make_engine(database_url)
    try:
        with session_factory(engine).begin() as session:
            run_id = runs.create_run(session, name="s", config={}, seed=1).id
            rounds.record_round(
                session, run_id, round_data(1), clients=[ClientRound(0, None, eval_status="silent")]
            )
        return run_id
    finally:
        engine.dispose()


def test_before_0011_the_schema_refuses_a_silent_row(database_url: str) -> None:
    upgrade(database_url, BEFORE)
    with pytest.raises(IntegrityError):
        _record_silent(database_url)


def test_0011_stores_a_silent_row_and_downgrading_clears_its_status(database_url: str) -> None:
    upgrade(database_url, REVISION)
    assert current_revision(database_url) == REVISION
    run_id = _record_silent(database_url)
    engine = make_engine(database_url)
    try:
        with session_factory(engine)() as session:
            (view,) = client_rounds.client_view(session, run_id)
        assert view.eval_status == "silent"

        downgrade(database_url, BEFORE)

        with engine.connect() as connection:
            statuses = connection.execute(text("SELECT eval_status FROM client_rounds")).all()
        assert statuses == [(None,)]
    finally:
        engine.dispose()
