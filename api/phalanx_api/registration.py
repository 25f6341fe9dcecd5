"""Client registration: a name and an EC public key, then proof of possession.

1. ``register_client``: the client sends its public key (PEM or OpenSSH, P-256
   or P-384); it is stored as PEM under its fingerprint (unique: the same key
   twice is a conflict), status ``pending``, with a random challenge.
2. ``prove_possession``: the client returns the DER ECDSA-SHA256 signature over
   the challenge bytes. The challenge is spent by the attempt, whatever its
   outcome. A valid proof is recorded in the audit log (``client.proof``) and,
   with ``auto_approve``, approves the client.
3. ``issue_challenge``: a pending client whose challenge expired or was spent
   gets a new one.

Approving a client registered this way needs its proof on record
(:func:`key_unproven`).
"""

from __future__ import annotations

import base64
import binascii
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
from phalanx.store.types import utcnow
from phalanx_api.errors import InvalidInputError, ProofRejectedError

#: Random bytes in a challenge.
CHALLENGE_BYTES = 32
#: Audit actor of decisions made by a configured policy rather than an operator.
POLICY_ACTOR = "policy"


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
        When it stops being accepted.
    """

    client: Client
    challenge: str
    expires_at: datetime


def client_actor(client_id: str) -> str:
    """Return the audit actor of a client acting for itself."""
    return f"client:{client_id}"


def register_client(
    session: Session, *, name: str, public_key: str, challenge_ttl: timedelta
) -> IssuedChallenge:
    """Register a client by its public key and hand it a challenge.

    Parameters
    ----------
    session : Session
        The request's session.
    name : str
        The client's name.
    public_key : str
        PEM or OpenSSH text of a P-256 or P-384 public key.
    challenge_ttl : timedelta
        How long the challenge is valid.

    Returns
    -------
    IssuedChallenge
        The pending client and its challenge.

    Raises
    ------
    InvalidInputError
        When the key cannot be read or is not EC on P-256 or P-384.
    ConflictError
        When a client with this key is registered already.
    """
    try:
        key = load_public_key(public_key)
    except IdentityError as exc:
        raise InvalidInputError(str(exc), loc=("body", "public_key")) from exc
    fingerprint = public_key_fingerprint(key)
    client = clients.create_client(
        session, name=name, public_key=public_key_to_pem(key), fingerprint=fingerprint
    )
    audit.append_audit(
        session,
        actor=client_actor(client.id),
        action="client.register",
        target_type="client",
        target_id=client.id,
        details={"name": name, "fingerprint": fingerprint},
    )
    return _issue(session, client, challenge_ttl)


def issue_challenge(
    session: Session, client_id: str, *, challenge_ttl: timedelta
) -> IssuedChallenge:
    """Hand a pending client a new challenge, replacing any earlier one.

    Raises
    ------
    NotFoundError
        When no client has this id.
    ConflictError
        When the client is not pending.
    """
    client = clients.get_client(session, client_id)
    if client.status != ClientStatus.PENDING:
        raise ConflictError(
            f"client {client_id!r} is {client.status.value}; only pending clients get challenges"
        )
    return _issue(session, client, challenge_ttl)


def _issue(session: Session, client: Client, challenge_ttl: timedelta) -> IssuedChallenge:
    challenge = base64.b64encode(new_challenge(CHALLENGE_BYTES)).decode("ascii")
    expires_at = utcnow() + challenge_ttl
    clients.set_challenge(session, client.id, challenge, expires_at=expires_at)
    return IssuedChallenge(client=client, challenge=challenge, expires_at=expires_at)


def prove_possession(
    session: Session, client_id: str, signature: str, *, auto_approve: bool
) -> Client:
    """Check a client's signature over its challenge; spend the challenge either way.

    Parameters
    ----------
    session : Session
        The request's session; commit it even when this raises
        :class:`ProofRejectedError`, so the challenge stays spent.
    client_id : str
        The client.
    signature : str
        Base64 of the DER ECDSA-SHA256 signature over the decoded challenge bytes.
    auto_approve : bool
        Approve a pending client once its proof is valid.

    Returns
    -------
    Client
        The client, approved if ``auto_approve`` and it was pending.

    Raises
    ------
    NotFoundError
        When no client has this id.
    ProofRejectedError
        When there is no live challenge, the signature is not base64, or it
        does not verify.
    """
    client = clients.get_client(session, client_id)
    challenge = clients.take_challenge(session, client_id)
    if challenge is None:
        raise ProofRejectedError(
            f"client {client_id!r} has no live challenge (none issued, spent, or expired); "
            f"get a new one with POST /api/v1/clients/{client_id}/challenge"
        )
    try:
        signature_bytes = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProofRejectedError(
            "signature is not valid base64; the challenge is spent, get a new one"
        ) from exc
    key = load_public_key(client.public_key)
    if not verify_challenge(key, base64.b64decode(challenge), signature_bytes):
        raise ProofRejectedError(
            "signature does not verify against the client's public key "
            "(expected base64 of the DER ECDSA-SHA256 signature over the decoded challenge "
            "bytes); the challenge is spent, get a new one"
        )
    audit.append_audit(
        session,
        actor=client_actor(client_id),
        action="client.proof",
        target_type="client",
        target_id=client_id,
    )
    if auto_approve and client.status == ClientStatus.PENDING:
        clients.set_client_status(session, client_id, ClientStatus.APPROVED)
        audit.append_audit(
            session,
            actor=POLICY_ACTOR,
            action="client.approve",
            target_type="client",
            target_id=client_id,
            details={"from": "pending", "to": "approved", "reason": "auto-approve on proof"},
        )
    return client


def key_unproven(session: Session, client_id: str) -> bool:
    """Whether the client registered through the API and never proved it holds its key.

    Clients created otherwise (simulated workers) are trusted on creation.
    """

    def recorded(action: str) -> bool:
        entries = audit.list_audit(
            session, action=action, target_type="client", target_id=client_id, limit=1
        )
        return len(entries) > 0

    return recorded("client.register") and not recorded("client.proof")
