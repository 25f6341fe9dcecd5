"""Nobody but a key's holder decides its registration; names; limits; expiry of unproven ones."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx import identity
from phalanx.store import audit, clients
from phalanx_api import registration as registration_module
from phalanx_api.errors import ProofRejectedError
from phalanx_api.paths import API_PREFIX
from phalanx_api.registration import FAILED_PROOF_AUDIT_INTERVAL, prove_possession
from phalanx_api.settings import ApiSettings
from phalanx_clients.enrollment import API_PREFIX as CLIENTS_API_PREFIX
from phalanx_clients.enrollment import REGISTRATION_TOKEN_HEADER as CLIENTS_TOKEN_HEADER
from phalanx_clients.enrollment import register as enroll
from tests.support.factories import (
    FakeClock,
    Keys,
    TestClient,
    limited_app,
    public_key_text,
    register,
    sign_b64,
    unique_name,
)

CLIENTS = "/api/v1/clients"


def test_clients_register_where_the_control_plane_serves() -> None:
    assert CLIENTS_API_PREFIX == API_PREFIX
    assert CLIENTS_TOKEN_HEADER == registration_module.REGISTRATION_TOKEN_HEADER


class CountingVerifier:
    """Wraps the signature check the registration calls, counting its calls (a spy)."""

    def __init__(self, verify: Callable[..., bool]) -> None:
        self.verify = verify
        self.calls = 0

    def __call__(self, *args: Any) -> bool:
        self.calls += 1
        return self.verify(*args)


def _prove(client: TestClient, key: identity.PrivateKey, registered: dict[str, Any]) -> Any:
    return client.post(
        f"{CLIENTS}/{registered['id']}/proof",
        json={"signature": sign_b64(key, registered["challenge"])},
    )


def _expire(sessions: sessionmaker[Session], registered: dict[str, Any]) -> None:
    """Move a registration's challenge into the past, as if its time-to-live had passed."""
    with sessions.begin() as session:
        clients.set_challenge(
            session,
            registered["id"],
            registered["challenge"],
            expires_at=datetime.now(UTC) - timedelta(seconds=1),
        )


# ------------------------------------------------- the key's holder decides


def test_a_stranger_registering_the_owners_key_first_does_not_block_the_owner(
    client: TestClient, api_keys: Keys
) -> None:
    owner_key = identity.generate_private_key("P-256")
    squatter = register(client, owner_key, unique_name("squatter"))  # public keys are public

    owner = register(client, owner_key, unique_name("owner"))
    assert owner["id"] != squatter["id"]
    assert _prove(client, owner_key, owner).status_code == 200

    viewer = api_keys.headers("viewer")
    assert client.get(f"{CLIENTS}/{owner['id']}", headers=viewer).json()["proven_at"]
    gone = client.get(f"{CLIENTS}/{squatter['id']}", headers=viewer)
    assert gone.status_code == 404  # discarded: it can never be proven now
    late = client.post(f"{CLIENTS}/{squatter['id']}/proof", json={"signature": "AAAA"})
    assert late.status_code == 404
    again = client.post(
        CLIENTS, json={"name": unique_name(), "public_key": public_key_text(owner_key, "pem")}
    )
    assert again.status_code == 409  # now the key is held by a proven client


def test_discarding_the_rival_registrations_is_audited(
    client: TestClient, sessions: sessionmaker[Session]
) -> None:
    key = identity.generate_private_key("P-256")
    rival = register(client, key)
    mine = register(client, key)
    assert _prove(client, key, mine).status_code == 200
    with sessions() as session:
        entries = audit.list_audit(session, target_type="client", target_id=rival["id"])
    assert [entry.action for entry in entries] == ["client.discard", "client.register"]
    assert entries[0].details == {"reason": f"its key was proven by client {mine['id']}"}


def test_a_stranger_cannot_ask_for_a_new_challenge_for_someone_elses_registration(
    client: TestClient,
) -> None:
    key = identity.generate_private_key("P-256")
    registered = register(client, key)
    url = f"{CLIENTS}/{registered['id']}/challenge"

    without = client.post(url)
    assert without.status_code == 403
    assert "X-Registration-Token" in without.json()["detail"]
    wrong = client.post(url, headers={"X-Registration-Token": "guessed"})
    assert wrong.status_code == 403

    assert _prove(client, key, registered).status_code == 200  # its challenge is intact


