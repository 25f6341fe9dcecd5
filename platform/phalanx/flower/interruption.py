"""Stopping a simulated run's ServerApp when its process is interrupted (Ctrl-C).

Flower's simulation engine runs the ServerApp, and with it the coordinator, in a
thread of its own, and the virtual SuperNodes in the main thread. Ctrl-C reaches
the main thread only: the engine stops, while the coordinator goes on waiting for
replies that can no longer come, and the process cannot exit until it gives up.
An :class:`Interruption` hands the ServerApp a Grid that raises
:class:`InterruptedRunError` at its next use once the interruption is set, so the
coordinator stops between two looks at the Grid (a round being recorded is
recorded whole), and lets the main thread wait for it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from flwr.app import Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.run import Run

__all__ = ["InterruptedRunError", "Interruption", "StoppableGrid"]


class InterruptedRunError(Exception):
    """The run's process was interrupted; the ServerApp stopped at its next use of the Grid."""


class StoppableGrid(Grid):
    """A Grid that raises :class:`InterruptedRunError` at any use once ``stop`` is set.

    Parameters
    ----------
    grid : Grid
        The ServerApp's Grid, which does the work.
    stop : threading.Event
        Set when the run's process is interrupted.
    """

    def __init__(self, grid: Grid, stop: threading.Event) -> None:
        self._grid = grid
        self._stop = stop

    def _go_on(self) -> None:
        if self._stop.is_set():
            raise InterruptedRunError("the run's process was interrupted")

    def set_run(self, run: Run) -> None:
        """Set the run the Grid operates in."""
        self._go_on()
        self._grid.set_run(run)

    @property
    def run(self) -> Run:
        """The run the Grid operates in."""
        return self._grid.run

    def create_message(
        self,
        content: RecordDict,
        message_type: str,
        dst_node_id: int,
        group_id: str,
        ttl: float | None = None,
    ) -> Message:
        """Create a message to a node (Flower's :meth:`Grid.create_message`)."""
        self._go_on()
        return self._grid.create_message(content, message_type, dst_node_id, group_id, ttl)

    def get_node_ids(self) -> Iterable[int]:
        """Return the ids of the connected nodes."""
        self._go_on()
        return self._grid.get_node_ids()

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Push messages to their nodes; return their ids."""
        self._go_on()
        return self._grid.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        """Pull the replies to the messages ``message_ids`` that have come."""
        self._go_on()
        return self._grid.pull_messages(message_ids)

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        """Push messages and wait for their replies (Flower's :meth:`Grid.send_and_receive`)."""
        self._go_on()
        return self._grid.send_and_receive(messages, timeout=timeout)


@dataclass
class Interruption:
    """The way to stop one simulated run's ServerApp thread from the main thread.

    The ServerApp calls :meth:`grid` on its Grid when it starts; the main thread
    calls :meth:`interrupt` when Ctrl-C reaches it.
    """

    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def grid(self, grid: Grid) -> Grid:
        """Return ``grid`` made stoppable, and remember the thread the ServerApp runs in."""
        self.thread = threading.current_thread()
        return StoppableGrid(grid, self.stop)

    def interrupt(self, timeout: float | None = None) -> bool:
        """Stop the ServerApp at its next use of the Grid and wait up to ``timeout`` s for it.

        Returns whether its thread has ended (or never started).
        """
        self.stop.set()
        thread = self.thread
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout)
        return not thread.is_alive()
