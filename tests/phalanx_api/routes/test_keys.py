"""Operator keys over the API: create, list, revoke."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.factories import Keys, TestClient, bearer

KEYS = "/api/v1/keys"


def test_a_created_key_works_at_once_and_not_after_revocation(
    client: TestClient, api_keys: Keys
) -> None:
    admin = api_keys.headers("admin")
    created = client.post(KEYS, json={"name": "ci-bot", "role": "operator"}, headers=admin)
    assert created.status_code == 201
    key = created.json()
    assert key["secret"].startswith(key["prefix"])
    assert key["role"] == "operator"
    new = bearer(key["secret"])
    assert client.get("/api/v1/runs", headers=new).status_code == 200
    assert client.get(KEYS, headers=new).status_code == 403

    listed = client.get(KEYS, headers=admin).json()["items"]
    assert key["id"] in [k["id"] for k in listed]
    assert all("secret" not in k for k in listed)

    revoked = client.post(f"{KEYS}/{key['id']}/revoke", headers=admin)
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    refused = client.get("/api/v1/runs", headers=new)
    assert refused.status_code == 401
    assert "revoked" in refused.json()["detail"]
    assert key["id"] not in [k["id"] for k in client.get(KEYS, headers=admin).json()["items"]]
    everything = client.get(KEYS, params={"include_revoked": True}, headers=admin).json()["items"]
    assert key["id"] in [k["id"] for k in everything]


@pytest.mark.parametrize(
    "body",
    [{"name": "x", "role": "root"}, {"name": "", "role": "admin"}, {"role": "admin"}, {}],
)
def test_a_malformed_key_request_is_422(
    body: dict[str, Any], client: TestClient, api_keys: Keys
) -> None:
    response = client.post(KEYS, json=body, headers=api_keys.headers("admin"))
    assert response.status_code == 422


def test_revoking_an_unknown_key_is_404(client: TestClient, api_keys: Keys) -> None:
    response = client.post(
        f"{KEYS}/00000000-0000-4000-8000-000000000000/revoke", headers=api_keys.headers("admin")
    )
    assert response.status_code == 404
