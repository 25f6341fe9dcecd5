"""Who the workers are: simulated identities or enrolled clients, seated on online nodes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.identity import generate_private_key
from phalanx.roster import (
    Roster,
    Seat,
    SimulatedRoster,
    seat_enrolled,
    simulated_identity,
    wait_for_roster,
)

MAX_NODE_ID = 2**64 - 1
_KEY = generate_private_key().public_key()


def _enrolled(*node_ids: int) -> list[Seat]:
    return [Seat(f"client-{n}", _KEY, n) for n in node_ids]


class FakeEnrolled:
    """A roster source over a list of enrolled clients that the test changes between polls."""

    backend = "deployment"

    def __init__(self, *polls: list[Seat]) -> None:
        self.polls = list(polls)
        self.asked = 0

    def seat(self, online: set[int], num_workers: int) -> Roster | None:
        known = self.polls[min(self.asked, len(self.polls) - 1)]
        self.asked += 1
        return seat_enrolled(known, online, num_workers)

    def shortfall(self, online: set[int], num_workers: int) -> str:
        return f"{len(self.polls[-1])} enrolled"


def test_worker_i_is_the_online_client_with_the_ith_smallest_node_id() -> None:
    roster = seat_enrolled(_enrolled(MAX_NODE_ID, 7, 2**63 + 1), {7, 2**63 + 1, MAX_NODE_ID}, 3)
    assert roster is not None and roster.binds_nodes
    assert roster.node_of_worker == {0: 7, 1: 2**63 + 1, 2: MAX_NODE_ID}
    assert [m.client_id for m in roster.members.values()] == [
        "client-7",
        f"client-{2**63 + 1}",
        f"client-{MAX_NODE_ID}",
    ]


def test_an_online_node_of_no_approved_client_never_gets_work() -> None:
    roster = seat_enrolled(_enrolled(5, 9), {1, 5, 9}, 2)
    assert roster is not None
    assert set(roster.node_of_worker.values()) == {5, 9}


def test_too_few_approved_clients_online_means_no_roster_yet() -> None:
    assert seat_enrolled(_enrolled(5, 9, 11), {5, 11, 40}, 3) is None


def test_two_clients_on_one_node_are_refused() -> None:
    clash = [Seat("a", _KEY, 4), Seat("b", _KEY, 4)]
    with pytest.raises(ValueError, match="both claim Flower node 4"):
        seat_enrolled(clash, {4}, 1)


@given(
    st.sets(st.integers(0, MAX_NODE_ID), max_size=12),
    st.sets(st.integers(0, MAX_NODE_ID), max_size=12),
    st.integers(1, 6),
)
def test_a_roster_only_ever_holds_enrolled_online_nodes(
    enrolled: set[int], online: set[int], n: int
) -> None:
    roster = seat_enrolled(_enrolled(*enrolled), online, n)
    if len(enrolled & online) < n:
        assert roster is None
    else:
        assert roster is not None
        nodes = list(roster.node_of_worker.values())
        assert nodes == sorted(enrolled & online)[:n]


def test_simulated_workers_take_the_smallest_nodes_with_identities_derived_from_the_run() -> None:
    roster = SimulatedRoster("run-1").seat({40, 3, 17, 8}, 3)
    assert roster is not None and not roster.binds_nodes
    assert roster.node_of_worker == {0: 3, 1: 8, 2: 17}
    assert [m.client_id for m in roster.members.values()] == [
        simulated_identity("run-1", w).client_id for w in range(3)
    ]
    assert SimulatedRoster("run-1").seat({1, 2}, 3) is None


def test_simulated_workers_share_the_nodes_they_are_given_in_turn() -> None:
    roster = SimulatedRoster("run-1", nodes=3).seat({40, 3, 17, 8, 90}, 7)
    assert roster is not None
    assert roster.node_of_worker == {0: 3, 1: 8, 2: 17, 3: 3, 4: 8, 5: 17, 6: 3}
    assert [m.client_id for m in roster.members.values()] == [
        simulated_identity("run-1", w).client_id for w in range(7)
    ]
    # No more nodes than workers are needed; fewer than the nodes to share wait.
    assert SimulatedRoster("run-1", nodes=8).seat({5, 6}, 2) is not None
    assert SimulatedRoster("run-1", nodes=3).seat({1, 2}, 7) is None


@pytest.mark.parametrize("nodes", [0, -3])
def test_workers_cannot_share_fewer_than_one_node(nodes: int) -> None:
    with pytest.raises(ValueError, match="at least 1 node"):
        SimulatedRoster("run-1", nodes=nodes)


def test_waiting_asks_the_source_again_until_enough_clients_are_online() -> None:
    source = FakeEnrolled(_enrolled(1, 2), _enrolled(1, 2), _enrolled(1, 2, 3))
    roster = wait_for_roster(lambda: {1, 2, 3}, source, 3, timeout=30, interval=0)
    assert source.asked == 3
    assert roster.node_of_worker == {0: 1, 1: 2, 2: 3}


def test_waiting_in_vain_says_what_the_run_needs_and_what_the_source_found() -> None:
    with pytest.raises(TimeoutError) as info:
        wait_for_roster(lambda: {1, 99}, FakeEnrolled(_enrolled(1, 2)), 2, timeout=0, interval=0)
    assert str(info.value) == "the run needs 2 workers; after 0 s only 2 enrolled"


def test_a_simulation_short_of_nodes_says_how_many_connected_and_how_to_start_more() -> None:
    with pytest.raises(TimeoutError) as info:
        wait_for_roster(lambda: {5}, SimulatedRoster("r"), 7, timeout=0, interval=0)
    assert str(info.value) == (
        "the run needs 7 workers; after 0 s only 1 SuperNodes were connected; with `flwr run`, "
        "pass `--federation-config num-supernodes=7`"
    )
    with pytest.raises(TimeoutError, match="num-supernodes=4"):
        wait_for_roster(lambda: {5}, SimulatedRoster("r", nodes=4), 7, timeout=0, interval=0)
