"""A local simulation keeps a window of a round's messages out; a Ray cluster, every one."""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.flower import simulation
from phalanx.flower.simulation import MESSAGES_PER_ACTOR, MIN_WINDOW, SimulationEngine
from phalanx.roster import SimulatedRoster
from tests.support.configs import small_config


def window_of(engine: SimulationEngine, monkeypatch: pytest.MonkeyPatch, cpus: int) -> object:
    """The window the engine hands its ServerApp when the host has ``cpus`` CPUs."""
    seen: dict[str, Any] = {}

    def server_app(*args: Any, window: int | None = None) -> None:
        seen["window"] = window

    monkeypatch.setattr(simulation.os, "cpu_count", lambda: cpus)
    monkeypatch.setattr(simulation, "build_server_app", server_app)
    monkeypatch.setattr(simulation, "run_simulation", lambda **kwargs: None)
    engine.connect(small_config(), SimulatedRoster("run"), lambda roster, transport: None)
    return seen["window"]


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
