"""An interrupted simulation stops its ServerApp at the next look at the Grid, and waits for it."""

from __future__ import annotations

import threading

import pytest

from phalanx.flower.interruption import InterruptedRunError, Interruption, StoppableGrid
from tests.support.idle_grid import IdleGrid


def test_the_grid_works_until_the_stop_then_refuses_every_use() -> None:
    stop = threading.Event()
    grid = StoppableGrid(IdleGrid([7, 8]), stop)
    assert list(grid.get_node_ids()) == [7, 8]
    assert list(grid.pull_messages(["a"])) == []
    stop.set()
    for use in (
        lambda: grid.get_node_ids(),
        lambda: grid.pull_messages(["a"]),
        lambda: grid.push_messages([]),
        lambda: grid.send_and_receive([]),
    ):
        with pytest.raises(InterruptedRunError, match="interrupted"):
            use()


def test_interrupting_stops_a_serverapp_waiting_for_replies_and_waits_for_it() -> None:
    interruption = Interruption()
    fake = IdleGrid([7, 8])
    started = threading.Event()
    ended: list[BaseException] = []

    def server_app() -> None:
        grid = interruption.grid(fake)
        started.set()
        try:
            while True:  # a round whose replies never come: the engine is gone
                grid.pull_messages(["m"])
        except InterruptedRunError as exc:
            ended.append(exc)

    thread = threading.Thread(target=server_app)
    thread.start()
    assert started.wait(timeout=60)
    assert interruption.interrupt(timeout=60)
    assert not thread.is_alive()
    assert len(ended) == 1 and fake.pulls >= 1


def test_interrupting_before_the_serverapp_started_stops_it_at_its_first_look() -> None:
    interruption = Interruption()
    assert interruption.interrupt(timeout=0)
    with pytest.raises(InterruptedRunError):
        interruption.grid(IdleGrid([7, 8])).get_node_ids()
