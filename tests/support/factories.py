"""Real objects for the API tests: settings, keys, clients, runs with rounds and events."""

from __future__ import annotations

import base64
import dataclasses
import re
import uuid
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from phalanx import identity
from phalanx.store import (
    Client,
    ClientStatus,
    DetectionCase,
    EventData,
    Role,
    RoundData,
    Severity,
    keys,
    rounds,
    runs,
)
from phalanx_api.context import app_context
from phalanx_api.main import create_app
from phalanx_api.ratelimit import RateLimits
from phalanx_api.settings import ApiSettings

with warnings.catch_warnings():  # starlette prefers httpx2; httpx is what is installed
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

__all__ = ["TestClient"]

#: Secret of a key that never existed.
GARBAGE_SECRET = "phx_" + "A" * 43
#: Who calls, in the authorization matrix.
CALLERS = ("none", "garbage", "revoked", "viewer", "operator", "admin")


def settings_for(url: str, data_dir: Path, **overrides: object) -> ApiSettings:
    """Settings of a test app: the given database, a temp data dir, fixed policies."""
    values: dict[str, object] = {
        "database_url": url,
        "data_dir": data_dir,
        "secret_key": "test-secret-key",
        "auto_approve_clients": False,
        "ban_on_confirm": True,
        "max_body_bytes": 64 * 1024,
        "challenge_ttl_s": 600,
        "session_max_age_s": 3600,
        "cookie_secure": False,
        # Every request of a test client comes from one address; the limits' own tests
        # set them low.
        "registration_per_minute": 100_000,
        "max_pending_clients": 100_000,
        "pending_per_address": 100_000,
        "login_per_minute": 100_000,
        "proof_per_minute": 100_000,
    }
    values.update(overrides)
    return ApiSettings(**values)  # type: ignore[arg-type]


class FakeClock:
    """The monotonic clock the rate limits read, moved by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def limited_app(settings: ApiSettings, clock: FakeClock, **limits: int) -> FastAPI:
    """An app whose settings take ``limits`` (e.g. ``login_per_minute=3``), on ``clock``."""
    app = create_app(settings.model_copy(update=limits))
    context = app_context(app)
    app.state.phalanx = dataclasses.replace(
        context,
        limits=RateLimits.of(
            registration_per_minute=context.settings.registration_per_minute,
            login_per_minute=context.settings.login_per_minute,
            proof_per_minute=context.settings.proof_per_minute,
            pending_per_address=context.settings.pending_per_address,
            challenge_ttl_s=context.settings.challenge_ttl_s,
            clock=clock,
        ),
    )
    return app


def bearer(secret: str) -> dict[str, str]:
    """The Authorization header of an API key."""
    return {"Authorization": f"Bearer {secret}"}


@dataclass(frozen=True)
class Keys:
    """Secrets of one live key per role, and of a revoked admin key."""

    viewer: str
    operator: str
    admin: str
    revoked: str

    def headers(self, who: str) -> dict[str, str]:
        """Authorization headers of ``who``, one of :data:`CALLERS`."""
        if who == "none":
            return {}
        if who == "garbage":
            return bearer(GARBAGE_SECRET)
        secret: str = getattr(self, who)
        return bearer(secret)


def make_keys(sessions: sessionmaker[Session]) -> Keys:
    with sessions.begin() as session:
        made = {
            role: keys.create_key(session, name=f"{role}-key", role=Role(role)).secret
            for role in ("viewer", "operator", "admin")
        }
        revoked = keys.create_key(session, name="revoked-key", role=Role.ADMIN)
        keys.revoke_key(session, revoked.key.id)
    return Keys(revoked=revoked.secret, **made)


def login_form_token(client: TestClient) -> str:
    """GET the login form (which sets its cookie); return the form's CSRF token."""
    form = client.get("/login")
    assert form.status_code == 200, form.text
    match = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
    assert match, "the login form carries a CSRF token"
    return match.group(1)


def post_login(client: TestClient, secret: str, next_: str | None = None) -> Any:
    """Log in through the form as a browser does (GET it, then POST it); return the answer."""
    data = {"api_key": secret, "csrf_token": login_form_token(client)}
    if next_ is not None:
        data["next"] = next_
    return client.post("/login", data=data, follow_redirects=False)


def public_key_text(key: identity.PrivateKey, form: str) -> str:
    """The public half of ``key`` as "pem" or "openssh" text."""
    if form == "pem":
        return identity.public_key_to_pem(key.public_key())
    return identity.public_key_to_openssh(key.public_key())


