"""The authorization matrix: every caller against every endpoint that needs a key.

Callers: no credentials, a garbage key, a revoked admin key, and a live key of each
role. Each case gets fresh target objects, so an allowed caller's request succeeds
with the endpoint's own success status.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import ClientStatus, Role, keys
from phalanx_api.auth import role_allows
from tests.support.configs import small_config
from tests.support.factories import (
    CALLERS,
    Keys,
    TestClient,
    seed_client,
    seed_run,
    seed_run_with_events,
)

Sessions = sessionmaker[Session]


@dataclass(frozen=True)
class Endpoint:
    """A request that needs ``role``, built on fresh targets."""

    method: str
    path: str
    role: Role
    success: int
    target: Callable[[Sessions], str] | None = None
    body: dict[str, Any] | None = None
    #: The body field that lists the target's id (a bulk request), if any.
    ids_field: str | None = None

    def request(self, sessions: Sessions) -> tuple[str, dict[str, Any] | None]:
        """Return the path and the body, on a fresh target."""
        if self.target is None:
            return self.path, self.body
        target = self.target(sessions)
        if self.ids_field is not None:
            return self.path, {**(self.body or {}), self.ids_field: [int(target)]}
        return self.path.format(id=target), self.body


def _client_in(status: ClientStatus) -> Callable[[Sessions], str]:
    def make(sessions: Sessions) -> str:
        with sessions.begin() as session:
            return seed_client(session, f"target-{status.value}", status)

    return make


def _open_event(sessions: Sessions) -> str:
    run_id, _ = seed_run_with_events(sessions, num_rounds=1, kinds=("outside_max_clique",))
    with sessions() as session:
        from phalanx.store import EventFilter, events

        return str(events.list_events(session, EventFilter(run_id=run_id)).items[0].id)


def _open_case(sessions: Sessions) -> str:
    run_id, _ = seed_run_with_events(sessions, num_rounds=2, kinds=("outside_max_clique",))
    with sessions() as session:
        from phalanx.store import CaseFilter, cases

        return str(cases.list_cases(session, CaseFilter(run_id=run_id)).items[0].id)


def _muted_case(sessions: Sessions) -> str:
    case_id = int(_open_case(sessions))
    with sessions.begin() as session:
        from phalanx.store import ReviewStatus, cases

        cases.review_cases(session, [case_id], ReviewStatus.DISMISSED, reviewer="matrix")
        cases.mute_kinds(session, case_id, ["outside_max_clique"], muted_by="matrix")
    return str(case_id)


def _run_with_a_round(sessions: Sessions) -> str:
    run_id, _ = seed_run_with_events(sessions, num_rounds=1, kinds=())
    return run_id


def _live_key(sessions: Sessions) -> str:
    with sessions.begin() as session:
        return keys.create_key(session, name="target", role=Role.VIEWER).key.id


RUN_BODY = small_config(attack={"name": None, "q": 0}).model_dump(mode="json")

MUTATING = {
    "approve client": Endpoint(
        "POST", "/api/v1/clients/{id}/approve", Role.OPERATOR, 200, _client_in(ClientStatus.PENDING)
    ),
    "suspend client": Endpoint(
        "POST",
        "/api/v1/clients/{id}/suspend",
        Role.OPERATOR,
        200,
        _client_in(ClientStatus.APPROVED),
    ),
    "ban client": Endpoint(
        "POST", "/api/v1/clients/{id}/ban", Role.OPERATOR, 200, _client_in(ClientStatus.APPROVED)
    ),
    "reinstate client": Endpoint(
        "POST",
        "/api/v1/clients/{id}/reinstate",
        Role.OPERATOR,
        200,
        _client_in(ClientStatus.BANNED),
    ),
    "launch run": Endpoint("POST", "/api/v1/runs", Role.OPERATOR, 202, body=RUN_BODY),
    "cancel run": Endpoint("POST", "/api/v1/runs/{id}/cancel", Role.OPERATOR, 202, seed_run),
    "review event": Endpoint(
        "POST",
        "/api/v1/events/{id}/review",
        Role.OPERATOR,
        200,
        _open_event,
        {"decision": "confirm", "note": "matrix"},
    ),
    "review case": Endpoint(
        "POST",
        "/api/v1/cases/{id}/review",
        Role.OPERATOR,
        200,
        _open_case,
        {"decision": "confirm", "note": "matrix"},
    ),
    "review cases": Endpoint(
        "POST",
        "/api/v1/cases/review",
        Role.OPERATOR,
        200,
        _open_case,
        {"decision": "dismiss"},
        ids_field="case_ids",
    ),
    "unmute case": Endpoint(
        "POST", "/api/v1/cases/{id}/unmute", Role.OPERATOR, 200, _muted_case, {"note": "matrix"}
    ),
    "create key": Endpoint(
        "POST", "/api/v1/keys", Role.ADMIN, 201, body={"name": "new", "role": "viewer"}
    ),
    "revoke key": Endpoint("POST", "/api/v1/keys/{id}/revoke", Role.ADMIN, 200, _live_key),
}

READING = {
    "list clients": Endpoint("GET", "/api/v1/clients", Role.VIEWER, 200),
    "get client": Endpoint(
        "GET", "/api/v1/clients/{id}", Role.VIEWER, 200, _client_in(ClientStatus.APPROVED)
    ),
    "list runs": Endpoint("GET", "/api/v1/runs", Role.VIEWER, 200),
    "get run": Endpoint("GET", "/api/v1/runs/{id}", Role.VIEWER, 200, seed_run),
    "list rounds": Endpoint("GET", "/api/v1/runs/{id}/rounds", Role.VIEWER, 200, seed_run),
    "get round": Endpoint("GET", "/api/v1/runs/{id}/rounds/1", Role.VIEWER, 200, _run_with_a_round),
    "list response times": Endpoint(
        "GET", "/api/v1/runs/{id}/responses", Role.VIEWER, 200, _run_with_a_round
    ),
    "list events": Endpoint("GET", "/api/v1/events", Role.VIEWER, 200),
    "list events with evidence": Endpoint("GET", "/api/v1/events?evidence=full", Role.VIEWER, 200),
    "get event": Endpoint("GET", "/api/v1/events/{id}", Role.VIEWER, 200, _open_event),
    "list cases": Endpoint("GET", "/api/v1/cases?sort=count", Role.VIEWER, 200),
    "get case": Endpoint("GET", "/api/v1/cases/{id}", Role.VIEWER, 200, _open_case),
    "list audit": Endpoint("GET", "/api/v1/audit", Role.VIEWER, 200),
    "list keys": Endpoint("GET", "/api/v1/keys", Role.ADMIN, 200),
}


def _expected(endpoint: Endpoint, who: str) -> int:
    if who in ("none", "garbage", "revoked"):
        return 401
    return endpoint.success if role_allows(Role(who), endpoint.role) else 403


def _call(
    client: TestClient, sessions: Sessions, api_keys: Keys, endpoint: Endpoint, who: str
) -> Any:
    path, body = endpoint.request(sessions)
    return client.request(endpoint.method, path, json=body, headers=api_keys.headers(who))


@pytest.mark.parametrize("who", CALLERS)
@pytest.mark.parametrize("name", MUTATING)
def test_mutating_endpoint_answers_by_role(
    name: str,
    who: str,
    client: TestClient,
    sessions: Sessions,
    api_keys: Keys,
) -> None:
    endpoint = MUTATING[name]
    response = _call(client, sessions, api_keys, endpoint, who)
    assert response.status_code == _expected(endpoint, who), response.text
    if response.status_code >= 400:
        assert response.json()["detail"]
    if response.status_code == 401:
        assert response.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize("who", CALLERS)
@pytest.mark.parametrize("name", READING)
def test_reading_endpoint_answers_by_role(
    name: str,
    who: str,
    client: TestClient,
    sessions: Sessions,
    api_keys: Keys,
) -> None:
    endpoint = READING[name]
    response = _call(client, sessions, api_keys, endpoint, who)
    assert response.status_code == _expected(endpoint, who), response.text


def test_denied_action_changes_nothing(
    client: TestClient, sessions: Sessions, api_keys: Keys
) -> None:
    client_id = _client_in(ClientStatus.APPROVED)(sessions)
    response = client.post(f"/api/v1/clients/{client_id}/ban", headers=api_keys.headers("viewer"))
    assert response.status_code == 403
    assert "needs the operator role" in response.json()["detail"]
    after = client.get(f"/api/v1/clients/{client_id}", headers=api_keys.headers("viewer")).json()
    assert after["status"] == "approved"


@pytest.mark.parametrize(
    "header",
    ["Basic dXNlcjpwYXNz", "Bearer", "Bearer    ", "phx_only_the_secret", "Bearer \u00e9t\u00e9"],
)
def test_malformed_authorization_header_is_401(header: str, client: TestClient) -> None:
    response = client.get("/api/v1/runs", headers={"Authorization": header.encode()})
    assert response.status_code == 401
    assert response.json()["detail"]