def test_a_strangers_junk_proofs_do_not_burn_the_owners_challenge(client: TestClient) -> None:
    key = identity.generate_private_key("P-384")
    registered = register(client, key)
    stranger = identity.generate_private_key("P-384")
    for signature in ("not base64!", "AAAA", sign_b64(stranger, registered["challenge"])):
        junk = client.post(f"{CLIENTS}/{registered['id']}/proof", json={"signature": signature})
        assert junk.status_code == 400
        assert "stays valid" in junk.json()["detail"]
    assert _prove(client, key, registered).status_code == 200


def test_a_refused_proof_is_audited_with_its_reason_once_a_minute_however_many_come(
    client: TestClient, sessions: sessionmaker[Session]
) -> None:
    key = identity.generate_private_key("P-256")
    registered = register(client, key)
    stranger = identity.generate_private_key("P-256")
    for _ in range(20):
        junk = client.post(
            f"{CLIENTS}/{registered['id']}/proof",
            json={"signature": sign_b64(stranger, registered["challenge"])},
        )
        assert junk.status_code == 400

    with sessions() as session:
        failed = audit.list_audit(
            session, action="client.proof_failed", target_type="client", target_id=registered["id"]
        )
        assert len(failed) == 1
        assert failed[0].actor == f"client:{registered['id']}"
        assert "does not verify" in failed[0].details["reason"]
    with sessions.begin() as session:  # a minute later, the next refusal is written again
        a_minute_on = failed[0].at + FAILED_PROOF_AUDIT_INTERVAL
        with pytest.raises(ProofRejectedError):
            prove_possession(session, registered["id"], "AAAA", auto_approve=False, now=a_minute_on)
    with sessions() as session:
        failed = audit.list_audit(
            session, action="client.proof_failed", target_type="client", target_id=registered["id"]
        )
        assert len(failed) == 2
        assert all("does not verify" in e.details["reason"] for e in failed)
    assert _prove(client, key, registered).status_code == 200  # the owner's challenge is intact


def test_an_old_client_sending_only_the_documented_fields_still_registers(
    client: TestClient,
) -> None:
    key = identity.generate_private_key("P-256")
    enrolled = enroll(str(client.base_url), key, unique_name("old"), http=client)
    assert enrolled.status == "pending"


# ---------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("name", "code_point"),
    [
        ("evil\u202egpj.exe", "U+202E"),  # right-to-left override
        ("\u2066worker\u2069", "U+2066"),  # left-to-right isolate
        ("work\u200ber", "U+200B"),  # zero-width space
        ("worker\u200e", "U+200E"),  # left-to-right mark
        ("\ufeffworker", "U+FEFF"),  # byte order mark
        ("a\u2028b", "U+2028"),  # line separator
        ("a\u2029b", "U+2029"),  # paragraph separator
        ("bell\x07", "U+0007"),  # control
        ("a\u00a0b", "U+00A0"),  # no-break space inside a name
        ("a\u3164b", "U+3164"),  # Hangul filler, renders as nothing
    ],
)
def test_a_name_with_hidden_or_reordering_characters_is_422_naming_it(
    name: str, code_point: str, client: TestClient
) -> None:
    key = identity.generate_private_key("P-256")
    response = client.post(CLIENTS, json={"name": name, "public_key": public_key_text(key, "pem")})
    assert response.status_code == 422
    body = response.json()
    assert body["errors"][0]["loc"] == ["body", "name"]
    assert code_point in body["detail"]


def test_a_name_is_trimmed_its_spaces_collapsed_and_stored_in_nfc(
    client: TestClient, api_keys: Keys
) -> None:
    stem = unique_name("caf")
    registered = register(client, identity.generate_private_key("P-256"), f"  {stem}e\u0301   n ")
    stored = client.get(f"{CLIENTS}/{registered['id']}", headers=api_keys.headers("viewer"))
    assert stored.json()["name"] == f"{stem}\u00e9 n"


