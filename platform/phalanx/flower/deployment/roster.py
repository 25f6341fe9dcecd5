"""Who the workers of a deployed run are: approved clients, matched to online SuperNodes.

In simulation every worker's identity is derived from the run
(:mod:`phalanx.roster`). In deployment the workers are real clients: approved
by an operator, admitted to the SuperLink under a Flower node id
(:mod:`phalanx.flower.deployment.admission`), and online when the run starts. Worker
``i`` is the enrolled client with the ``i``-th smallest node id among those
online, so the mapping is stable while the same clients are connected.

A SuperNode that is online but belongs to no approved client (registered with
the SuperLink by hand, or a client suspended since) never gets work.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from phalanx.coordinator import Member
from phalanx.identity import PublicKey, load_public_key
from phalanx.store import ClientStatus, clients

__all__ = [
    "Enrolled",
    "Roster",
    "assign_workers",
    "enrolled_clients",
    "wait_for_roster",
]

_PAGE = 500


@dataclass(frozen=True)
class Enrolled:
    """An approved client with the node id the SuperLink admits it under."""

    client_id: str
    public_key: PublicKey
    node_id: int


@dataclass(frozen=True)
class Roster:
    """The workers of a deployed run: identity and Flower node of each."""

    workers: tuple[Enrolled, ...]

    @property
    def members(self) -> dict[int, Member]:
        """Worker index -> identity, as the coordinator verifies replies."""
        return {
            w: Member(worker=w, client_id=e.client_id, public_key=e.public_key)
            for w, e in enumerate(self.workers)
        }

    @property
    def node_of_worker(self) -> dict[int, int]:
        """Worker index -> Flower node id, as the Grid transport addresses tasks."""
        return {w: e.node_id for w, e in enumerate(self.workers)}


def assign_workers(
    enrolled: Iterable[Enrolled], online: Iterable[int], num_workers: int
) -> Roster | None:
    """Pick the run's workers: the ``num_workers`` online enrolled clients of smallest node id.

    Parameters
    ----------
    enrolled : iterable of Enrolled
        Approved clients and their node ids.
    online : iterable of int
        Node ids the SuperLink reports connected.
    num_workers : int
        Workers the run needs.

    Returns
    -------
    Roster or None
        ``None`` while fewer than ``num_workers`` enrolled clients are online.

    Raises
    ------
    ValueError
        When two enrolled clients claim the same node id.
    """
    by_node: dict[int, Enrolled] = {}
    for e in enrolled:
        if e.node_id in by_node:
            raise ValueError(
                f"clients {by_node[e.node_id].client_id} and {e.client_id} "
                f"both claim Flower node {e.node_id}"
            )
        by_node[e.node_id] = e
    ready = sorted(set(online) & set(by_node))
    if len(ready) < num_workers:
        return None
    return Roster(workers=tuple(by_node[n] for n in ready[:num_workers]))


def enrolled_clients(session: Session) -> list[Enrolled]:
    """Approved clients that have a Flower node id, from the database."""
    out: list[Enrolled] = []
    offset = 0
    while True:
        page = clients.list_clients(
            session, status=ClientStatus.APPROVED, limit=_PAGE, offset=offset
        )
        out += [
            Enrolled(c.id, load_public_key(c.public_key), c.flower_node_id)
            for c in page
            if c.flower_node_id is not None
        ]
        if len(page) < _PAGE:
            return out
        offset += _PAGE


def wait_for_roster(
    online: Callable[[], Iterable[int]],
    enrolled: Callable[[], Sequence[Enrolled]],
    num_workers: int,
    *,
    timeout: float,
    interval: float = 1.0,
) -> Roster:
    """Wait until ``num_workers`` enrolled clients are online; return the roster.

    Parameters
    ----------
    online : callable
        The node ids connected now (the Grid's ``get_node_ids``).
    enrolled : callable
        The enrolled clients now (re-read, so a client approved meanwhile counts).
    num_workers : int
        Workers the run needs.
    timeout : float
        Seconds to wait.

    Raises
    ------
    TimeoutError
        Naming how many enrolled clients were online and how many are enrolled.
    """
    deadline = time.monotonic() + timeout
    while True:
        nodes = set(online())
        known = enrolled()
        roster = assign_workers(known, nodes, num_workers)
        if roster is not None:
            return roster
        if time.monotonic() > deadline:
            ready = sum(1 for e in known if e.node_id in nodes)
            raise TimeoutError(
                f"the run needs {num_workers} workers; after {timeout:.0f} s only {ready} of "
                f"{len(known)} approved clients were online ({len(nodes)} SuperNodes connected)"
            )
        time.sleep(interval)
