"""Clients: self-registration with proof of possession, and operator decisions."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Header, Query, Request
from sqlalchemy.orm import Session

from phalanx.store import ClientStatus, clients
from phalanx_api import actions, registration
from phalanx_api.actions import ClientAction
from phalanx_api.auth import Principal
from phalanx_api.deps import ContextDep, OperatorDep, SessionDep, SettingsDep, ViewerDep
from phalanx_api.errors import RateLimitedError
from phalanx_api.paths import API_PREFIX
from phalanx_api.ratelimit import RateLimiter, address_key, retry_after
from phalanx_api.responses import (
    BAD_REQUEST,
    CONFLICT,
    NOT_FOUND,
    NOT_REGISTRANT,
    TOO_MANY,
    UNAUTHORIZED,
    documented,
)
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


async def take_registration_slot(request: Request, context: ContextDep) -> None:
    """Count a registration against its address's budgets.

    Two budgets: ``registration_per_minute``, and ``pending_per_address`` per
    challenge lifetime (a registration waits unproven that long at most, so one
    address holds at most twice that many waiting at once: a few addresses cannot
    fill the server's waiting list and keep everyone else from registering).

    Raises
    ------
    RateLimitedError
        When the address has used either budget for now.
    """
    settings = context.settings
    _take_address_slot(
        request,
        context.limits.registration,
        what="registrations",
        budget=f"{settings.registration_per_minute} a minute",
    )
    _take_address_slot(
        request,
        context.limits.pending_by_address,
        what="registrations",
        budget=f"{settings.pending_per_address} per {settings.challenge_ttl_s} s, the time a "
        "registration may wait for its proof",
    )


def _take_address_slot(request: Request, limiter: RateLimiter, *, what: str, budget: str) -> None:
    host = request.client.host if request.client is not None else None
    wait = limiter.acquire(address_key(host))
    if wait is not None:
        raise RateLimitedError(
            f"too many {what} from this address (at most {budget}); retry in {retry_after(wait)} s",
            retry_after_s=wait,
        )


RegistrationSlot = Annotated[None, Depends(take_registration_slot)]
RegistrationToken = Annotated[
    str | None,
    Header(
        alias=registration.REGISTRATION_TOKEN_HEADER,
        max_length=200,
        description="The registration_token of the registration's answer.",
    ),
]


def take_key_step_slot(request: Request, context: ContextDep) -> None:
    """Count a proof or a new challenge against its address's budget (``proof_per_minute``).

    Raises
    ------
    RateLimitedError
        When the address has used its budget for now.
    """
    _take_address_slot(
        request,
        context.limits.proof_by_address,
        what="proofs and challenges",
        budget=f"{context.settings.proof_per_minute} a minute",
    )


def take_proof_slot(
    request: Request,
    client_id: UUID,
    context: ContextDep,
    db: SessionDep,
    token: RegistrationToken = None,
) -> None:
    """Count a proof against its address's budget and its client's (``proof_per_minute``).

    Both are counted before the body is read or a signature checked. The client's
    budget is shared by everyone who posts proofs for that id, except its registrant
    showing its registration token: a stranger spending it cannot keep the registrant
    from proving.

    Raises
    ------
    RateLimitedError
        When the address, or the client id, has used its budget for now.
    """
    take_key_step_slot(request, context)
    if registration.is_registrant(db, str(client_id), token):
        return
    per_minute = context.settings.proof_per_minute
    wait = context.limits.proof_by_client.acquire(str(client_id))
    if wait is not None:
        raise RateLimitedError(
            f"too many proofs for client {str(client_id)!r} (at most {per_minute} a minute); "
            f"retry in {retry_after(wait)} s, or send its registration token in the "
            f"{registration.REGISTRATION_TOKEN_HEADER} header",
            retry_after_s=wait,
        )


ProofSlot = Annotated[None, Depends(take_proof_slot)]
ChallengeSlot = Annotated[None, Depends(take_key_step_slot)]


@router.post("", status_code=201, responses=documented(CONFLICT, TOO_MANY))
def register_client(
    body: ClientRegistrationIn, db: SessionDep, settings: SettingsDep, _: RegistrationSlot
) -> ClientRegistrationOut:
    """Register a client by its EC public key; answer its id and a challenge to sign.

    No API key needed: a client proves itself by signing the challenge
    (``POST /clients/{id}/proof``), then an operator approves it. The registration
    expires with its challenge unless proven. A key that only unproven registrations
    hold can be registered again (a stranger may have sent someone else's public key);
    one that a proven client holds cannot. Limited per address
    (``registration_per_minute``) and in total (``max_pending_clients`` unproven).
    """
    with writing(db):
        issued = registration.register_client(
            db,
            name=body.name,
            public_key=body.public_key,
            challenge_ttl=timedelta(seconds=settings.challenge_ttl_s),
            max_pending=settings.max_pending_clients,
        )
    return ClientRegistrationOut(
        id=issued.client.id,
        status=issued.client.status,
        challenge=issued.challenge,
        expires_at=issued.expires_at,
        registration_token=issued.registration_token,
    )


@router.post("/{client_id}/proof", responses=documented(BAD_REQUEST, NOT_FOUND, CONFLICT, TOO_MANY))
def prove_key(
    client_id: UUID, body: ProofIn, db: SessionDep, settings: SettingsDep, _: ProofSlot
) -> ClientStatusOut:
    """Prove possession of the key: the signature over the challenge.

    A valid proof spends the challenge and discards the key's other unproven
    registrations; a wrong one changes nothing. Limited per address and per client
    (``proof_per_minute``); the registrant's own proofs, showing its registration
    token in ``X-Registration-Token``, count against its address only.
    """
    with writing(db):
        client = registration.prove_possession(
            db, str(client_id), body.signature, auto_approve=settings.auto_approve_clients
        )
    return ClientStatusOut(id=client.id, status=client.status)


@router.post(
    "/{client_id}/challenge",
    status_code=201,
    responses=documented(NOT_REGISTRANT, NOT_FOUND, CONFLICT, TOO_MANY),
)
def new_challenge(
    client_id: UUID,
    db: SessionDep,
    settings: SettingsDep,
    _: ChallengeSlot,
    token: RegistrationToken = None,
) -> ChallengeOut:
    """Give an unproven registration a new challenge, extending it; needs its registration token.

    Counted with the proofs against the address's ``proof_per_minute``.
    """
    with writing(db):
        issued = registration.issue_challenge(
            db, str(client_id), token, challenge_ttl=timedelta(seconds=settings.challenge_ttl_s)
        )
    return ChallengeOut(
        id=issued.client.id, challenge=issued.challenge, expires_at=issued.expires_at
    )


@router.get("", responses=UNAUTHORIZED)
def list_clients(
    db: SessionDep,
    _: ViewerDep,
    status: ClientStatus | None = None,
    run_id: Annotated[
        UUID | None,
        Query(description="The simulated workers of this run instead of the registry."),
    ] = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    offset: Offset = 0,
) -> ClientPage:
    """List the registry's clients, oldest registration first (or a simulated run's workers).

    Simulated workers are identities of their run, not clients of the registry:
    they are listed only with ``run_id``.
    """
    rows = clients.list_clients(
        db,
        status=status,
        run_id=None if run_id is None else str(run_id),
        limit=limit + 1,
        offset=offset,
    )
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
