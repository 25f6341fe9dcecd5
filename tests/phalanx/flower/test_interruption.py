"""An interrupted simulation stops its ServerApp at the next look at the Grid, and waits for it."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator

import pytest
from flwr.common.logger import FLOWER_LOGGER

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


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def ctrl_c_at_its_default() -> Iterator[None]:
    """SIGINT as a terminal's foreground job has it: a test process may have it ignored.

    (pytest-xdist's workers, and a suite started in the background, ignore SIGINT.)
    """
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.usefixtures("ctrl_c_at_its_default")
def test_ctrl_c_sets_the_interruption_at_once_and_quiets_the_engines_errors_after_it() -> None:
    # Ctrl-C reaches the run's own Ray too: its actors die, and Flower's worker threads
    # logged each lost task with a traceback (ERROR) while the engine shut down.
    interruption = Interruption()
    kept = _Kept()
    FLOWER_LOGGER.addHandler(kept)
    try:
        with pytest.raises(KeyboardInterrupt), interruption.on_ctrl_c(FLOWER_LOGGER):
            FLOWER_LOGGER.error("an error before Ctrl-C")
            os.kill(os.getpid(), signal.SIGINT)
            threading.Event().wait(60)  # the main thread waits, as the engine's does
        assert interruption.stop.is_set()
        FLOWER_LOGGER.error("Traceback (most recent call last): ActorDiedError")
        FLOWER_LOGGER.warning("a warning after Ctrl-C")
    finally:
        FLOWER_LOGGER.removeHandler(kept)
        interruption.release(FLOWER_LOGGER)
    assert kept.messages == ["an error before Ctrl-C", "a warning after Ctrl-C"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("ctrl_c_at_its_default")
def test_a_run_that_was_not_interrupted_leaves_the_logger_and_ctrl_c_as_they_were() -> None:
    interruption = Interruption()
    filters = list(FLOWER_LOGGER.filters)
    with interruption.on_ctrl_c(FLOWER_LOGGER):
        pass
    assert FLOWER_LOGGER.filters == filters and not interruption.stop.is_set()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
