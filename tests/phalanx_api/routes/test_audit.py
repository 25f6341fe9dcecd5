"""The audit log over the API: every operator action, newest first, filtered."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.support.configs import small_config
from tests.support.factories import Keys, TestClient, register_and_prove, seed_run

KEYS = "/api/v1/keys"
AUDIT = "/api/v1/audit"


def test_every_operator_action_is_in_the_audit_log_newest_first(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    client = fresh_client
    operator, admin = fresh_keys.headers("operator"), fresh_keys.headers("admin")
    client_id = register_and_prove(client)
    client.post(f"/api/v1/clients/{client_id}/approve", headers=operator)
    body = small_config(attack={"name": None, "q": 0}).model_dump()
    run = client.post("/api/v1/runs", json=body, headers=operator).json()
    client.post(f"/api/v1/runs/{run['id']}/cancel", headers=operator)
    key = client.post(KEYS, json={"name": "temp", "role": "viewer"}, headers=admin).json()
    client.post(f"{KEYS}/{key['id']}/revoke", headers=admin)
    seed_run(fresh_sessions)  # not an operator action: no entry

    log = client.get(AUDIT, headers=fresh_keys.headers("viewer")).json()["items"]
    assert [(entry["actor"], entry["action"]) for entry in reversed(log)] == [
        (f"client:{client_id}", "client.register"),
        (f"client:{client_id}", "client.proof"),
        ("operator-key", "client.approve"),
        ("operator-key", "run.launch"),
        ("operator-key", "run.cancel"),
        ("admin-key", "key.create"),
        ("admin-key", "key.revoke"),
    ]

    pages: list[int] = []
    params: dict[str, Any] = {"limit": 3}
    while True:
        page = client.get(AUDIT, params=params, headers=fresh_keys.headers("viewer")).json()
        pages += [entry["id"] for entry in page["items"]]
        if page["next_before"] is None:
            break
        params["before"] = page["next_before"]
    assert pages == [entry["id"] for entry in log]

    only_runs = client.get(
        AUDIT, params={"target_type": "run"}, headers=fresh_keys.headers("viewer")
    ).json()
    assert [entry["action"] for entry in only_runs["items"]] == ["run.cancel", "run.launch"]


@pytest.mark.parametrize("params", [{"limit": 0}, {"before": 0}, {"actor": "\x00"}])
def test_bad_audit_filters_are_422(
    params: dict[str, Any], client: TestClient, api_keys: Keys
) -> None:
    response = client.get(AUDIT, params=params, headers=api_keys.headers("viewer"))
    assert response.status_code == 422
