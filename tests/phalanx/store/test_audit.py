"""The audit log (phalanx.store.audit): newest first, filtered, JSON details.

On a migrated SQLite and PostgreSQL database.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.orm import Session

from phalanx.store import audit
from tests.support.store_rows import T0


def test_audit_entries_are_listed_newest_first_with_filters(db_session: Session) -> None:
    audit.append_audit(
        db_session,
        actor="ops-alice",
        action="client.approve",
        target_type="client",
        target_id="c1",
        details={"from": "pending"},
        now=T0,
    )
    audit.append_audit(
        db_session,
        actor="ops-bob",
        action="run.cancel",
        target_type="run",
        target_id="r1",
        now=T0 + timedelta(seconds=1),
    )
    audit.append_audit(
        db_session,
        actor="ops-alice",
        action="event.review",
        target_type="event",
        target_id="7",
        now=T0 + timedelta(seconds=2),
    )
    db_session.commit()

    everything = audit.list_audit(db_session)
    by_alice = audit.list_audit(db_session, actor="ops-alice")
    older = audit.list_audit(db_session, before=everything[0].id, limit=1)

    assert [e.action for e in everything] == ["event.review", "run.cancel", "client.approve"]
    assert [e.action for e in by_alice] == ["event.review", "client.approve"]
    assert [e.action for e in older] == ["run.cancel"]
    assert audit.list_audit(db_session, target_type="client", target_id="c1")[0].details == {
        "from": "pending"
    }


def test_json_null_details_are_stored_as_sql_null(db_session: Session) -> None:
    audit.append_audit(db_session, actor="cli", action="db.upgrade")
    db_session.commit()

    raw = db_session.execute(text("SELECT count(*) FROM audit_log WHERE details IS NULL"))

    assert raw.scalar_one() == 1