def test_a_name_longer_than_100_characters_is_422(client: TestClient) -> None:
    key = identity.generate_private_key("P-256")
    response = client.post(
        CLIENTS, json={"name": "x" * 101, "public_key": public_key_text(key, "pem")}
    )
    assert response.status_code == 422
    assert "at most 100" in response.json()["detail"]


def test_a_name_an_active_client_uses_is_a_conflict_even_written_another_way(
    client: TestClient,
) -> None:
    stem = unique_name("dup")
    register(client, identity.generate_private_key("P-256"), f"{stem}\u00e9")
    other = identity.generate_private_key("P-256")
    response = client.post(
        CLIENTS, json={"name": f" {stem}e\u0301", "public_key": public_key_text(other, "pem")}
    )
    assert response.status_code == 409
    assert "used by another client" in response.json()["detail"]


def test_the_same_key_may_register_again_under_its_own_name(client: TestClient) -> None:
    key, name = identity.generate_private_key("P-256"), unique_name()
    first = register(client, key, name)
    second = register(client, key, name)  # e.g. a client whose first answer was lost
    assert second["id"] != first["id"]
    assert _prove(client, key, second).status_code == 200


def test_the_name_of_a_banned_or_expired_client_is_free(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    banned_name, expired_name = unique_name("banned"), unique_name("expired")
    key = identity.generate_private_key("P-256")
    banned = register(client, key, banned_name)
    assert _prove(client, key, banned).status_code == 200
    ban = client.post(f"{CLIENTS}/{banned['id']}/ban", headers=api_keys.headers("operator"))
    assert ban.status_code == 200
    expired = register(client, identity.generate_private_key("P-256"), expired_name)
    _expire(sessions, expired)

    register(client, identity.generate_private_key("P-256"), banned_name)
    register(client, identity.generate_private_key("P-256"), expired_name)


# ----------------------------------------------------- limits and expiry


def test_a_burst_of_registrations_from_one_address_gets_429_with_retry_after(
    fresh_settings: ApiSettings,
) -> None:
    clock = FakeClock()
    app = limited_app(fresh_settings, clock, registration_per_minute=10)
    with TestClient(app) as client:
        answers = [
            client.post(
                CLIENTS,
                json={
                    "name": unique_name(),
                    "public_key": public_key_text(identity.generate_private_key("P-256"), "pem"),
                },
            )
            for _ in range(25)
        ]
        junk = client.post(CLIENTS, json={"name": "x"})  # refused before its body is read
        statuses = [answer.status_code for answer in answers]
        assert statuses == [201] * 10 + [429] * 15
        refused = answers[-1]
        assert refused.headers["retry-after"] == "6"  # one registration every 60 / 10 s
        assert "at most 10 a minute" in refused.json()["detail"]
        assert junk.status_code == 429

        with TestClient(app, client=("192.0.2.7", 50000)) as elsewhere:  # another address
            assert register(elsewhere, identity.generate_private_key("P-256"))["id"]

        clock.advance(6)
        assert register(client, identity.generate_private_key("P-256"))["id"]
        assert client.post(CLIENTS, json={}).status_code == 429


def test_a_caller_hammering_proofs_gets_429_with_retry_after_before_any_work(
    fresh_settings: ApiSettings,
    fresh_sessions: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked = CountingVerifier(identity.verify_challenge)
    monkeypatch.setattr(registration_module, "verify_challenge", checked)
    clock = FakeClock()
    app = limited_app(fresh_settings, clock, proof_per_minute=5)
    with TestClient(app) as client:
        key = identity.generate_private_key("P-256")
        registered = register(client, key)
        url = f"{CLIENTS}/{registered['id']}/proof"
        junk = {
            "signature": sign_b64(identity.generate_private_key("P-256"), registered["challenge"])
        }
        answers = [client.post(url, json=junk) for _ in range(50)]
        assert [a.status_code for a in answers] == [400] * 5 + [429] * 45
        refused = answers[-1]
        assert refused.headers["retry-after"] == "12"  # one proof every 60 / 5 s
        assert (
            "too many proofs and challenges from this address (at most 5 a minute)"
            in (refused.json()["detail"])
        )
        assert checked.calls == 5  # the refused ones never reached a signature check
        unknown = client.post(f"{CLIENTS}/{uuid.uuid4()}/proof", content=b"{not json")
        assert unknown.status_code == 429  # neither the database nor the body was read
        shown = {"X-Registration-Token": registered["registration_token"]}
        renew = f"{CLIENTS}/{registered['id']}/challenge"
        assert client.post(renew, headers=shown).status_code == 429  # one budget for both
        assert client.post(renew, headers={"X-Registration-Token": "guessed"}).status_code == 429

        clock.advance(12)  # Retry-After later, the challenge is still there to sign
        assert _prove(client, key, registered).status_code == 200
    with fresh_sessions() as session:
        failed = audit.list_audit(
            session, action="client.proof_failed", target_type="client", target_id=registered["id"]
        )
    assert len(failed) == 1


def test_strangers_spending_a_clients_proof_budget_do_not_hold_its_registrant_back(
    fresh_settings: ApiSettings,
) -> None:
    app = limited_app(fresh_settings, FakeClock(), proof_per_minute=3)
    with TestClient(app) as client:
        key = identity.generate_private_key("P-256")
        registered = register(client, key)
        url = f"{CLIENTS}/{registered['id']}/proof"
        signature = sign_b64(key, registered["challenge"])
        statuses = []
        for i in range(8):  # each stranger from its own address, within its address's budget
            with TestClient(app, client=(f"198.51.100.{i}", 40000)) as stranger:
                statuses.append(stranger.post(url, json={"signature": "AAAA"}).status_code)
        assert statuses == [400] * 3 + [429] * 5
        with TestClient(app, client=("198.51.100.99", 40000)) as stranger:
            guessed = stranger.post(
                url, json={"signature": "AAAA"}, headers={"X-Registration-Token": "guessed"}
            )
            assert guessed.status_code == 429
            assert "registration token" in guessed.json()["detail"]

        assert client.post(url, json={"signature": signature}).status_code == 429
        shown = {"X-Registration-Token": registered["registration_token"]}
        proof = client.post(url, json={"signature": signature}, headers=shown)
        assert proof.status_code == 200
        assert proof.json() == {"id": registered["id"], "status": "pending"}


def test_phalanx_client_register_shows_its_registration_token_with_its_proof(
    client: TestClient,
) -> None:
    sent: list[httpx.Request] = []
    answers: list[httpx.Response] = []
    client.event_hooks["request"].append(sent.append)
    client.event_hooks["response"].append(answers.append)
    try:
        key = identity.generate_private_key("P-256")
        enrolled = enroll(str(client.base_url), key, unique_name("token"), http=client)
    finally:
        client.event_hooks["request"].remove(sent.append)
        client.event_hooks["response"].remove(answers.append)
    assert enrolled.status == "pending"
    registration, proof = sent
    answers[0].read()
    token = answers[0].json()["registration_token"]
    assert proof.url.path.endswith("/proof")
    assert proof.headers[CLIENTS_TOKEN_HEADER] == token
    assert "X-Registration-Token" not in registration.headers


def test_registrations_waiting_for_their_proof_are_capped(
    fresh_settings: ApiSettings, fresh_sessions: sessionmaker[Session]
) -> None:
    app = limited_app(fresh_settings, FakeClock(), max_pending_clients=3)
    with TestClient(app) as client:
        waiting = [(key, register(client, key)) for key in _keys(3)]
        key = identity.generate_private_key("P-256")
        body = {"name": unique_name(), "public_key": public_key_text(key, "pem")}
        refused = client.post(CLIENTS, json=body)
        assert refused.status_code == 429
        assert "waiting for their proof" in refused.json()["detail"]
        retry = int(refused.headers["retry-after"])
        assert 1 <= retry <= fresh_settings.challenge_ttl_s  # until the first one expires

        assert _prove(client, *waiting[0]).status_code == 200  # proven: no longer waiting
        assert client.post(CLIENTS, json=body).status_code == 201
        assert client.post(CLIENTS, json={**body, "name": unique_name()}).status_code == 429

        _expire(fresh_sessions, waiting[1][1])  # an expired one frees its place
        assert client.post(CLIENTS, json={**body, "name": unique_name()}).status_code == 201


def test_a_few_addresses_cannot_fill_the_waiting_list_for_everyone_else(
    fresh_settings: ApiSettings,
) -> None:
    clock = FakeClock()
    app = limited_app(fresh_settings, clock, max_pending_clients=30, pending_per_address=5)
    attackers = [(f"198.51.100.{i}", 40000 + i) for i in range(4)]
    held = 0
    for address in attackers:
        with TestClient(app, client=address) as attacker:
            for _ in range(20):  # as fast as the per-minute budget lets them
                answer = attacker.post(CLIENTS, json={"name": unique_name(), "public_key": _pem()})
                if answer.status_code == 201:
                    held += 1
                else:
                    assert answer.status_code == 429
                    assert "at most 5 per 600 s" in answer.json()["detail"]
    assert held == 4 * 5

    with TestClient(app, client=("192.0.2.9", 50000)) as newcomer:
        assert register(newcomer, identity.generate_private_key("P-256"))["id"]

    clock.advance(600 / 5)  # one registration's worth of the address's budget back
    with TestClient(app, client=attackers[0]) as attacker:
        body = {"name": unique_name(), "public_key": _pem()}
        assert attacker.post(CLIENTS, json=body).status_code == 201
        assert attacker.post(CLIENTS, json={**body, "name": unique_name()}).status_code == 429


def _pem() -> str:
    return public_key_text(identity.generate_private_key("P-256"), "pem")


def _keys(count: int) -> list[identity.PrivateKey]:
    return [identity.generate_private_key("P-256") for _ in range(count)]


def test_an_unproven_registration_expires_with_its_challenge_and_is_purged(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    key = identity.generate_private_key("P-256")
    stale = register(client, key)
    _expire(sessions, stale)
    viewer = api_keys.headers("viewer")
    assert client.get(f"{CLIENTS}/{stale['id']}", headers=viewer).status_code == 200

    register(client, identity.generate_private_key("P-256"))  # purges on the way

    assert client.get(f"{CLIENTS}/{stale['id']}", headers=viewer).status_code == 404
    with sessions() as session:
        entries = audit.list_audit(session, target_type="client", target_id=stale["id"])
    assert [entry.action for entry in entries] == ["client.expire", "client.register"]
    assert entries[0].actor == "policy"


def test_a_registration_an_operator_banned_is_kept_when_it_expires(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    registered = register(client, identity.generate_private_key("P-256"))
    operator = api_keys.headers("operator")
    assert client.post(f"{CLIENTS}/{registered['id']}/ban", headers=operator).status_code == 200
    _expire(sessions, registered)

    register(client, identity.generate_private_key("P-256"))

    kept = client.get(f"{CLIENTS}/{registered['id']}", headers=api_keys.headers("viewer"))
    assert kept.json()["status"] == "banned"


def test_a_forwarded_for_header_neither_spends_nor_escapes_an_address_s_proof_budget(
    fresh_settings: ApiSettings,
) -> None:
    # Red team: the app counts the connection's peer (which only uvicorn, trusting a
    # proxy by --forwarded-allow-ips, may take from X-Forwarded-For); a caller naming
    # a new address in each request is still one address, and one naming its victim's
    # address spends only its own budget.
    app = limited_app(fresh_settings, FakeClock(), proof_per_minute=2)
    victim = ("203.0.113.5", 40000)
    with TestClient(app, client=("198.51.100.1", 40000)) as stranger:
        url = f"{CLIENTS}/{uuid.uuid4()}/proof"
        statuses = [
            stranger.post(
                url, json={"signature": "AAAA"}, headers={"X-Forwarded-For": f"192.0.2.{i}"}
            ).status_code
            for i in range(4)
        ]
        assert statuses == [404, 404, 429, 429]
        spoofed = stranger.post(
            url, json={"signature": "AAAA"}, headers={"X-Forwarded-For": victim[0]}
        )
        assert spoofed.status_code == 429
    with TestClient(app, client=victim) as holder:
        key = identity.generate_private_key("P-256")
        registered = register(holder, key)
        assert _prove(holder, key, registered).status_code == 200