def sign_b64(key: identity.PrivateKey, challenge_b64: str) -> str:
    """Base64 of the signature over the decoded challenge, as a client sends it."""
    signature = identity.sign_challenge(key, base64.b64decode(challenge_b64))
    return base64.b64encode(signature).decode("ascii")


def unique_name(stem: str = "worker") -> str:
    """A client name no other test uses (names are unique among active clients)."""
    return f"{stem}-{uuid.uuid4().hex[:12]}"


def register(
    client: TestClient, key: identity.PrivateKey, name: str | None = None
) -> dict[str, Any]:
    """POST /clients with the key's PEM (and a unique name unless given); return the 201 body."""
    response = client.post(
        "/api/v1/clients",
        json={"name": name or unique_name(), "public_key": public_key_text(key, "pem")},
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def register_and_prove(client: TestClient, name: str | None = None) -> str:
    """Register a fresh P-256 key and prove it; return the client id."""
    key = identity.generate_private_key("P-256")
    registered = register(client, key, name)
    proof = client.post(
        f"/api/v1/clients/{registered['id']}/proof",
        json={"signature": sign_b64(key, registered["challenge"])},
    )
    assert proof.status_code == 200, proof.text
    client_id: str = registered["id"]
    return client_id


def seed_client(
    session: Session,
    name: str,
    status: ClientStatus = ClientStatus.APPROVED,
    *,
    run_id: str | None = None,
) -> str:
    """A client created directly in the store (with ``run_id``: a simulated worker); its id."""
    key = identity.generate_private_key("P-256").public_key()
    row = Client(
        name=name,
        public_key=identity.public_key_to_pem(key),
        fingerprint=identity.public_key_fingerprint(key),
        status=status,
        run_id=run_id,
    )
    session.add(row)
    session.flush()
    return row.id


def seed_run(sessions: sessionmaker[Session], name: str = "queued") -> str:
    """A queued run; return its id."""
    with sessions.begin() as session:
        return runs.create_run(session, name=name, config={"name": name}, seed=1).id


def seed_run_with_events(
    sessions: sessionmaker[Session],
    *,
    num_rounds: int = 2,
    kinds: tuple[str, ...] = ("outside_max_clique", "bad_signature"),
) -> tuple[str, list[str]]:
    """A run with recorded rounds, each with one event per kind, each kind on its own client.

    Returns
    -------
    tuple
        The run id and the client ids (one per kind, in order).
    """
    with sessions.begin() as session:
        run = runs.create_run(session, name="seeded", config={"name": "seeded"}, seed=1)
        client_ids = [seed_client(session, f"w-{kind}") for kind in kinds]
        start = datetime(2025, 1, 1, tzinfo=UTC)
        for number in range(1, num_rounds + 1):
            rounds.record_round(
                session,
                run.id,
                RoundData(
                    number=number,
                    started_at=start + timedelta(minutes=number),
                    finished_at=start + timedelta(minutes=number, seconds=30),
                    bytes_up=1000 * number,
                    bytes_down=2000 * number,
                    metrics={"accuracy": 0.5 + 0.1 * number, "loss": 1.0 / number},
                    num_flagged=len(kinds),
                ),
                [
                    EventData(
                        client_id=client_id,
                        worker=index,
                        kind=kind,
                        severity=Severity.HIGH,
                        evidence={"files": [index], "distance": 0.5},
                    )
                    for index, (kind, client_id) in enumerate(zip(kinds, client_ids, strict=True))
                ],
            )
        return run.id, client_ids


def case_ids(sessions: sessionmaker[Session], run_id: str) -> dict[str | None, int]:
    """The run's cases by client id."""
    with sessions() as session:
        rows = session.scalars(select(DetectionCase).where(DetectionCase.run_id == run_id))
        return {row.client_id: row.id for row in rows}


def record_more(sessions: sessionmaker[Session], run_id: str, client_id: str, *kinds: str) -> None:
    """Record one more round of the run with an event of each kind for the client."""
    with sessions.begin() as session:
        number = (runs.get_run(session, run_id).current_round or 0) + 1
        now = datetime(2025, 2, 1, tzinfo=UTC)
        found = [
            EventData(kind=k, severity=Severity.HIGH, worker=0, client_id=client_id, evidence={})
            for k in kinds
        ]
        rounds.record_round(
            session, run_id, RoundData(number=number, started_at=now, finished_at=now), found
        )


def launch(operator: tuple[TestClient, dict[str, str]], body: str) -> tuple[int, str]:
    """POST ``body`` (raw JSON text) to /api/v1/runs as the operator; the status and the text."""
    client, headers = operator
    answer = client.post(
        "/api/v1/runs", content=body, headers={**headers, "Content-Type": "application/json"}
    )
    return answer.status_code, answer.text
