"""Client registration over the HTTP API, proof of possession, and operator decisions."""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker

from phalanx import identity
from phalanx.store import ClientStatus, audit, clients
from phalanx_api.main import create_app
from phalanx_api.settings import ApiSettings
from tests.support.factories import (
    Keys,
    TestClient,
    public_key_text,
    register,
    register_and_prove,
    seed_client,
    seed_run,
    sign_b64,
)

CLIENTS = "/api/v1/clients"


@pytest.mark.parametrize("form", ["pem", "openssh"])
@pytest.mark.parametrize("curve", ["P-256", "P-384"])
def test_registration_with_a_real_key_then_proof_then_approval(
    curve: identity.Curve, form: str, client: TestClient, api_keys: Keys, api_settings: ApiSettings
) -> None:
    key = identity.generate_private_key(curve)
    sent_at = datetime.now(UTC)
    response = client.post(
        CLIENTS, json={"name": f"w-{curve}-{form}", "public_key": public_key_text(key, form)}
    )
    assert response.status_code == 201
    registered = response.json()
    assert {"id", "status", "challenge", "expires_at"} <= set(registered)  # the README's format
    expires_at = datetime.fromisoformat(registered["expires_at"])
    ttl = timedelta(seconds=api_settings.challenge_ttl_s)
    assert sent_at + ttl <= expires_at <= datetime.now(UTC) + ttl
    assert registered["status"] == "pending"
    assert registered["registration_token"]
    assert len(base64.b64decode(registered["challenge"], validate=True)) == 32

    proof = client.post(
        f"{CLIENTS}/{registered['id']}/proof",
        json={"signature": sign_b64(key, registered["challenge"])},
    )
    assert proof.status_code == 200
    assert proof.json() == {"id": registered["id"], "status": "pending"}

    approved = client.post(
        f"{CLIENTS}/{registered['id']}/approve", headers=api_keys.headers("operator")
    )
    assert approved.status_code == 200
    stored = approved.json()
    assert stored["status"] == "approved"
    assert stored["fingerprint"] == identity.public_key_fingerprint(key.public_key())
    assert stored["public_key"] == identity.public_key_to_pem(key.public_key())


def test_a_proven_key_registered_again_is_a_conflict_whatever_its_form(
    client: TestClient,
) -> None:
    key = identity.generate_private_key("P-256")
    registered = register(client, key, "first")
    proof = client.post(
        f"{CLIENTS}/{registered['id']}/proof",
        json={"signature": sign_b64(key, registered["challenge"])},
    )
    assert proof.status_code == 200
    again = client.post(
        CLIENTS, json={"name": "second", "public_key": public_key_text(key, "openssh")}
    )
    assert again.status_code == 409
    assert "registered already" in again.json()["detail"]


@pytest.mark.parametrize(
    ("public_key", "fragment"),
    [
        ("not a key", "cannot load public key"),
        ("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----", "cannot load public key"),
        ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl", ""),
        ("clé publique", "ASCII"),
    ],
)
def test_an_unusable_public_key_is_422_naming_the_field(
    public_key: str, fragment: str, client: TestClient
) -> None:
    response = client.post(CLIENTS, json={"name": "w", "public_key": public_key})
    assert response.status_code == 422
    body = response.json()
    assert body["errors"][0]["loc"] == ["body", "public_key"]
    assert fragment in body["detail"]


def test_a_p521_key_is_refused(client: TestClient) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP521R1())
    response = client.post(
        CLIENTS, json={"name": "w", "public_key": identity.public_key_to_pem(key.public_key())}
    )
    assert response.status_code == 422
    assert "P-256 or P-384" in response.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [
        {"name": "", "public_key": "x"},
        {"name": "   ", "public_key": "x"},
        {"name": "w\x00", "public_key": "x"},
        {"name": "x" * 201, "public_key": "x"},
        {"name": "w"},
        {"name": "w", "public_key": "x", "extra": 1},
        {"name": "w", "public_key": "x" * 9000},
    ],
)
def test_a_malformed_registration_is_422(body: dict[str, Any], client: TestClient) -> None:
    response = client.post(CLIENTS, json=body)
    assert response.status_code == 422
    assert response.json()["detail"]


def test_a_wrong_signature_is_rejected_and_leaves_the_challenge_to_its_holder(
    client: TestClient,
) -> None:
    key = identity.generate_private_key("P-256")
    registered = register(client, key)
    impostor = identity.generate_private_key("P-256")
    wrong = client.post(
        f"{CLIENTS}/{registered['id']}/proof",
        json={"signature": sign_b64(impostor, registered["challenge"])},
    )
    assert wrong.status_code == 400
    assert "does not verify" in wrong.json()["detail"]
    right = client.post(
        f"{CLIENTS}/{registered['id']}/proof",
        json={"signature": sign_b64(key, registered["challenge"])},
    )
    assert right.status_code == 200


