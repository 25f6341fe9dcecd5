"""Dashboard sessions: log in with a key, signed http-only cookie, CSRF, log out."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import Role, keys
from phalanx_api.context import app_context
from phalanx_api.deps import FormOperatorDep
from phalanx_api.main import create_app
from phalanx_api.settings import SECRET_KEY_FILE, ApiSettings, resolve_secret_key
from tests.api.factories import Keys, TestClient, seed_run

COOKIE = "phalanx_session"


def _log_in(client: TestClient, secret: str, next_: str = "/runs") -> str:
    """Log in; return the session's CSRF token."""
    response = client.post(
        "/login", data={"api_key": secret, "next": next_}, follow_redirects=False
    )
    assert response.status_code == 303, response.text
    assert response.headers["location"] == next_
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=lax" in cookie
    assert isinstance(client.app, FastAPI)
    session = app_context(client.app).signer.loads(client.cookies[COOKIE])
    assert session is not None
    token: str = session.csrf_token
    return token


def test_the_login_page_is_served_with_its_stylesheet(client: TestClient) -> None:
    page = client.get("/login")
    assert page.status_code == 200
    assert 'name="api_key"' in page.text
    assert client.get("/static/phalanx.css").status_code == 200


def test_a_session_reads_and_acts_with_its_csrf_token(
    fresh_settings: ApiSettings, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    run_id = seed_run(fresh_sessions)
    with TestClient(create_app(fresh_settings)) as client:
        token = _log_in(client, fresh_keys.operator)
        assert token
        assert client.get("/api/v1/runs").status_code == 200

        refused = client.post(f"/api/v1/runs/{run_id}/cancel")
        assert refused.status_code == 403
        assert "CSRF" in refused.json()["detail"]
        wrong = client.post(f"/api/v1/runs/{run_id}/cancel", headers={"X-CSRF-Token": "nope"})
        assert wrong.status_code == 403
        done = client.post(f"/api/v1/runs/{run_id}/cancel", headers={"X-CSRF-Token": token})
        assert done.status_code == 202

        assert client.post("/logout", follow_redirects=False).status_code == 403
        out = client.post("/logout", data={"csrf_token": token}, follow_redirects=False)
        assert out.status_code == 303
        assert client.get("/api/v1/runs").status_code == 401


def test_a_wrong_key_does_not_log_in(client: TestClient) -> None:
    response = client.post("/login", data={"api_key": "phx_wrong"}, follow_redirects=False)
    assert response.status_code == 401
    assert "not valid" in response.text
    assert COOKIE not in response.cookies


def test_revoking_the_key_ends_its_sessions(
    client: TestClient, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        created = keys.create_key(session, name="short-lived", role=Role.VIEWER)
    client.cookies.clear()
    _log_in(client, created.secret)
    assert client.get("/api/v1/runs").status_code == 200
    with sessions.begin() as session:
        keys.revoke_key(session, created.key.id)
    assert client.get("/api/v1/runs").status_code == 401
    client.cookies.clear()


@pytest.mark.parametrize("cookie", ["garbage", "eyJrIjoiYSJ9.forged.sig"])
def test_a_forged_cookie_is_401(cookie: str, client: TestClient) -> None:
    client.cookies.clear()
    client.cookies.set(COOKIE, cookie)
    response = client.get("/api/v1/runs")
    client.cookies.clear()
    assert response.status_code == 401


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/", "/\\evil"])
def test_login_never_redirects_off_site(target: str, client: TestClient, api_keys: Keys) -> None:
    response = client.post(
        "/login", data={"api_key": api_keys.viewer, "next": target}, follow_redirects=False
    )
    client.cookies.clear()
    assert response.headers["location"] == "/"


def test_a_secret_key_is_generated_once_and_kept(tmp_path: Path) -> None:
    settings = ApiSettings(data_dir=tmp_path / "data", secret_key="")
    first = resolve_secret_key(settings)
    assert len(first) >= 32
    assert resolve_secret_key(settings) == first
    assert (tmp_path / "data" / SECRET_KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert resolve_secret_key(ApiSettings(data_dir=tmp_path, secret_key="configured")) == (
        "configured"
    )


def test_a_dashboard_form_posts_with_its_session_and_token(
    fresh_settings: ApiSettings, fresh_keys: Keys
) -> None:
    app = create_app(fresh_settings)

    @app.post("/test-form", response_class=PlainTextResponse)
    def form_page(user: FormOperatorDep) -> str:
        return user.name

    with TestClient(app) as client:
        first = client.post("/test-form", data={})
        assert first.status_code == 401, first.text
        token = _log_in(client, fresh_keys.viewer)
        assert client.post("/test-form", data={"csrf_token": token}).status_code == 403  # role
        client.cookies.clear()
        token = _log_in(client, fresh_keys.operator)
        assert client.post("/test-form", data={}).status_code == 403  # no token
        assert client.post("/test-form", data={"csrf_token": "forged"}).status_code == 403
        accepted = client.post("/test-form", data={"csrf_token": token})
        assert accepted.status_code == 200
        assert accepted.text == "operator-key"
