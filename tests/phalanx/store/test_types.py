"""The store's column types (phalanx.store.types): timestamps are aware and in UTC.

On a migrated SQLite and PostgreSQL database.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session

from phalanx.store import runs


def test_timestamps_come_back_aware_in_utc(db_session: Session) -> None:
    plus_two = timezone(timedelta(hours=2))
    run = runs.create_run(
        db_session, name="r", config={}, seed=1, now=datetime(2026, 1, 1, 14, 0, tzinfo=plus_two)
    )
    db_session.commit()
    db_session.expire_all()

    created = runs.get_run(db_session, run.id).created_at

    assert created == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert created.utcoffset() == timedelta(0)


def test_a_naive_timestamp_is_refused(db_session: Session) -> None:
    with pytest.raises(StatementError, match="naive datetime"):
        runs.create_run(db_session, name="r", config={}, seed=1, now=datetime(2026, 1, 1))
