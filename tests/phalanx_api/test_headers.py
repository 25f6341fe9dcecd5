"""Security headers on every answer: pages, API answers, /docs, static files, every error."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from phalanx_api.settings import ApiSettings
from tests.support.factories import FakeClock, Keys, TestClient, limited_app

HTML = {"Accept": "text/html"}


def _assert_secured(response: Any) -> None:
    headers = response.headers
    policy = headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "same-origin"


Call = Callable[[TestClient, Keys], Any]
ANSWERS: dict[str, Call] = {
    "login page": lambda c, k: c.get("/login"),
    "dashboard page": lambda c, k: c.get("/", headers=HTML, follow_redirects=False),
    "api answer": lambda c, k: c.get("/api/v1/runs", headers=k.headers("viewer")),
    "probe": lambda c, k: c.get("/healthz"),
    "docs": lambda c, k: c.get("/docs"),
    "openapi": lambda c, k: c.get("/openapi.json"),
    "static file": lambda c, k: c.get("/static/phalanx.css"),
    "api 404": lambda c, k: c.get("/api/v1/nothing-here"),
    "page 404": lambda c, k: c.get("/nothing-here", headers=HTML),
    "api 401": lambda c, k: c.get("/api/v1/runs"),
    "api 422": lambda c, k: c.post("/api/v1/clients", json={}),
    "413 before the app": lambda c, k: c.post(
        "/api/v1/clients", content=b"x" * (128 * 1024), headers={"Content-Type": "application/json"}
    ),
    "error page": lambda c, k: c.get(
        "/runs/00000000-0000-4000-8000-000000000000",
        headers={**HTML, **k.headers("viewer")},
    ),
}


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_every_answer_carries_the_security_headers(
    answer: str, client: TestClient, api_keys: Keys
) -> None:
    client.cookies.clear()
    response = ANSWERS[answer](client, api_keys)
    assert response.status_code < 500
    _assert_secured(response)


def test_an_error_page_keeps_the_headers_of_the_error(client: TestClient) -> None:
    client.cookies.clear()
    page = client.post("/docs", headers=HTML)
    assert page.status_code == 405
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["allow"] == "GET"
    _assert_secured(page)


def test_a_429_carries_retry_after_and_the_headers(
    fresh_settings: ApiSettings,
) -> None:
    app = limited_app(fresh_settings, FakeClock(), registration_per_minute=1)
    with TestClient(app) as client:
        client.post("/api/v1/clients", json={})
        api = client.post("/api/v1/clients", json={})
        assert api.status_code == 429
        _assert_secured(api)
        assert api.headers["retry-after"] == "60"


def test_docs_run_no_inline_script(client: TestClient) -> None:
    docs = client.get("/docs")
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", docs.text, flags=re.S)
    assert scripts, "the docs page loads Swagger UI"
    for attributes, body in scripts:
        assert 'src="/static/' in attributes
        assert body.strip() == ""
    assert client.get("/static/swagger-init.js").status_code == 200
