"""How many requests may hold a database session at once; the others queue.

A request holds its session (and, once it has read, a pooled connection) from
its first query until its answer is built, across the hops between FastAPI's
worker threads. Were every request let in, a burst would hold every pooled
connection while waiting for a thread, and the requests holding threads would
wait for a connection: each would time out, and answer 500. Instead, a request
waits for a slot on the event loop (no thread, no connection) before its
session is opened. Reads and writes have slots of their own, so a burst of
writes, which SQLite serialises anyway, never keeps a viewer waiting behind it.
Together the slots stay below the pool's connections
(:data:`phalanx.store.engine.POOL_SIZE` + :data:`~phalanx.store.engine.MAX_OVERFLOW`),
so an admitted request never waits for one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from phalanx_api.auth import SAFE_METHODS

#: Requests with safe methods (GET, HEAD, OPTIONS) that may hold a session at once.
READ_SLOTS = 24
#: Requests with other methods (they write) that may hold a session at once.
WRITE_SLOTS = 4


@dataclass(frozen=True)
class SessionSlots:
    """The slots of one app.

    Attributes
    ----------
    reads : anyio.Semaphore
        Slots of requests that read.
    writes : anyio.Semaphore
        Slots of requests that write.
    """

    reads: anyio.Semaphore = field(default_factory=lambda: anyio.Semaphore(READ_SLOTS))
    writes: anyio.Semaphore = field(default_factory=lambda: anyio.Semaphore(WRITE_SLOTS))

    def slots_for(self, method: str) -> anyio.Semaphore:
        """Return the slots a request with this HTTP method waits for."""
        return self.reads if method.upper() in SAFE_METHODS else self.writes
