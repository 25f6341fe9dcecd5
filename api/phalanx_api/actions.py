"""Operator actions: the control plane's rules, each written to the audit log.

Every function changes the store through its repositories and appends one
audit entry per change, in the caller's transaction, so an action and its
record commit together or not at all. Routes call these and nothing else to
change state.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from phalanx.config import RunConfig
from phalanx.event_kinds import bans_on_confirm
from phalanx.store import (
    Client,
    ClientStatus,
    ConflictError,
    CreatedKey,
    DetectionCase,
    DetectionEvent,
    OperatorKey,
    ReviewStatus,
    Role,
    Run,
    audit,
    cases,
    clients,
    events,
    keys,
    runs,
)
from phalanx_api.auth import Principal
from phalanx_api.errors import ApiError, InvalidInputError, PermissionDeniedError
from phalanx_api.registration import key_unproven
from phalanx_api.run_data import screened_data
from phalanx_api.schemas import storable_text


class ClientAction(StrEnum):
    """What an operator can do to a client."""

    APPROVE = "approve"
    SUSPEND = "suspend"
    BAN = "ban"
    REINSTATE = "reinstate"


#: For each action: the statuses it applies to, and the status it leads to.
CLIENT_TRANSITIONS: Mapping[ClientAction, tuple[frozenset[ClientStatus], ClientStatus]] = {
    ClientAction.APPROVE: (
        frozenset({ClientStatus.PENDING, ClientStatus.SUSPENDED}),
        ClientStatus.APPROVED,
    ),
    ClientAction.SUSPEND: (
        frozenset({ClientStatus.PENDING, ClientStatus.APPROVED}),
        ClientStatus.SUSPENDED,
    ),
    ClientAction.BAN: (
        frozenset({ClientStatus.PENDING, ClientStatus.APPROVED, ClientStatus.SUSPENDED}),
        ClientStatus.BANNED,
    ),
    ClientAction.REINSTATE: (
        frozenset({ClientStatus.SUSPENDED, ClientStatus.BANNED}),
        ClientStatus.APPROVED,
    ),
}


def _record(
    session: Session,
    actor: Principal,
    action: str,
    target_type: str,
    target_id: str,
    details: dict[str, Any] | None = None,
) -> None:
    audit.append_audit(
        session,
        actor=actor.name,
        action=action,
        target_type=target_type,
        target_id=target_id,
        details={"key_id": actor.key_id, **(details or {})},
    )


# ---------------------------------------------------------------- clients


def change_client_status(
    session: Session, client_id: str, action: ClientAction, *, actor: Principal, reason: str = ""
) -> Client:
    """Approve, suspend, ban or reinstate a client.

    Parameters
    ----------
    session : Session
        The request's session.
    client_id : str
        The client.
    action : ClientAction
        What to do; see :data:`CLIENT_TRANSITIONS` for what applies when.
    actor : Principal
        The operator.
    reason : str
        Why, for the audit log.

    Returns
    -------
    Client
        The client in its new status.

    Raises
    ------
    NotFoundError
        When no client has this id.
    ConflictError
        When the action does not apply to the client's status, or a client
        registered through the API would be approved before proving its key.
    """
    client = clients.get_client(session, client_id)
    sources, target = CLIENT_TRANSITIONS[action]
    before = client.status
    if before not in sources:
        allowed = ", ".join(sorted(status.value for status in sources))
        raise ConflictError(
            f"cannot {action.value} client {client_id!r}: it is {before.value} "
            f"({action.value} applies to {allowed})"
        )
    if target == ClientStatus.APPROVED and key_unproven(session, client_id):
        raise ConflictError(
            f"client {client_id!r} has not proven it holds its key yet "
            "(POST /api/v1/clients/{id}/proof); it cannot be approved before"
        )
    client = clients.set_client_status(session, client_id, target)
    details = {"from": before.value, "to": target.value}
    if reason:
        details["reason"] = reason
    _record(session, actor, f"client.{action.value}", "client", client_id, details)
    return client


# ------------------------------------------------------------------- runs


#: The API setting that lets a launch simulate adversaries.
ALLOW_ATTACKS_SETTING = "PHALANX_API_ALLOW_ATTACKS"


class AttackRefusedError(PermissionDeniedError):
    """A launch asked for a simulated attack that this server does not run (403).

    The refusal is itself written to the audit log, so the request's changes
    are kept.
    """

    keep_changes = True


class InvalidAttackError(InvalidInputError):
    """A launch named an attack that does not load, or parameters it rejects (422; audited)."""

    keep_changes = True


def launch_run(
    session: Session,
    config: RunConfig,
    *,
    actor: Principal,
    datasets_dir: Path,
    allow_attacks: bool = False,
    attack_plugins: Collection[str] = (),
) -> Run:
    """Queue a run; a coordinator claims it.

    Parameters
    ----------
    session : Session
        The request's session.
    config : RunConfig
        The run.
    actor : Principal
        The operator.
    datasets_dir : Path
        ``idx:`` and ``npz:`` data must lie inside it (``PHALANX_DATASETS_DIR``).
    allow_attacks : bool
        Whether this server runs simulated attacks (``PHALANX_API_ALLOW_ATTACKS``).
    attack_plugins : Collection[str]
        The ``package.module:Name`` attack references this host allows
        (``PHALANX_ATTACK_PLUGINS``).

    Raises
    ------
    InvalidInputError
        When the config holds a value the database cannot store (text with NUL
        characters, an infinite or NaN number), names data outside
        ``datasets_dir`` or data that fails its checks
        (:func:`~phalanx_api.run_data.screened_data`), or its attack does not load
        or rejects its parameters.
    PermissionDeniedError
        When the config asks for a simulated attack and the server does not
        allow them.
    """
    check_storable(config.model_dump(), loc=("body",))
    attack = config.attack
    if attack.name is not None or attack.q > 0:
        _check_attack(session, config, actor=actor, allowed=allow_attacks, plugins=attack_plugins)
    config = screened_data(config, datasets_dir)
    run = runs.create_run(
        session, name=config.name, config=config.model_dump(mode="json"), seed=config.seed
    )
    details: dict[str, Any] = {"name": config.name}
    if attack.name is not None:
        details["attack"] = {"name": attack.name, "q": attack.q}
    _record(session, actor, "run.launch", "run", run.id, details)
    return run


def _check_attack(
    session: Session,
    config: RunConfig,
    *,
    actor: Principal,
    allowed: bool,
    plugins: Collection[str],
) -> None:
    """Refuse, and audit the refusal of, an attack this server must not run."""
    attack = config.attack
    refusal: ApiError
    if not allowed:
        refusal = AttackRefusedError(
            f"simulated attacks are disabled on this server (attack.name={attack.name!r}, "
            f"attack.q={attack.q}); they are a research feature that the server enables with "
            f"{ALLOW_ATTACKS_SETTING}=true, or run them with `phalanx run`"
        )
    else:
        from phalanx.attack_plugins import AttackPluginError
        from phalanx.attacks import check_attack  # imports torch: only when attacks are asked for

        try:
            check_attack(attack, allowed=plugins)
            return
        except AttackPluginError as exc:
            refusal = InvalidAttackError(str(exc), loc=("body", "attack", exc.field))
    audit.append_audit(
        session,
        actor=actor.name,
        action="run.launch_refused",
        details={
            "key_id": actor.key_id,
            "name": config.name,
            "attack": {"name": attack.name, "q": attack.q},
            "reason": refusal.message,
        },
    )
    raise refusal


def cancel_run(session: Session, run_id: str, *, actor: Principal) -> Run:
    """Cancel a queued run, or ask the coordinator of a running one to stop between rounds.

    Raises
    ------
    NotFoundError
        When no run has this id.
    ConflictError
        When the run already succeeded or failed.
    """
    before = runs.get_run(session, run_id).status
    run = runs.request_cancel(session, run_id)
    _record(session, actor, "run.cancel", "run", run_id, {"status_before": before.value})
    return run


def check_storable(value: object, *, loc: Sequence[str | int]) -> None:
    """Check that JSON-like data holds only text and numbers the database can store.

    Raises
    ------
    InvalidInputError
        Naming the first offending field.
    """
    if isinstance(value, str):
        try:
            storable_text(value)
        except ValueError as exc:
            raise _invalid_at(loc, str(exc)) from exc
    elif isinstance(value, float) and not math.isfinite(value):
        raise _invalid_at(loc, "must be a finite number")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_storable(str(key), loc=(*loc, "<key>"))
            check_storable(item, loc=(*loc, str(key)))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_storable(item, loc=(*loc, index))


def _invalid_at(loc: Sequence[str | int], message: str) -> InvalidInputError:
    return InvalidInputError(f"{'.'.join(map(str, loc))}: {message}", loc=loc)


# ----------------------------------------------------------------- events


@dataclass(frozen=True)
class Review:
    """The outcome of a review.

    Attributes
    ----------
    event : DetectionEvent
        The reviewed event.
    client : Client or None
        Its client, in the status after the review.
    client_banned : bool
        Whether the review banned the client.
    """

    event: DetectionEvent
    client: Client | None
    client_banned: bool


#: Review status each decision leads to.
DECISIONS = {"confirm": ReviewStatus.CONFIRMED, "dismiss": ReviewStatus.DISMISSED}


def review_event(
    session: Session,
    event_id: int,
    decision: str,
    *,
    note: str,
    actor: Principal,
    ban_on_confirm: bool,
) -> Review:
    """Confirm or dismiss an open detection event; confirming may ban its client.

    Parameters
    ----------
    session : Session
        The request's session.
    event_id : int
        The event.
    decision : {"confirm", "dismiss"}
        The operator's decision.
    note : str
        Why.
    actor : Principal
        The operator.
    ban_on_confirm : bool
        Ban the event's client on confirmation (``PHALANX_BAN_ON_CONFIRM``); never for a
        fault (:func:`phalanx.event_kinds.bans_on_confirm`): a worker whose own code or
        data failed is not an adversary.

    Returns
    -------
    Review
        The event, its client and whether it was banned.

    Raises
    ------
    NotFoundError
        When no event has this id.
    ConflictError
        When the event was reviewed already.
    """
    event = events.get_event(session, event_id)
    if event.case_id is not None:  # cases before events, the order case reviews lock in
        cases.lock_cases(session, [event.case_id])
    session.refresh(event, with_for_update=True)  # two reviewers: the second one waits, then 409
    if event.review_status != ReviewStatus.OPEN:
        raise ConflictError(
            f"detection event {event_id} was already {event.review_status.value} "
            f"by {event.reviewed_by!r}"
        )
    status = DECISIONS[decision]
    event = events.review_event(session, event_id, status, reviewer=actor.name, note=note or None)
    _record(
        session, actor, "event.review", "event", str(event_id), {"decision": decision, "note": note}
    )
    if event.client_id is None:
        return Review(event=event, client=None, client_banned=False)
    client = clients.get_client(session, event.client_id)
    banned = False
    if (
        status == ReviewStatus.CONFIRMED
        and ban_on_confirm
        and bans_on_confirm(event.kind)
        and client.status != ClientStatus.BANNED
    ):
        before = client.status
        client = clients.set_client_status(session, client.id, ClientStatus.BANNED)
        details = {"from": before.value, "to": "banned", "event_id": event_id}
        _record(session, actor, "client.ban", "client", client.id, details)
        banned = True
    return Review(event=event, client=client, client_banned=banned)


# ------------------------------------------------------------------ cases


@dataclass(frozen=True)
class CaseReview:
    """The outcome of a review of one case.

    Attributes
    ----------
    case : DetectionCase
        The case, after the review.
    closed_events : int
        How many open events the review closed.
    client : Client or None
        Its client, in the status after the review.
    client_banned : bool
        Whether the review banned the client.
    muted_kinds : tuple[str, ...]
        The kinds muted by this review for the case.
    """

    case: DetectionCase
    closed_events: int
    client: Client | None
    client_banned: bool
    muted_kinds: tuple[str, ...]


def review_cases(
    session: Session,
    case_ids: Sequence[int],
    decision: str,
    *,
    note: str,
    mute: bool = False,
    actor: Principal,
    ban_on_confirm: bool,
) -> list[CaseReview]:
    """Confirm or dismiss cases: close all their open events, all cases or none.

    Every closed event is audited as ``event.review`` (as a review of that event
    alone is), each case as ``case.review``, each mute as ``case.mute`` and each ban
    as ``client.ban``.

    Parameters
    ----------
    session : Session
        The request's session.
    case_ids : Sequence[int]
        The cases, each once.
    decision : {"confirm", "dismiss"}
        The operator's decision.
    note : str
        Why; kept on the case and on each event it closes.
    mute : bool
        With ``dismiss``: also mute, for each case, the kinds it dismissed, so later
        events of those kinds in that run arrive dismissed.
    actor : Principal
        The operator.
    ban_on_confirm : bool
        Ban the client of a confirmed case (``PHALANX_BAN_ON_CONFIRM``) when one of
        the events it closes may ban (:func:`phalanx.event_kinds.bans_on_confirm`:
        never for faults alone).

    Returns
    -------
    list[CaseReview]
        One per case, in the order given.

    Raises
    ------
    InvalidInputError
        When ``mute`` comes with ``confirm``.
    NotFoundError
        Naming the ids no case has.
    ConflictError
        Naming the cases with nothing open.
    """
    if mute and decision != "dismiss":
        raise InvalidInputError("mute goes with dismiss only", loc=("body", "mute"))
    _check_case_ids(case_ids)
    closed = cases.review_cases(
        session, case_ids, DECISIONS[decision], reviewer=actor.name, note=note or None
    )
    entries = [
        {
            "actor": actor.name,
            "action": "event.review",
            "target_type": "event",
            "target_id": str(event_id),
            "details": {
                "key_id": actor.key_id,
                "decision": decision,
                "note": note,
                "case_id": item.case.id,
            },
        }
        for item in closed
        for event_id in item.event_ids
    ]
    audit.append_audit_many(session, entries)
    return [
        _after_case_review(
            session, item, decision, note=note, mute=mute, actor=actor, ban=ban_on_confirm
        )
        for item in closed
    ]


def _check_case_ids(case_ids: Sequence[int]) -> None:
    """Refuse an empty, oversized or repeating list of cases (422)."""
    loc = ("body", "case_ids")
    if not 1 <= len(case_ids) <= cases.MAX_REVIEW_CASES:
        raise InvalidInputError(
            f"case_ids: select 1 to {cases.MAX_REVIEW_CASES} cases, got {len(case_ids)}", loc=loc
        )
    repeated = sorted({i for i in case_ids if case_ids.count(i) > 1})
    if repeated:
        raise InvalidInputError(
            f"case_ids: each case may be named once; repeated: {repeated}", loc=loc
        )


def _after_case_review(
    session: Session,
    item: cases.ClosedCase,
    decision: str,
    *,
    note: str,
    mute: bool,
    actor: Principal,
    ban: bool,
) -> CaseReview:
    """Audit one reviewed case; mute its kinds or ban its client as asked."""
    found = item.case
    muted: list[str] = []
    if mute:
        muted = cases.mute_kinds(
            session, found.id, item.kinds, muted_by=actor.name, note=note or None
        )
        if muted:
            _record(
                session, actor, "case.mute", "case", str(found.id), {"kinds": muted, "note": note}
            )
    details = {"decision": decision, "note": note, "events": len(item.event_ids)}
    _record(session, actor, "case.review", "case", str(found.id), details)
    if found.client_id is None:
        return CaseReview(found, len(item.event_ids), None, False, tuple(muted))
    client = clients.get_client(session, found.client_id)
    banned = False
    if (
        decision == "confirm"
        and ban
        and any(bans_on_confirm(kind) for kind in item.kinds)
        and client.status != ClientStatus.BANNED
    ):
        before = client.status
        client = clients.set_client_status(session, client.id, ClientStatus.BANNED)
        ban_details = {"from": before.value, "to": "banned", "case_id": found.id}
        _record(session, actor, "client.ban", "client", client.id, ban_details)
        banned = True
    return CaseReview(found, len(item.event_ids), client, banned, tuple(muted))


def unmute_case(
    session: Session,
    case_id: int,
    kinds: Collection[str] | None,
    *,
    note: str,
    actor: Principal,
) -> tuple[DetectionCase, list[cases.LiftedMute]]:
    """Lift mutes of a case, audited as ``case.unmute``.

    Events already stored dismissed by a mute stay dismissed; later events of an
    unmuted kind arrive open.

    Parameters
    ----------
    session : Session
        The request's session.
    case_id : int
        The case.
    kinds : Collection[str] or None
        The kinds to unmute (each muted for the case); every muted kind when ``None``.
    note : str
        Why; kept in the audit log.
    actor : Principal
        The operator.

    Returns
    -------
    tuple[DetectionCase, list[cases.LiftedMute]]
        The case and the mutes lifted.

    Raises
    ------
    NotFoundError
        When no case has this id.
    ConflictError
        When a kind named is not muted for the case, or none is.
    """
    lifted = cases.unmute_kinds(session, case_id, kinds)
    details = {
        "kinds": [m.kind for m in lifted],
        "muted_by": {m.kind: m.muted_by for m in lifted},
        "note": note,
    }
    _record(session, actor, "case.unmute", "case", str(case_id), details)
    return cases.get_case(session, case_id), lifted


# ------------------------------------------------------------------- keys


def create_key(session: Session, *, name: str, role: Role, actor: Principal | str) -> CreatedKey:
    """Create an operator key; its secret is in the result, and nowhere else.

    Parameters
    ----------
    session : Session
        The session.
    name : str
        Whose key it is.
    role : Role
        What it may do.
    actor : Principal or str
        The admin creating it, or ``"cli"``.

    Returns
    -------
    CreatedKey
        The key and its secret.
    """
    created = keys.create_key(session, name=name, role=role)
    details = {"name": name, "role": role.value}
    if isinstance(actor, Principal):
        _record(session, actor, "key.create", "key", created.key.id, details)
    else:
        audit.append_audit(
            session,
            actor=actor,
            action="key.create",
            target_type="key",
            target_id=created.key.id,
            details=details,
        )
    return created


def revoke_key(session: Session, key_id: str, *, actor: Principal) -> OperatorKey:
    """Revoke an operator key; its sessions end too.

    Raises
    ------
    NotFoundError
        When no key has this id.
    """
    key = keys.revoke_key(session, key_id)
    _record(session, actor, "key.revoke", "key", key_id, {"name": key.name})
    return key
