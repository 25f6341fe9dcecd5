"""The operator key repository (phalanx.store.keys): hashed secrets, verification, revocation.

On a migrated SQLite and PostgreSQL database.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from phalanx.store import NotFoundError, Role, keys
from tests.support.store_rows import T0


def test_a_new_key_stores_only_the_hash_of_its_secret(db_session: Session) -> None:
    created = keys.create_key(db_session, name="ops-alice", role=Role.ADMIN)
    db_session.commit()

    row = db_session.execute(text("SELECT * FROM operator_keys")).mappings().one()

    assert created.secret.startswith("phx_") and len(created.secret) > 40
    assert row["key_hash"] == hashlib.sha256(created.secret.encode()).hexdigest()
    assert row["prefix"] == created.secret[:12]
    assert created.secret not in {str(value) for value in row.values()}


def test_a_key_verifies_with_its_secret_only(db_session: Session) -> None:
    created = keys.create_key(db_session, name="ops-alice", role=Role.OPERATOR)
    other = keys.create_key(db_session, name="ops-bob", role=Role.VIEWER)

    found = keys.verify_key(db_session, created.secret)

    assert found is not None and found.id == created.key.id
    assert found.role == Role.OPERATOR
    assert keys.verify_key(db_session, created.secret + "x") is None
    assert keys.verify_key(db_session, other.secret).id == other.key.id  # type: ignore[union-attr]


def test_a_revoked_key_no_longer_verifies(db_session: Session) -> None:
    created = keys.create_key(db_session, name="ops-alice", role=Role.ADMIN)

    keys.revoke_key(db_session, created.key.id, now=T0)
    keys.revoke_key(db_session, created.key.id, now=T0 + timedelta(days=1))

    assert keys.verify_key(db_session, created.secret) is None
    assert keys.get_key(db_session, created.key.id).revoked_at == T0
    assert keys.list_keys(db_session) == []
    assert [k.id for k in keys.list_keys(db_session, include_revoked=True)] == [created.key.id]


def test_revoking_an_unknown_key_raises_not_found(db_session: Session) -> None:
    with pytest.raises(NotFoundError):
        keys.revoke_key(db_session, "nope")


def test_verification_notes_last_use_at_most_once_a_minute(db_session: Session) -> None:
    created = keys.create_key(db_session, name="ops-alice", role=Role.ADMIN)

    keys.verify_key(db_session, created.secret, now=T0)
    keys.verify_key(db_session, created.secret, now=T0 + timedelta(seconds=30))
    assert created.key.last_used_at == T0

    keys.verify_key(db_session, created.secret, now=T0 + timedelta(minutes=2))
    assert created.key.last_used_at == T0 + timedelta(minutes=2)