def test_a_challenge_is_used_once(client: TestClient) -> None:
    key = identity.generate_private_key("P-384")
    registered = register(client, key)
    proof = {"signature": sign_b64(key, registered["challenge"])}
    assert client.post(f"{CLIENTS}/{registered['id']}/proof", json=proof).status_code == 200
    replay = client.post(f"{CLIENTS}/{registered['id']}/proof", json=proof)
    assert replay.status_code == 400
    assert "proven its key already" in replay.json()["detail"]


@pytest.mark.parametrize(
    "signature", ["not base64!", "AAAA", base64.b64encode(b"\x30" * 72).decode()]
)
def test_a_malformed_signature_is_400(signature: str, client: TestClient) -> None:
    registered = register(client, identity.generate_private_key("P-256"))
    response = client.post(f"{CLIENTS}/{registered['id']}/proof", json={"signature": signature})
    assert response.status_code == 400
    assert response.json()["detail"]


def test_a_new_challenge_replaces_the_old_one_for_the_registrant(client: TestClient) -> None:
    key = identity.generate_private_key("P-256")
    registered = register(client, key)
    fresh = client.post(
        f"{CLIENTS}/{registered['id']}/challenge",
        headers={"X-Registration-Token": registered["registration_token"]},
    )
    assert fresh.status_code == 201
    assert fresh.json()["challenge"] != registered["challenge"]
    old = client.post(
        f"{CLIENTS}/{registered['id']}/proof",
        json={"signature": sign_b64(key, registered["challenge"])},
    )
    assert old.status_code == 400
    proof = client.post(
        f"{CLIENTS}/{registered['id']}/proof",
        json={"signature": sign_b64(key, fresh.json()["challenge"])},
    )
    assert proof.status_code == 200


def test_an_expired_registration_is_refused_and_registering_again_works(
    client: TestClient, sessions: sessionmaker[Session]
) -> None:
    key = identity.generate_private_key("P-256")
    registered = register(client, key, "late-worker")
    with sessions.begin() as session:
        clients.set_challenge(
            session,
            registered["id"],
            registered["challenge"],
            expires_at=datetime.now(UTC) - timedelta(seconds=1),
        )
    expired = client.post(
        f"{CLIENTS}/{registered['id']}/proof",
        json={"signature": sign_b64(key, registered["challenge"])},
    )
    assert expired.status_code == 400
    assert "register again" in expired.json()["detail"]
    renewal = client.post(
        f"{CLIENTS}/{registered['id']}/challenge",
        headers={"X-Registration-Token": registered["registration_token"]},
    )
    assert renewal.status_code == 409
    assert "register again" in renewal.json()["detail"]

    again = register(client, key, "late-worker")  # same key, same name: the old one expired
    proof = client.post(
        f"{CLIENTS}/{again['id']}/proof", json={"signature": sign_b64(key, again["challenge"])}
    )
    assert proof.status_code == 200


def test_a_proof_for_an_unknown_client_is_404(client: TestClient) -> None:
    response = client.post(
        f"{CLIENTS}/00000000-0000-4000-8000-000000000000/proof", json={"signature": "AAAA"}
    )
    assert response.status_code == 404
    assert "not found" in response.json()["detail"]


@pytest.mark.parametrize("client_id", ["nope", "1", "00000000-0000-4000-8000-00000000000"])
def test_a_malformed_client_id_is_422(client_id: str, client: TestClient, api_keys: Keys) -> None:
    response = client.get(f"{CLIENTS}/{client_id}", headers=api_keys.headers("viewer"))
    assert response.status_code == 422
    assert "client_id" in response.json()["detail"]


def test_auto_approve_approves_on_a_valid_proof(api_settings: ApiSettings) -> None:
    app = create_app(api_settings.model_copy(update={"auto_approve_clients": True}))
    with TestClient(app) as client:
        key = identity.generate_private_key("P-256")
        registered = register(client, key)
        proof = client.post(
            f"{CLIENTS}/{registered['id']}/proof",
            json={"signature": sign_b64(key, registered["challenge"])},
        )
    assert proof.json() == {"id": registered["id"], "status": "approved"}


def test_approval_needs_the_proof_first(client: TestClient, api_keys: Keys) -> None:
    registered = register(client, identity.generate_private_key("P-256"))
    response = client.post(
        f"{CLIENTS}/{registered['id']}/approve", headers=api_keys.headers("operator")
    )
    assert response.status_code == 409
    assert "not proven" in response.json()["detail"]


