"""Approved clients' keys registered with a real SuperLink through Flower's CLI; bans undone."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx.flower.deployment.admission import admit_client, reconcile
from phalanx.flower.deployment.control import FlowerControl
from phalanx.flower.deployment.superlink import RunningSuperLink
from phalanx.identity import generate_private_key
from phalanx.store import ClientStatus, clients
from tests.support.deployment import add_client

pytestmark = pytest.mark.slow


def _node_ids(sessions: sessionmaker[Session]) -> dict[str, int | None]:
    with sessions() as session:
        return {c.id: c.flower_node_id for c in clients.list_clients(session)}


def test_reconcile_admits_exactly_the_approved_clients_and_unregisters_the_banned(
    sqlite_sessions: sessionmaker[Session], superlink: tuple[RunningSuperLink, FlowerControl]
) -> None:
    _, control = superlink
    first, _ = add_client(sqlite_sessions, "first")
    second, _ = add_client(sqlite_sessions, "second")
    pending, _ = add_client(sqlite_sessions, "pending", ClientStatus.PENDING)
    suspended, _ = add_client(sqlite_sessions, "suspended", ClientStatus.SUSPENDED)

    done = reconcile(sqlite_sessions, control)
    assert set(done.admitted) == {first, second} and not done.errors
    stored = _node_ids(sqlite_sessions)
    assert {c: stored[c] for c in done.admitted} == done.admitted
    assert stored[pending] is None and stored[suspended] is None
    flower = {n.node_id: n.status for n in control.supernodes()}
    assert flower == {n: "registered" for n in done.admitted.values()}

    again = reconcile(sqlite_sessions, control)
    assert (again.admitted, again.banned, again.errors) == ({}, {}, {})

    with sqlite_sessions.begin() as session:
        clients.set_client_status(session, first, ClientStatus.BANNED)
    banned = reconcile(sqlite_sessions, control)
    assert banned.banned == {first: done.admitted[first]}
    assert _node_ids(sqlite_sessions)[first] is None
    flower = {n.node_id: n.status for n in control.supernodes()}
    assert flower[done.admitted[first]] == "unregistered"
    assert flower[done.admitted[second]] == "registered"

    # Flower never registers a key twice: a reinstated banned client needs a new key.
    with sqlite_sessions.begin() as session:
        clients.set_client_status(session, first, ClientStatus.APPROVED)
    refused = reconcile(sqlite_sessions, control)
    assert refused.admitted == {} and "enroll a new key" in refused.errors[first]
    assert reconcile(sqlite_sessions, control, skip=[first]).errors == {}


def test_an_admitted_client_keeps_its_node_id_and_the_superlink_is_not_asked_again(
    sqlite_sessions: sessionmaker[Session], superlink: tuple[RunningSuperLink, FlowerControl]
) -> None:
    _, control = superlink
    client_id, _ = add_client(sqlite_sessions, "one", key=generate_private_key("P-384"))
    with sqlite_sessions.begin() as session:
        node_id = admit_client(session, client_id, control)
    with sqlite_sessions.begin() as session:
        assert admit_client(session, client_id, control) == node_id
    assert [n.node_id for n in control.supernodes()] == [node_id]
