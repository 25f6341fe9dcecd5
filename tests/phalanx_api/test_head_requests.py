"""HEAD answers as GET does, without the body; a route without GET still refuses it."""

from __future__ import annotations

import uuid

import pytest

from tests.support.factories import Keys, TestClient

HTML = {"Accept": "text/html,application/xhtml+xml"}


@pytest.mark.parametrize("path", ["/healthz", "/static/phalanx.css", "/openapi.json", "/login"])
def test_head_has_the_status_and_headers_of_get_and_no_body(path: str, client: TestClient) -> None:
    got = client.get(path)
    head = client.head(path)

    assert (head.status_code, got.status_code) == (200, 200)
    assert head.content == b""
    assert head.headers["content-length"] == got.headers["content-length"]
    assert head.headers["content-type"] == got.headers["content-type"]
    assert head.headers["x-frame-options"] == "DENY"


def test_head_of_the_dashboard_redirects_to_login_like_get(client: TestClient) -> None:
    head = client.head("/", headers=HTML, follow_redirects=False)
    got = client.get("/", headers=HTML, follow_redirects=False)

    assert head.status_code == got.status_code == 303
    assert head.headers["location"] == got.headers["location"]


def test_head_needs_the_same_key_as_get_and_a_post_route_still_refuses_it(
    client: TestClient, api_keys: Keys
) -> None:
    assert client.head("/api/v1/runs").status_code == 401
    listed = client.head("/api/v1/runs", headers=api_keys.headers("viewer"))
    assert listed.status_code == 200 and listed.content == b""
    revoke = f"/api/v1/keys/{uuid.uuid4()}/revoke"
    assert client.head(revoke, headers=api_keys.headers("admin")).status_code == 405
