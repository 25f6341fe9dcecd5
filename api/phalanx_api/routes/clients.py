"""Clients: self-registration with proof of possession, and operator decisions."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from fastapi import APIRouter
from sqlalchemy.orm import Session

from phalanx.store import ClientStatus, clients
from phalanx_api import actions, registration
from phalanx_api.actions import ClientAction
from phalanx_api.auth import Principal
from phalanx_api.deps import OperatorDep, SessionDep, SettingsDep, ViewerDep
from phalanx_api.paths import API_PREFIX
from phalanx_api.responses import BAD_REQUEST, CONFLICT, NOT_FOUND, UNAUTHORIZED, documented
from phalanx_api.routes.params import Limit, Offset
from phalanx_api.schemas import (
    DEFAULT_PAGE_SIZE,
    ChallengeOut,
    ClientOut,
    ClientPage,
    ClientRegistrationIn,
    ClientRegistrationOut,
    ClientStatusOut,
    ProofIn,
    StatusChangeIn,
)
from phalanx_api.transactions import writing

router = APIRouter(prefix=f"{API_PREFIX}/clients", tags=["clients"])


@router.post("", status_code=201, responses=CONFLICT)
def register_client(
    body: ClientRegistrationIn, db: SessionDep, settings: SettingsDep
) -> ClientRegistrationOut:
    """Register a client by its EC public key; answer its id and a challenge to sign.

    No API key needed: a client proves itself by signing the challenge
    (``POST /clients/{id}/proof``), then an operator approves it.
    """
    with writing(db):
        issued = registration.register_client(
            db,
            name=body.name,
            public_key=body.public_key,
            challenge_ttl=timedelta(seconds=settings.challenge_ttl_s),
        )
    return ClientRegistrationOut(
        id=issued.client.id, status=issued.client.status, challenge=issued.challenge
    )


@router.post("/{client_id}/proof", responses=documented(BAD_REQUEST, NOT_FOUND))
def prove_key(
    client_id: UUID, body: ProofIn, db: SessionDep, settings: SettingsDep
) -> ClientStatusOut:
    """Prove possession of the key: the signature over the challenge. Spends the challenge."""
    with writing(db):
        client = registration.prove_possession(
            db, str(client_id), body.signature, auto_approve=settings.auto_approve_clients
        )
    return ClientStatusOut(id=client.id, status=client.status)


@router.post("/{client_id}/challenge", status_code=201, responses=documented(NOT_FOUND, CONFLICT))
def new_challenge(client_id: UUID, db: SessionDep, settings: SettingsDep) -> ChallengeOut:
    """Give a pending client a new challenge (the last one expired or was spent)."""
    with writing(db):
        issued = registration.issue_challenge(
            db, str(client_id), challenge_ttl=timedelta(seconds=settings.challenge_ttl_s)
        )
    return ChallengeOut(
        id=issued.client.id, challenge=issued.challenge, expires_at=issued.expires_at
    )


@router.get("", responses=UNAUTHORIZED)
def list_clients(
    db: SessionDep,
    _: ViewerDep,
    status: ClientStatus | None = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    offset: Offset = 0,
) -> ClientPage:
    """List clients, oldest registration first."""
    rows = clients.list_clients(db, status=status, limit=limit + 1, offset=offset)
    return ClientPage(
        items=[ClientOut.model_validate(row) for row in rows[:limit]],
        limit=limit,
        offset=offset,
        next_offset=offset + limit if len(rows) > limit else None,
    )


@router.get("/{client_id}", responses=documented(UNAUTHORIZED, NOT_FOUND))
def get_client(client_id: UUID, db: SessionDep, _: ViewerDep) -> ClientOut:
    """One client."""
    return ClientOut.model_validate(clients.get_client(db, str(client_id)))


STATUS_CHANGE = documented(UNAUTHORIZED, NOT_FOUND, CONFLICT)


@router.post("/{client_id}/approve", responses=STATUS_CHANGE)
def approve_client(
    client_id: UUID, db: SessionDep, user: OperatorDep, body: StatusChangeIn | None = None
) -> ClientOut:
    """Approve a pending (key proven) or suspended client: it gets work in new runs."""
    return _change(db, client_id, ClientAction.APPROVE, user, body)


@router.post("/{client_id}/suspend", responses=STATUS_CHANGE)
def suspend_client(
    client_id: UUID, db: SessionDep, user: OperatorDep, body: StatusChangeIn | None = None
) -> ClientOut:
    """Suspend a client for now: it gets no work until approved again."""
    return _change(db, client_id, ClientAction.SUSPEND, user, body)


@router.post("/{client_id}/ban", responses=STATUS_CHANGE)
def ban_client(
    client_id: UUID, db: SessionDep, user: OperatorDep, body: StatusChangeIn | None = None
) -> ClientOut:
    """Ban a client: no work in any run and its replies refused, until reinstated."""
    return _change(db, client_id, ClientAction.BAN, user, body)


@router.post("/{client_id}/reinstate", responses=STATUS_CHANGE)
def reinstate_client(
    client_id: UUID, db: SessionDep, user: OperatorDep, body: StatusChangeIn | None = None
) -> ClientOut:
    """Lift a suspension or a ban: the client is approved again."""
    return _change(db, client_id, ClientAction.REINSTATE, user, body)


def _change(
    db: Session,
    client_id: UUID,
    action: ClientAction,
    user: Principal,
    body: StatusChangeIn | None,
) -> ClientOut:
    reason = body.reason if body is not None else ""
    with writing(db):
        client = actions.change_client_status(db, str(client_id), action, actor=user, reason=reason)
    return ClientOut.model_validate(client)
