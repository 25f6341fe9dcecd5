"""Stopping a simulated run's ServerApp when its process is interrupted (Ctrl-C).

Flower's simulation engine runs the ServerApp, and with it the coordinator, in a
thread of its own, and the virtual SuperNodes in the main thread. Ctrl-C reaches
the main thread only: the engine stops, while the coordinator goes on waiting for
replies that can no longer come, and the process cannot exit until it gives up.
An :class:`Interruption` hands the ServerApp a Grid that raises
:class:`InterruptedRunError` at its next use once the interruption is set, so the
coordinator stops between two looks at the Grid (a round being recorded is
recorded whole), and lets the main thread wait for it.

Ctrl-C reaches the run's own Ray too (its processes share the terminal's process
group): its actors die, and the engine's worker threads log each task they lose,
with a traceback, as the engine shuts down. :meth:`Interruption.on_ctrl_c` sets the
interruption the moment Ctrl-C arrives and drops the engine's error records from
then on: the operator is told where the run stopped, in one line, instead.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

from flwr.app import Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.run import Run

__all__ = ["InterruptedRunError", "Interruption", "StoppableGrid"]


class _QuietOnceStopped(logging.Filter):
    """Drop error records once ``stop`` is set: what a stopping engine reports of its end."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__()
        self._stop = stop

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self._stop.is_set() and record.levelno >= logging.ERROR)


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
    _quiet: _QuietOnceStopped | None = field(default=None, init=False, repr=False)

    @contextmanager
    def on_ctrl_c(self, logger: logging.Logger) -> Iterator[None]:
        """Within the block, Ctrl-C sets the interruption at once; ``logger``'s errors go after it.

        Ctrl-C still raises :class:`KeyboardInterrupt` (or does what the handler before
        did). The signal is handled only when the block runs in the main thread and
        Ctrl-C is not ignored (a background job's). The filter on ``logger`` is removed
        on leaving the block unless Ctrl-C came, since the engine's threads go on
        logging as they stop (see :meth:`release`).
        """
        self._quiet = _QuietOnceStopped(self.stop)
        logger.addFilter(self._quiet)
        main = threading.current_thread() is threading.main_thread()
        before = signal.getsignal(signal.SIGINT) if main else None
        handle = main and before not in (None, signal.SIG_IGN)  # ignored: left ignored

        def on_sigint(signum: int, frame: FrameType | None) -> None:
            self.stop.set()
            if callable(before):
                before(signum, frame)
            else:
                raise KeyboardInterrupt

        if handle:
            signal.signal(signal.SIGINT, on_sigint)
        try:
            yield
        finally:
            if handle and before is not None:
                signal.signal(signal.SIGINT, before)
            if not self.stop.is_set():
                self.release(logger)

    def release(self, logger: logging.Logger) -> None:
        """Remove the filter :meth:`on_ctrl_c` put on ``logger`` (kept after a Ctrl-C)."""
        if self._quiet is not None:
            logger.removeFilter(self._quiet)
            self._quiet = None

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
