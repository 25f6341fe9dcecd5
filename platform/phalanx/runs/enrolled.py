"""The workers of a deployed run: approved clients, online under their admitted Flower node ids.

In simulation every worker's identity is derived from the run
(:class:`phalanx.roster.SimulatedRoster`). In deployment the workers are real
clients: approved by an operator, admitted to the SuperLink under a Flower node
id (``phalanx.flower.deployment.admission``), and online when the run starts.
Worker ``i`` is the enrolled client with the ``i``-th smallest node id among
those online (:func:`phalanx.roster.seat_enrolled`), so the mapping is stable
while the same clients are connected.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from sqlalchemy.orm import Session, sessionmaker

from phalanx.identity import load_public_key
from phalanx.roster import Roster, Seat, seat_enrolled
from phalanx.store import ClientStatus, clients
from phalanx.store.transactions import read_session

__all__ = ["EnrolledRoster", "enrolled_clients"]

_PAGE = 500


def enrolled_clients(session: Session) -> list[Seat]:
    """Approved clients that have a Flower node id, from the database."""
    out: list[Seat] = []
    offset = 0
    while True:
        page = clients.list_clients(
            session, status=ClientStatus.APPROVED, limit=_PAGE, offset=offset
        )
        out += [
            Seat(c.id, load_public_key(c.public_key), c.flower_node_id)
            for c in page
            if c.flower_node_id is not None
        ]
        if len(page) < _PAGE:
            return out
        offset += _PAGE


@dataclass(frozen=True)
class EnrolledRoster:
    """Seats a deployed run's workers from the approved clients in the database.

    The approvals are read again on every call, so a client approved while the
    run waits counts. Once seated, each worker's client is marked seen under its
    node id.
    """

    sessions: sessionmaker[Session]

    @property
    def backend(self) -> Literal["deployment"]:
        """Enrolled clients on a SuperLink."""
        return "deployment"

    def seat(self, online: Collection[int], num_workers: int) -> Roster | None:
        """Seat the online enrolled clients of smallest node id; ``None`` while too few."""
        roster = seat_enrolled(self._enrolled(), online, num_workers)
        if roster is not None:
            with self.sessions.begin() as session:
                for seat in roster.seats:
                    clients.touch_client(session, seat.client_id, flower_node_id=seat.node_id)
        return roster

    def shortfall(self, online: Collection[int], num_workers: int) -> str:
        """Count the approved clients online among the approved clients."""
        known = self._enrolled()
        ready = sum(1 for seat in known if seat.node_id in online)
        return (
            f"{ready} of {len(known)} approved clients were online "
            f"({len(online)} SuperNodes connected)"
        )

    def _enrolled(self) -> list[Seat]:
        with read_session(self.sessions) as session:
            return enrolled_clients(session)