def test_status_changes_follow_the_life_cycle_and_are_audited(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    client_id = register_and_prove(client)
    operator = api_keys.headers("operator")

    def act(action: str, **body: Any) -> Any:
        return client.post(f"{CLIENTS}/{client_id}/{action}", headers=operator, json=body or None)

    assert act("suspend").json()["status"] == "suspended"
    assert act("suspend").status_code == 409  # already suspended
    assert act("approve").json()["status"] == "approved"
    assert act("ban", reason="sent reversed gradients").json()["status"] == "banned"
    refused = act("approve")
    assert refused.status_code == 409
    assert "banned" in refused.json()["detail"]
    assert act("reinstate").json()["status"] == "approved"
    assert act("reinstate").status_code == 409

    with sessions() as session:
        entries = audit.list_audit(session, target_type="client", target_id=client_id)
    actions = [entry.action for entry in reversed(entries)]
    assert actions == [
        "client.register",
        "client.proof",
        "client.suspend",
        "client.approve",
        "client.ban",
        "client.reinstate",
    ]
    ban = next(entry for entry in entries if entry.action == "client.ban")
    assert ban.actor == "operator-key"
    assert ban.details is not None
    assert ban.details["reason"] == "sent reversed gradients"
    assert ban.details["from"] == "approved"


def test_a_banned_client_stays_banned_after_a_restart(
    fresh_app: FastAPI, fresh_settings: ApiSettings, fresh_keys: Keys
) -> None:
    api_keys = fresh_keys
    with TestClient(fresh_app) as client:
        client_id = register_and_prove(client)
        banned = client.post(f"{CLIENTS}/{client_id}/ban", headers=api_keys.headers("operator"))
        assert banned.status_code == 200
    restarted = create_app(fresh_settings)
    with TestClient(restarted) as client:
        again = client.get(f"{CLIENTS}/{client_id}", headers=api_keys.headers("viewer"))
    assert again.json()["status"] == "banned"


def test_listing_filters_by_status_and_pages(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    client, api_keys = fresh_client, fresh_keys
    with fresh_sessions.begin() as session:
        for index in range(5):
            seed_client(session, f"approved-{index}", ClientStatus.APPROVED)
        seed_client(session, "the-banned-one", ClientStatus.BANNED)
    viewer = api_keys.headers("viewer")
    banned = client.get(CLIENTS, params={"status": "banned"}, headers=viewer).json()
    assert [item["name"] for item in banned["items"]] == ["the-banned-one"]

    seen: list[str] = []
    params: dict[str, Any] = {"status": "approved", "limit": 2}
    while True:
        page = client.get(CLIENTS, params=params, headers=viewer).json()
        seen += [item["name"] for item in page["items"]]
        if page["next_offset"] is None:
            break
        params["offset"] = page["next_offset"]
    assert seen == [f"approved-{index}" for index in range(5)]


def test_simulated_workers_are_listed_with_their_run_never_in_the_registry(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    run_id = seed_run(fresh_sessions, name="quick")
    with fresh_sessions.begin() as session:
        real = seed_client(session, "lab-machine")
        workers = [seed_client(session, f"quick/worker-{w}", run_id=run_id) for w in range(3)]
    viewer = fresh_keys.headers("viewer")

    registry = fresh_client.get(CLIENTS, headers=viewer).json()["items"]
    of_run = fresh_client.get(CLIENTS, params={"run_id": run_id}, headers=viewer).json()["items"]
    one = fresh_client.get(f"{CLIENTS}/{workers[0]}", headers=viewer).json()

    assert [(c["id"], c["run_id"]) for c in registry] == [(real, None)]
    assert [c["id"] for c in of_run] == workers
    assert one["run_id"] == run_id
    other = fresh_client.get(CLIENTS, params={"run_id": str(uuid.uuid4())}, headers=viewer)
    assert other.status_code == 200 and other.json()["items"] == []


@pytest.mark.parametrize(
    "params",
    [{"limit": 0}, {"limit": 501}, {"offset": -1}, {"status": "x"}, {"run_id": "1 OR 1=1"}],
)
def test_bad_listing_parameters_are_422(
    params: dict[str, Any], client: TestClient, api_keys: Keys
) -> None:
    response = client.get(CLIENTS, params=params, headers=api_keys.headers("viewer"))
    assert response.status_code == 422


def test_a_flower_node_id_beyond_int64_is_text(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        client_id = seed_client(session, "big-node")
        clients.touch_client(session, client_id, flower_node_id=2**64 - 1)
    body = client.get(f"{CLIENTS}/{client_id}", headers=api_keys.headers("viewer")).json()
    assert body["flower_node_id"] == str(2**64 - 1)
