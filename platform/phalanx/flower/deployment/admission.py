"""Admitting approved clients to the SuperLink, so that exactly they can connect.

The SuperLink runs with ``--enable-supernode-auth``: a SuperNode connects only
if its public key was registered through the Control API, and Flower assigns
the node id at that moment. Phalanx registers a client's key (the same EC key
it registered over REST) when the client is approved, and stores the node id
as ``clients.flower_node_id``; the deployed ServerApp gives work only to
approved clients under those node ids (:mod:`phalanx.runs.enrolled`).

Two facts of Flower 1.42 shape the life cycle:

* Flower never registers the same public key twice, not even after
  ``flwr supernode unregister``. So a *suspended* client stays registered
  with the SuperLink (Phalanx just gives it no work), and only a *banned*
  client is unregistered, which disconnects it for good; a banned client that
  is reinstated must enroll a new key.
* The SuperLink's state and Phalanx's database are separate. :func:`reconcile`
  brings the SuperLink in line with the database and can run on every
  coordinator poll; :func:`admit_client` is the one-client step an approval
  can call at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy.orm import Session, sessionmaker

from phalanx.flower.deployment.control import ControlError, FlowerControl
from phalanx.identity import load_public_key
from phalanx.store import ClientStatus, clients

__all__ = [
    "AdmissionError",
    "Reconciliation",
    "admit_client",
    "ban_client",
    "reconcile",
    "supernode_name",
]

_PAGE = 500


class AdmissionError(RuntimeError):
    """A client cannot be admitted to (or removed from) the SuperLink; the message says why.

    ``lasting``: trying again cannot help (the key is known to the SuperLink already,
    the client is not approved); otherwise the SuperLink may have been out of reach
    for a moment, and the next try may succeed.
    """

    def __init__(self, message: str, *, lasting: bool = True) -> None:
        super().__init__(message)
        self.lasting = lasting


@dataclass
class Reconciliation:
    """What :func:`reconcile` changed, client id -> node id, and what it could not do."""

    admitted: dict[str, int] = field(default_factory=dict)
    banned: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    lasting: set[str] = field(default_factory=set)
    """The clients of ``errors`` that trying again cannot help."""
    skipped: set[str] = field(default_factory=set)
    """Clients to admit or unregister that were not tried (``skip``)."""


def supernode_name(client_id: str) -> str:
    """Name a client's SuperNode in Flower's state."""
    return f"phalanx-{client_id}"


def admit_client(session: Session, client_id: str, control: FlowerControl) -> int:
    """Register an approved client's public key with the SuperLink; return its node id.

    A client admitted already keeps its node id (nothing is sent). The node id
    is written to the client's row; the caller commits.

    Raises
    ------
    AdmissionError
        When the client is not approved, or the SuperLink refuses the key (it
        was registered before: Flower never registers a key twice).
    phalanx.store.NotFoundError
        When no client has this id.
    """
    client = clients.get_client(session, client_id)
    if client.status != ClientStatus.APPROVED:
        raise AdmissionError(f"client {client_id} is {client.status.value}, not approved")
    if client.flower_node_id is not None:
        return client.flower_node_id
    try:
        node_id = control.register_supernode(
            load_public_key(client.public_key), name=supernode_name(client_id)
        )
    except ControlError as exc:
        if exc.public_key_in_use:
            raise AdmissionError(
                f"the SuperLink knows client {client_id}'s key already (Flower never registers "
                "a key twice, even after unregistering it); if it was banned, the client must "
                "enroll a new key, otherwise find its node with `flwr supernode list`"
            ) from exc
        raise AdmissionError(
            f"the SuperLink refused client {client_id}: {exc}", lasting=False
        ) from exc
    client.flower_node_id = node_id
    session.flush()
    return node_id


def ban_client(session: Session, client_id: str, control: FlowerControl) -> int | None:
    """Unregister a banned client's SuperNode: it is disconnected and can never return.

    The node id is cleared from the client's row (the caller commits).
    Returns the node id unregistered, or ``None`` when there was none.

    Raises
    ------
    AdmissionError
        When the client is not banned, or the SuperLink refuses.
    """
    client = clients.get_client(session, client_id)
    if client.status != ClientStatus.BANNED:
        raise AdmissionError(f"client {client_id} is {client.status.value}, not banned")
    node_id = client.flower_node_id
    if node_id is None:
        return None
    try:
        control.unregister_supernode(node_id)
    except ControlError as exc:
        raise AdmissionError(
            f"the SuperLink refused to unregister node {node_id}: {exc}", lasting=False
        ) from exc
    client.flower_node_id = None
    session.flush()
    return node_id


def reconcile(
    sessions: sessionmaker[Session],
    control: FlowerControl,
    *,
    skip: Iterable[str] = (),
) -> Reconciliation:
    """Admit every approved client without a node id; unregister every banned one with one.

    Each client is handled in a transaction of its own, so one refusal does not
    hold up the others.

    Parameters
    ----------
    sessions : sessionmaker
        The Phalanx database.
    control : FlowerControl
        The SuperLink's Control API.
    skip : iterable of str
        Client ids not to try (those refused for good before, to avoid retrying a
        lasting refusal on every poll).
    """
    result = Reconciliation()
    skipped = set(skip)
    with sessions() as session:
        to_admit = _client_ids(session, ClientStatus.APPROVED, has_node=False)
        to_ban = _client_ids(session, ClientStatus.BANNED, has_node=True)
    for client_id in to_admit:
        if client_id in skipped:
            result.skipped.add(client_id)
            continue
        try:
            with sessions.begin() as session:
                result.admitted[client_id] = admit_client(session, client_id, control)
        except AdmissionError as exc:
            result.errors[client_id] = str(exc)
            if exc.lasting:
                result.lasting.add(client_id)
    for client_id in to_ban:
        if client_id in skipped:
            result.skipped.add(client_id)
            continue
        try:
            with sessions.begin() as session:
                node_id = ban_client(session, client_id, control)
            if node_id is not None:
                result.banned[client_id] = node_id
        except AdmissionError as exc:
            result.errors[client_id] = str(exc)
            if exc.lasting:
                result.lasting.add(client_id)
    return result


def _client_ids(session: Session, status: ClientStatus, *, has_node: bool) -> list[str]:
    """Ids of the clients in ``status`` that have a node id (or lack one)."""
    out: list[str] = []
    offset = 0
    while True:
        page = clients.list_clients(session, status=status, limit=_PAGE, offset=offset)
        out += [c.id for c in page if (c.flower_node_id is not None) == has_node]
        if len(page) < _PAGE:
            return out
        offset += _PAGE
