"""Who the workers of a run are: each worker's identity and the Flower node it runs on.

A :class:`Roster` seats a run's workers. Two sources fill it (:class:`RosterSource`):

- **simulated identities** (:class:`SimulatedRoster`): in simulation the coordinator
  and the virtual clients run from one config, so each worker's key is derived
  from the run id and its index, and a resumed run gets the same keys and client
  ids back. Any connected node can play any worker: worker ``i`` runs on the
  node with the ``i``-th smallest node id.
- **enrolled clients** (``phalanx.runs.enrolled.EnrolledRoster``): real clients
  that generated their keys themselves and registered them over REST, each
  admitted to the SuperLink under its own node id (:func:`seat_enrolled`).

:func:`wait_for_roster` is the one way of waiting for a run's nodes to connect.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from cryptography.hazmat.primitives.asymmetric import ec

from phalanx.identity import PublicKey

# Order of the NIST P-256 group.
_P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


@dataclass(frozen=True)
class Member:
    """A worker of the run: its stable index, client id and public key."""

    worker: int
    client_id: str
    public_key: ec.EllipticCurvePublicKey


@dataclass(frozen=True)
class SimulatedIdentity:
    """A virtual client's id and key pair."""

    worker: int
    client_id: str
    private_key: ec.EllipticCurvePrivateKey

    @property
    def public_key(self) -> ec.EllipticCurvePublicKey:
        """The public half."""
        return self.private_key.public_key()


def simulated_identity(run_id: str, worker: int) -> SimulatedIdentity:
    """Derive the identity of worker ``worker`` in simulated run ``run_id``."""
    digest = hashlib.sha256(f"phalanx-sim-key:{run_id}:{worker}".encode()).digest()
    scalar = int.from_bytes(digest, "big") % (_P256_ORDER - 1) + 1
    key = ec.derive_private_key(scalar, ec.SECP256R1())
    client_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"phalanx-sim:{run_id}:{worker}"))
    return SimulatedIdentity(worker=worker, client_id=client_id, private_key=key)


def simulated_roster(run_id: str, num_workers: int) -> list[SimulatedIdentity]:
    """Derive the identities of all ``num_workers`` virtual clients of a run."""
    return [simulated_identity(run_id, w) for w in range(num_workers)]


@dataclass(frozen=True)
class Seat:
    """A worker's identity and the Flower node it runs on."""

    client_id: str
    public_key: PublicKey
    node_id: int


@dataclass(frozen=True)
class Roster:
    """The workers of a run: worker ``i`` sits in ``seats[i]``.

    Parameters
    ----------
    seats : tuple of Seat
        Identity and node of each worker, by worker index.
    binds_nodes : bool
        Whether the workers sign their node id into every reply (enrolled
        clients), so that a transport can check it.
    """

    seats: tuple[Seat, ...]
    binds_nodes: bool = False

    @property
    def members(self) -> dict[int, Member]:
        """Worker index -> identity, as the coordinator verifies replies."""
        return {
            w: Member(worker=w, client_id=s.client_id, public_key=s.public_key)
            for w, s in enumerate(self.seats)
        }

    @property
    def node_of_worker(self) -> dict[int, int]:
        """Worker index -> Flower node id, as a transport addresses tasks."""
        return {w: s.node_id for w, s in enumerate(self.seats)}


class RosterSource(Protocol):
    """Seats a run's workers on the nodes connected now."""

    @property
    def backend(self) -> Literal["simulation", "deployment"]:
        """Where these workers come from, as a run config's ``deployment.backend`` says."""
        ...

    def seat(self, online: Collection[int], num_workers: int) -> Roster | None:
        """Return the roster, or ``None`` while too few suitable nodes are connected."""
        ...

    def shortfall(self, online: Collection[int], num_workers: int) -> str:
        """Say, after ``only``, why :meth:`seat` found too few workers among ``online``."""
        ...


