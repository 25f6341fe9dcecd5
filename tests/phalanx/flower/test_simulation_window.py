"""A local simulation keeps a window of a round's messages out; a Ray cluster, every one.

A local simulation's workers also share a few virtual nodes (one per message of the
window), seated in turn; on a Ray cluster each worker has its own.
"""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.flower import simulation
from phalanx.flower.simulation import (
    MESSAGES_PER_ACTOR,
    MIN_WINDOW,
    NODES_PER_WINDOW,
    SimulationEngine,
)
from phalanx.roster import RosterSource, SimulatedRoster
from tests.support.configs import small_config


def started(
    engine: SimulationEngine, monkeypatch: pytest.MonkeyPatch, cpus: int, workers: int = 7
) -> dict[str, Any]:
    """What the engine hands Flower on a host of ``cpus`` CPUs: window, roster, nodes, batch."""
    seen: dict[str, Any] = {}

    def server_app(
        config: object,
        roster: RosterSource,
        drive: object,
        window: int | None = None,
        batch: bool = False,
        interruption: object = None,
    ) -> None:
        seen["window"], seen["roster"], seen["batch"] = window, roster, batch

    def run_simulation(**kwargs: Any) -> None:
        seen["supernodes"] = kwargs["num_supernodes"]

    monkeypatch.setattr(simulation.os, "cpu_count", lambda: cpus)
    monkeypatch.setattr(simulation, "build_server_app", server_app)
    monkeypatch.setattr(simulation, "run_simulation", run_simulation)
    monkeypatch.setattr(simulation, "reach_ray", lambda address: None)  # no cluster is run
    config = small_config(assignment={"scheme": "random", "num_workers": workers, "r": 3})
    engine.connect(config, SimulatedRoster("run"), lambda roster, transport: None)
    return seen


def window_of(engine: SimulationEngine, monkeypatch: pytest.MonkeyPatch, cpus: int) -> object:
    """The window the engine hands its ServerApp when the host has ``cpus`` CPUs."""
    return started(engine, monkeypatch, cpus)["window"]


@pytest.mark.parametrize(("cpus", "expected"), [(1, MIN_WINDOW), (2, 16), (8, 64)])
def test_a_local_ray_keeps_messages_per_actor_out(
    monkeypatch: pytest.MonkeyPatch, cpus: int, expected: int
) -> None:
    assert max(MIN_WINDOW, MESSAGES_PER_ACTOR * cpus) == expected
    assert window_of(SimulationEngine(), monkeypatch, cpus) == expected


def test_half_a_cpu_per_worker_doubles_the_actors_and_the_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert window_of(SimulationEngine(cpus_per_worker=0.5), monkeypatch, 8) == 128


def test_a_ray_cluster_or_a_given_window_is_taken_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert window_of(SimulationEngine(ray_address="127.0.0.1:6379"), monkeypatch, 8) is None
    assert window_of(SimulationEngine(window=5), monkeypatch, 8) == 5


def test_a_local_simulation_seats_many_workers_on_one_node_per_message_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = started(SimulationEngine(), monkeypatch, cpus=2, workers=1000)
    assert seen["supernodes"] == NODES_PER_WINDOW * 16 == 16
    assert seen["roster"] == SimulatedRoster("run", nodes=16)


def test_fewer_workers_than_nodes_each_get_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = started(SimulationEngine(), monkeypatch, cpus=2, workers=7)
    assert seen["supernodes"] == 7


def test_given_nodes_are_taken_and_a_ray_cluster_gives_each_worker_a_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert started(SimulationEngine(nodes=3), monkeypatch, cpus=2)["supernodes"] == 3
    cluster = started(SimulationEngine(ray_address="127.0.0.1:6379"), monkeypatch, cpus=8)
    assert cluster["supernodes"] == 7
    assert cluster["roster"] == SimulatedRoster("run")


@pytest.mark.parametrize("nodes", [0, -1])
def test_no_node_to_share_is_refused(nodes: int) -> None:
    with pytest.raises(ValueError, match="at least 1 node"):
        SimulationEngine(nodes=nodes)


def test_a_simulation_sends_a_nodes_tasks_in_one_message_unless_told_not_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert started(SimulationEngine(), monkeypatch, cpus=2, workers=1000)["batch"] is True
    assert started(SimulationEngine(batch=False), monkeypatch, cpus=2)["batch"] is False
