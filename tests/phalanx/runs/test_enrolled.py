"""The workers of a deployed run come from the approved clients in the database."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx.roster import wait_for_roster
from phalanx.runs.enrolled import EnrolledRoster, enrolled_clients
from phalanx.store import ClientStatus, clients
from tests.support.deployment import add_client

MAX_NODE_ID = 2**64 - 1


def test_enrolled_clients_are_the_approved_ones_with_a_node_id(
    sqlite_sessions: sessionmaker[Session],
) -> None:
    approved, _ = add_client(sqlite_sessions, "approved", node_id=MAX_NODE_ID)
    add_client(sqlite_sessions, "approved-not-admitted")
    add_client(sqlite_sessions, "pending", ClientStatus.PENDING, node_id=11)
    add_client(sqlite_sessions, "suspended", ClientStatus.SUSPENDED, node_id=12)
    with sqlite_sessions() as session:
        found = enrolled_clients(session)
    assert [(e.client_id, e.node_id) for e in found] == [(approved, MAX_NODE_ID)]


def test_seated_clients_are_marked_seen_and_the_others_are_not(
    sqlite_sessions: sessionmaker[Session],
) -> None:
    first, _ = add_client(sqlite_sessions, "first", node_id=3)
    second, _ = add_client(sqlite_sessions, "second", node_id=5)
    spare, _ = add_client(sqlite_sessions, "spare", node_id=9)
    roster = EnrolledRoster(sqlite_sessions).seat({3, 5, 9}, 2)
    assert roster is not None and roster.binds_nodes
    assert [s.client_id for s in roster.seats] == [first, second]
    with sqlite_sessions() as session:
        seen = {c.id for c in clients.list_clients(session) if c.last_seen_at is not None}
    assert seen == {first, second} and spare not in seen


def test_a_client_approved_while_the_run_waits_counts(
    sqlite_sessions: sessionmaker[Session],
) -> None:
    add_client(sqlite_sessions, "approved", node_id=1)
    late, _ = add_client(sqlite_sessions, "late", ClientStatus.PENDING, node_id=2)
    polls: list[int] = []

    def online() -> set[int]:
        polls.append(1)
        if len(polls) == 2:
            with sqlite_sessions.begin() as session:
                clients.set_client_status(session, late, ClientStatus.APPROVED)
        return {1, 2}

    roster = wait_for_roster(online, EnrolledRoster(sqlite_sessions), 2, timeout=30, interval=0)
    assert roster.node_of_worker == {0: 1, 1: 2} and len(polls) == 2


def test_waiting_in_vain_says_how_many_approved_clients_were_online(
    sqlite_sessions: sessionmaker[Session],
) -> None:
    add_client(sqlite_sessions, "online", node_id=1)
    add_client(sqlite_sessions, "offline", node_id=2)
    with pytest.raises(TimeoutError, match=r"only 1 of 2 approved clients were online \(2 Super"):
        wait_for_roster(lambda: {1, 99}, EnrolledRoster(sqlite_sessions), 2, timeout=0, interval=0)