@dataclass(frozen=True)
class SimulatedRoster:
    """Simulated identities of run ``run_id``, worker ``i`` on the ``i``-th smallest node id.

    Parameters
    ----------
    run_id : str
        The run, which the identities are derived from.
    nodes : int, optional
        How many nodes the workers share: worker ``i`` sits on the ``(i mod nodes)``-th
        smallest node id (Flower's simulation engine sweeps every virtual node for
        messages every 0.1 s, so fewer nodes cost its ServerApp less; see
        :class:`~phalanx.flower.simulation.SimulationEngine`). ``None``: a node per
        worker, as ``flwr run`` starts them.
    """

    run_id: str
    nodes: int | None = None

    def __post_init__(self) -> None:
        if self.nodes is not None and self.nodes < 1:
            raise ValueError(f"workers need at least 1 node to share, got {self.nodes}")

    @property
    def backend(self) -> Literal["simulation"]:
        """Simulated workers."""
        return "simulation"

    def needed(self, num_workers: int) -> int:
        """How many nodes ``num_workers`` workers sit on."""
        return num_workers if self.nodes is None else min(self.nodes, num_workers)

    def seat(self, online: Collection[int], num_workers: int) -> Roster | None:
        """Seat every worker once the nodes they share are connected."""
        needed = self.needed(num_workers)
        nodes = sorted(online)
        if len(nodes) < needed:
            return None
        identities = simulated_roster(self.run_id, num_workers)
        return Roster(
            tuple(Seat(i.client_id, i.public_key, nodes[i.worker % needed]) for i in identities)
        )

    def shortfall(self, online: Collection[int], num_workers: int) -> str:
        """Count the connected nodes (``flwr run`` starts as many as it is told)."""
        return (
            f"{len(online)} SuperNodes were connected; with `flwr run`, pass "
            f"`--federation-config num-supernodes={self.needed(num_workers)}`"
        )


def seat_enrolled(
    enrolled: Iterable[Seat], online: Iterable[int], num_workers: int
) -> Roster | None:
    """Seat the run's workers: the ``num_workers`` online enrolled clients of smallest node id.

    Parameters
    ----------
    enrolled : iterable of Seat
        Approved clients and the node ids the SuperLink admitted them under.
    online : iterable of int
        Node ids the SuperLink reports connected.
    num_workers : int
        Workers the run needs.

    Returns
    -------
    Roster or None
        ``None`` while fewer than ``num_workers`` enrolled clients are online. A
        node that is online but belongs to no enrolled client never gets work.

    Raises
    ------
    ValueError
        When two enrolled clients claim the same node id.
    """
    by_node: dict[int, Seat] = {}
    for seat in enrolled:
        if seat.node_id in by_node:
            raise ValueError(
                f"clients {by_node[seat.node_id].client_id} and {seat.client_id} "
                f"both claim Flower node {seat.node_id}"
            )
        by_node[seat.node_id] = seat
    ready = sorted(set(online) & set(by_node))
    if len(ready) < num_workers:
        return None
    return Roster(seats=tuple(by_node[n] for n in ready[:num_workers]), binds_nodes=True)


def wait_for_roster(
    online: Callable[[], Iterable[int]],
    source: RosterSource,
    num_workers: int,
    *,
    timeout: float,
    interval: float = 0.2,
) -> Roster:
    """Wait until ``source`` can seat ``num_workers`` workers on the online nodes.

    Parameters
    ----------
    online : callable
        The node ids connected now (the Grid's ``get_node_ids``).
    source : RosterSource
        Who may be a worker; asked again on every poll, so a client approved
        meanwhile counts.
    num_workers : int
        Workers the run needs.
    timeout : float
        Seconds to wait.
    interval : float
        Seconds between polls.

    Raises
    ------
    TimeoutError
        Saying how many workers the run needs and what the source found.
    """
    deadline = time.monotonic() + timeout
    while True:
        nodes = set(online())
        roster = source.seat(nodes, num_workers)
        if roster is not None:
            return roster
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"the run needs {num_workers} workers; after {timeout:.0f} s only "
                f"{source.shortfall(nodes, num_workers)}"
            )
        time.sleep(interval)
