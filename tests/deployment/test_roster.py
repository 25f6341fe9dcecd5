"""Workers of a deployed run: approved clients, online, ordered by node id."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.orm import Session, sessionmaker

from phalanx.flower.deployment.roster import (
    Enrolled,
    assign_workers,
    enrolled_clients,
    wait_for_roster,
)
from phalanx.identity import generate_private_key
from phalanx.store import ClientStatus
from tests.deployment.conftest import add_client

MAX_NODE_ID = 2**64 - 1
_KEY = generate_private_key().public_key()


def _enrolled(*node_ids: int) -> list[Enrolled]:
    return [Enrolled(f"client-{n}", _KEY, n) for n in node_ids]


def test_worker_i_is_the_online_client_with_the_ith_smallest_node_id() -> None:
    roster = assign_workers(_enrolled(MAX_NODE_ID, 7, 2**63 + 1), {7, 2**63 + 1, MAX_NODE_ID}, 3)
    assert roster is not None
    assert roster.node_of_worker == {0: 7, 1: 2**63 + 1, 2: MAX_NODE_ID}
    assert [m.client_id for m in roster.members.values()] == [
        "client-7",
        f"client-{2**63 + 1}",
        f"client-{MAX_NODE_ID}",
    ]


def test_an_online_node_of_no_approved_client_never_gets_work() -> None:
    roster = assign_workers(_enrolled(5, 9), {1, 5, 9}, 2)
    assert roster is not None
    assert set(roster.node_of_worker.values()) == {5, 9}


def test_too_few_approved_clients_online_means_no_roster_yet() -> None:
    assert assign_workers(_enrolled(5, 9, 11), {5, 11, 40}, 3) is None


def test_two_clients_on_one_node_are_refused() -> None:
    clash = [Enrolled("a", _KEY, 4), Enrolled("b", _KEY, 4)]
    with pytest.raises(ValueError, match="both claim Flower node 4"):
        assign_workers(clash, {4}, 1)


@given(
    st.sets(st.integers(0, MAX_NODE_ID), max_size=12),
    st.sets(st.integers(0, MAX_NODE_ID), max_size=12),
    st.integers(1, 6),
)
def test_a_roster_only_ever_holds_enrolled_online_nodes(
    enrolled: set[int], online: set[int], n: int
) -> None:
    roster = assign_workers(_enrolled(*enrolled), online, n)
    if len(enrolled & online) < n:
        assert roster is None
    else:
        assert roster is not None
        nodes = list(roster.node_of_worker.values())
        assert nodes == sorted(enrolled & online)[:n]


def test_enrolled_clients_are_the_approved_ones_with_a_node_id(
    sessions: sessionmaker[Session],
) -> None:
    approved, _ = add_client(sessions, "approved", node_id=MAX_NODE_ID)
    add_client(sessions, "approved-not-admitted")
    add_client(sessions, "pending", ClientStatus.PENDING, node_id=11)
    add_client(sessions, "suspended", ClientStatus.SUSPENDED, node_id=12)
    with sessions() as session:
        found = enrolled_clients(session)
    assert [(e.client_id, e.node_id) for e in found] == [(approved, MAX_NODE_ID)]


def test_waiting_rereads_approvals_until_enough_clients_are_online() -> None:
    polls: list[int] = []

    def enrolled() -> list[Enrolled]:
        polls.append(1)
        return _enrolled(1, 2) if len(polls) < 3 else _enrolled(1, 2, 3)

    roster = wait_for_roster(lambda: {1, 2, 3}, enrolled, 3, timeout=30, interval=0)
    assert len(polls) == 3
    assert roster.node_of_worker == {0: 1, 1: 2, 2: 3}


def test_waiting_in_vain_says_how_many_approved_clients_were_online() -> None:
    with pytest.raises(TimeoutError, match=r"only 1 of 2 approved clients were online"):
        wait_for_roster(lambda: {1, 99}, lambda: _enrolled(1, 2), 2, timeout=0, interval=0)
