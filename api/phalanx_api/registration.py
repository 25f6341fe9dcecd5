"""Client registration: a name and an EC public key, then proof of possession.

Nobody but a key's holder decides that key's registration:

1. ``register_client``: the client sends its name and public key (PEM or
   OpenSSH, P-256 or P-384). It is stored as PEM, as a pending, *unproven*
   registration with a random challenge and a registration token (only the
   token's SHA-256 is kept). The registration expires with its challenge;
   expired ones are purged when the next client registers. A key that a proven
   client holds is a conflict; a key that only unproven registrations hold is
   not (anyone can send someone else's public key: it cannot keep the holder
   out). A name that an active client with another key uses is a conflict. At
   most ``max_pending`` unproven registrations wait at once.
2. ``prove_possession``: the client returns the DER ECDSA-SHA256 signature over
   the challenge bytes. A valid proof spends the challenge, marks the client
   proven, discards the key's other unproven registrations (they can never be
   proven now), is recorded in the audit log (``client.proof``) and, with
   ``auto_approve``, approves the client. A wrong proof is refused and changes
   nothing: only the key's holder can spend a challenge, so a stranger's junk
   proof cannot burn it. The refusal is audited (``client.proof_failed``, with
   its reason; at most once a minute per client, so junk cannot flood the log).
3. ``issue_challenge``: the registrant, showing its registration token, gets a
   new challenge, which also extends its registration.

Approving a client needs its proof on record (:func:`key_unproven`).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from phalanx.identity import (
    IdentityError,
    load_public_key,
    new_challenge,
    public_key_fingerprint,
    public_key_to_pem,
    verify_challenge,
)
from phalanx.store import Client, ClientStatus, ConflictError, audit, clients
from phalanx.store.keys import hash_secret
from phalanx.store.types import utcnow
from phalanx_api.errors import (
    InvalidInputError,
    PermissionDeniedError,
    ProofRejectedError,
    RateLimitedError,
)

#: Random bytes in a challenge.
CHALLENGE_BYTES = 32
#: Audit actor of decisions made by a configured policy rather than an operator.
POLICY_ACTOR = "policy"
#: Refused proofs of one client audited at most once in this interval.
FAILED_PROOF_AUDIT_INTERVAL = timedelta(minutes=1)
#: Header in which a registrant shows its registration token.
REGISTRATION_TOKEN_HEADER = "X-Registration-Token"


@dataclass(frozen=True)
class IssuedChallenge:
    """A challenge handed to a client.

    Attributes
    ----------
    client : Client
        The client that must sign it.
    challenge : str
        Base64 of the random bytes to sign.
    expires_at : datetime
        When it stops being accepted (and an unproven registration expires).
    """

    client: Client
    challenge: str
    expires_at: datetime


@dataclass(frozen=True)
class Registration(IssuedChallenge):
    """A new registration: its first challenge, and the registrant's token.

    Attributes
    ----------
    registration_token : str
        Handed out this once; only its SHA-256 is stored.
    """

    registration_token: str


def client_actor(client_id: str) -> str:
    """Return the audit actor of a client acting for itself."""
    return f"client:{client_id}"


def register_client(
    session: Session,
    *,
    name: str,
    public_key: str,
    challenge_ttl: timedelta,
    max_pending: int,
    now: datetime | None = None,
) -> Registration:
    """Register a client by its public key and hand it a challenge and a registration token.

    Parameters
    ----------
    session : Session
        The request's session.
    name : str
        The client's name, already checked by :func:`phalanx_api.names.client_name`.
    public_key : str
        PEM or OpenSSH text of a P-256 or P-384 public key.
    challenge_ttl : timedelta
        How long the challenge, and the unproven registration, is valid.
    max_pending : int
        Most unproven registrations waiting at once.
    now : datetime, optional
        The current time; defaults to UTC now.

    Returns
    -------
    Registration
        The pending client, its challenge and its registration token.

    Raises
    ------
    InvalidInputError
        When the key cannot be read or is not EC on P-256 or P-384.
    ConflictError
        When a proven client holds this key, or an active client with another
        key has this name.
    RateLimitedError
        When ``max_pending`` unproven registrations wait already.
    """
    try:
        key = load_public_key(public_key)
    except IdentityError as exc:
        raise InvalidInputError(str(exc), loc=("body", "public_key")) from exc
    fingerprint = public_key_fingerprint(key)
    now = now or utcnow()
    clients.lock_registrations(session)
    expired = clients.purge_expired_registrations(session, now=now)
    if expired:
        audit.append_audit_for_each(
            session,
            actor=POLICY_ACTOR,
            action="client.expire",
            target_type="client",
            target_ids=expired,
            details={"reason": "registration expired before its key was proven"},
            now=now,
        )
    if clients.find_client_by_fingerprint(session, fingerprint) is not None:
        raise ConflictError(f"a client with fingerprint {fingerprint!r} is registered already")
    if clients.name_in_use(session, name, other_than=fingerprint, now=now):
        raise ConflictError(
            f"the name {name!r} is used by another client; register under another name"
        )
    pending = clients.pending_registrations(session, now=now)
    if pending.count >= max_pending:
        wait = (pending.next_expiry - now).total_seconds() if pending.next_expiry else 1.0
        raise RateLimitedError(
            f"{pending.count} registrations are waiting for their proof, the most this server "
            "accepts at once; retry when the first of them expires",
            retry_after_s=wait,
        )
    challenge, token = _new_challenge(), secrets.token_urlsafe(32)
    expires_at = now + challenge_ttl
    client = clients.create_registration(
        session,
        name=name,
        public_key=public_key_to_pem(key),
        fingerprint=fingerprint,
        challenge=challenge,
        expires_at=expires_at,
        token_hash=hash_secret(token),
        now=now,
    )
    audit.append_audit(
        session,
        actor=client_actor(client.id),
        action="client.register",
        target_type="client",
        target_id=client.id,
        details={"name": name, "fingerprint": fingerprint},
        now=now,
    )
    return Registration(
        client=client, challenge=challenge, expires_at=expires_at, registration_token=token
    )


def issue_challenge(
    session: Session,
    client_id: str,
    registration_token: str | None,
    *,
    challenge_ttl: timedelta,
    now: datetime | None = None,
) -> IssuedChallenge:
    """Hand an unproven registration a new challenge, replacing the earlier one.

    The new challenge extends the registration by ``challenge_ttl``.

    Raises
    ------
    NotFoundError
        When no client has this id.
    PermissionDeniedError
        When ``registration_token`` is not this registration's token.
    ConflictError
        When the client is proven already, no longer pending, or its
        registration expired.
    """
    client = clients.get_client(session, client_id)
    if not _holds_token(client, registration_token):
        raise PermissionDeniedError(
            "only the registrant may ask for a new challenge: send the registration_token "
            f"of the registration's answer in the {REGISTRATION_TOKEN_HEADER} header "
            "(or register again)"
        )
    clients.lock_registrations(session)
    client = clients.lock_client(session, client_id)
    if client.proven_at is not None or client.status != ClientStatus.PENDING:
        raise ConflictError(
            f"client {client_id!r} is {client.status.value} and "
            f"{'proven' if client.proven_at else 'unproven'}; only a pending registration "
            "that has not proven its key gets challenges"
        )
    now = now or utcnow()
    if client.challenge_expires_at is None or client.challenge_expires_at <= now:
        raise ConflictError(
            f"the registration of client {client_id!r} expired before its key was proven; "
            "register again"
        )
    challenge, expires_at = _new_challenge(), now + challenge_ttl
    clients.set_challenge(session, client_id, challenge, expires_at=expires_at)
    return IssuedChallenge(client=client, challenge=challenge, expires_at=expires_at)


def is_registrant(session: Session, client_id: str, registration_token: str | None) -> bool:
    """Return whether ``registration_token`` is the registration token of client ``client_id``.

    ``False`` when no token is given, no client has this id, or the client has no
    token any more (its key is proven).
    """
    if not registration_token:
        return False
    client = session.get(Client, client_id)
    return client is not None and _holds_token(client, registration_token)


def _holds_token(client: Client, registration_token: str | None) -> bool:
    expected = client.registration_token_hash
    return (
        expected is not None
        and bool(registration_token)
        and hmac.compare_digest(expected, hash_secret(registration_token or ""))
    )


def _new_challenge() -> str:
    return base64.b64encode(new_challenge(CHALLENGE_BYTES)).decode("ascii")


def prove_possession(
    session: Session,
    client_id: str,
    signature: str,
    *,
    auto_approve: bool,
    now: datetime | None = None,
) -> Client:
    """Check a client's signature over its challenge; a valid one proves the client.

    Parameters
    ----------
    session : Session
        The request's session.
    client_id : str
        The client.
    signature : str
        Base64 of the DER ECDSA-SHA256 signature over the decoded challenge bytes.
    auto_approve : bool
        Approve a pending client once its proof is valid.
    now : datetime, optional
        The current time; defaults to UTC now.

    Returns
    -------
    Client
        The client, proven, and approved if ``auto_approve`` and it was pending.

    Raises
    ------
    NotFoundError
        When no client has this id.
    ProofRejectedError
        When there is no live challenge, the signature is not base64, or it
        does not verify; nothing is changed then but the audit log
        (``client.proof_failed``, at most once a minute per client).
    ConflictError
        When another registration of the same key was proven first.
    """
    now = now or utcnow()
    client = clients.get_client(session, client_id)
    try:
        _check_proof(session, client, signature, now=now)
    except ProofRejectedError as err:
        _audit_failed_proof(session, client_id, str(err), now=now)
        raise
    clients.mark_proven(session, client_id, now=now)
    discarded = clients.discard_rival_registrations(session, client.fingerprint, keep=client_id)
    audit.append_audit(
        session,
        actor=client_actor(client_id),
        action="client.proof",
        target_type="client",
        target_id=client_id,
        now=now,
    )
    if discarded:
        audit.append_audit_for_each(
            session,
            actor=POLICY_ACTOR,
            action="client.discard",
            target_type="client",
            target_ids=discarded,
            details={"reason": f"its key was proven by client {client_id}"},
            now=now,
        )
    if auto_approve and client.status == ClientStatus.PENDING:
        clients.set_client_status(session, client_id, ClientStatus.APPROVED, now=now)
        audit.append_audit(
            session,
            actor=POLICY_ACTOR,
            action="client.approve",
            target_type="client",
            target_id=client_id,
            details={"from": "pending", "to": "approved", "reason": "auto-approve on proof"},
            now=now,
        )
    return client


def _audit_failed_proof(session: Session, client_id: str, reason: str, *, now: datetime) -> None:
    """Audit a refused proof as ``client.proof_failed``, at most once a minute per client.

    Anyone may post a proof for any client id, so the log keeps the first refusal of
    each minute and its reason, never one row per junk request.
    """
    (last,) = audit.list_audit(
        session,
        action="client.proof_failed",
        target_type="client",
        target_id=client_id,
        limit=1,
    ) or (None,)
    if last is not None and now - last.at < FAILED_PROOF_AUDIT_INTERVAL:
        return
    audit.append_audit(
        session,
        actor=client_actor(client_id),
        action="client.proof_failed",
        target_type="client",
        target_id=client_id,
        details={"reason": reason},
        now=now,
    )


def _check_proof(session: Session, client: Client, signature: str, *, now: datetime) -> None:
    """Refuse a proof that is not a valid signature over the client's live challenge.

    Raises
    ------
    ProofRejectedError
        Saying why; the client is left as it was (locked, when the checks got that far).
    """
    client_id = client.id
    challenge = clients.live_challenge(session, client_id, now=now)
    if challenge is None:
        if client.proven_at is not None:
            raise ProofRejectedError(
                f"client {client_id!r} has proven its key already; there is nothing to sign"
            )
        raise ProofRejectedError(
            f"client {client_id!r} has no live challenge (it expired): register again, or "
            f"ask for a new one in time with POST /api/v1/clients/{client_id}/challenge "
            f"and the registration's {REGISTRATION_TOKEN_HEADER}"
        )
    try:
        signature_bytes = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProofRejectedError(
            "signature is not valid base64; the challenge stays valid until it expires"
        ) from exc
    key = load_public_key(client.public_key)
    if not verify_challenge(key, base64.b64decode(challenge), signature_bytes):
        raise ProofRejectedError(
            "signature does not verify against the client's public key "
            "(expected base64 of the DER ECDSA-SHA256 signature over the decoded challenge "
            "bytes); the challenge stays valid until it expires"
        )
    # Registrations, proofs and new challenges take this lock first, then rows: no deadlock.
    clients.lock_registrations(session)
    if clients.lock_client(session, client_id).challenge != challenge:
        raise ProofRejectedError(
            "the challenge changed while the proof was checked (a new one was issued, or "
            "another proof came first); sign the current challenge"
        )


def key_unproven(session: Session, client_id: str) -> bool:
    """Whether the client registered through the API and never proved it holds its key.

    Clients created otherwise (simulated workers) are trusted on creation.

    Raises
    ------
    NotFoundError
        When no client has this id.
    """
    return clients.get_client(session, client_id).proven_at is None
