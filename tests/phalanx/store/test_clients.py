"""The client repository (phalanx.store.clients): node ids, fingerprints, status, challenges.

On a migrated SQLite and PostgreSQL database.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session

from phalanx.store import ClientStatus, ConflictError, clients
from phalanx.store.types import UINT64_MAX
from tests.support.store_rows import T0, new_client


def test_the_largest_flower_node_id_survives_a_round_trip(db_session: Session) -> None:
    client_id = new_client(db_session, "edge-1", flower_node_id=UINT64_MAX)
    db_session.commit()
    db_session.expire_all()

    stored = clients.get_client(db_session, client_id)
    raw = db_session.execute(
        text("SELECT flower_node_id FROM clients WHERE id = :id"), {"id": client_id}
    ).scalar_one()
    found = clients.find_client_by_node_id(db_session, 2**64 - 1)

    assert stored.flower_node_id == 2**64 - 1
    assert raw == "18446744073709551615"
    assert found is not None and found.id == client_id


def test_a_node_id_outside_64_bits_is_refused(db_session: Session) -> None:
    with pytest.raises(StatementError, match="unsigned 64-bit"):
        new_client(db_session, "edge-1", flower_node_id=2**64)


def test_registering_a_fingerprint_twice_is_a_conflict(db_session: Session) -> None:
    new_client(db_session, "edge-1")
    db_session.commit()

    with pytest.raises(ConflictError, match="registered already"):
        new_client(db_session, "edge-1")


def test_a_client_is_found_by_its_fingerprint(db_session: Session) -> None:
    client_id = new_client(db_session, "edge-1")
    fingerprint = hashlib.sha256(b"edge-1").hexdigest()

    found = clients.find_client_by_fingerprint(db_session, fingerprint)

    assert found is not None and found.id == client_id
    assert clients.find_client_by_fingerprint(db_session, "0" * 64) is None


def test_approval_sets_approved_at_and_suspension_clears_it(db_session: Session) -> None:
    client_id = new_client(db_session, "edge-1")

    approved = clients.set_client_status(db_session, client_id, ClientStatus.APPROVED, now=T0)
    assert (approved.status, approved.approved_at) == (ClientStatus.APPROVED, T0)

    suspended = clients.set_client_status(db_session, client_id, ClientStatus.SUSPENDED)
    assert (suspended.status, suspended.approved_at) == (ClientStatus.SUSPENDED, None)


def test_clients_are_listed_by_status(db_session: Session) -> None:
    pending = new_client(db_session, "edge-1")
    approved = new_client(db_session, "sim-worker-0", status=ClientStatus.APPROVED)

    assert [c.id for c in clients.list_clients(db_session)] == [pending, approved]
    assert [c.id for c in clients.list_clients(db_session, status=ClientStatus.APPROVED)] == [
        approved
    ]


def test_touching_a_client_records_when_and_under_which_node_it_was_seen(
    db_session: Session,
) -> None:
    client_id = new_client(db_session, "edge-1")

    seen = clients.touch_client(db_session, client_id, flower_node_id=12345, now=T0)

    assert (seen.last_seen_at, seen.flower_node_id) == (T0, 12345)


def test_a_challenge_lives_until_the_client_is_proven(db_session: Session) -> None:
    client_id = new_client(db_session, "edge-1")
    clients.set_challenge(
        db_session, client_id, "Y2hhbGxlbmdl", expires_at=T0 + timedelta(minutes=5)
    )

    first = clients.live_challenge(db_session, client_id, now=T0)
    second = clients.live_challenge(db_session, client_id, now=T0)
    clients.mark_proven(db_session, client_id, now=T0)

    assert (first, second) == ("Y2hhbGxlbmdl", "Y2hhbGxlbmdl")
    assert clients.live_challenge(db_session, client_id, now=T0) is None


def test_an_expired_challenge_is_not_handed_out(db_session: Session) -> None:
    client_id = new_client(db_session, "edge-1")
    clients.set_challenge(db_session, client_id, "Y2hhbGxlbmdl", expires_at=T0)

    assert clients.live_challenge(db_session, client_id, now=T0 + timedelta(seconds=1)) is None
