"""Dashboard sessions: log in with a key, signed http-only cookie, CSRF, log out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import Role, keys
from phalanx.store.models import OperatorSession
from phalanx_api.context import app_context
from phalanx_api.deps import FormOperatorDep
from phalanx_api.main import create_app
from phalanx_api.settings import SECRET_KEY_FILE, ApiSettings, resolve_secret_key
from tests.support.factories import (
    FakeClock,
    Keys,
    TestClient,
    limited_app,
    login_form_token,
    post_login,
    seed_run,
)

COOKIE = "phalanx_session"


def _log_in(client: TestClient, secret: str, next_: str = "/runs") -> str:
    """Log in; return the session's CSRF token."""
    response = post_login(client, secret, next_)
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
    response = post_login(client, "phx_wrong")
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
    response = post_login(client, api_keys.viewer, target)
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


# ------------------------------------------------ sessions end on the server


def test_logging_out_ends_the_session_so_the_old_cookie_is_refused(
    fresh_settings: ApiSettings, fresh_keys: Keys
) -> None:
    with TestClient(create_app(fresh_settings)) as client:
        token = _log_in(client, fresh_keys.operator)
        old_cookie = client.cookies[COOKIE]
        out = client.post("/logout", data={"csrf_token": token}, follow_redirects=False)
        assert out.status_code == 303

        client.cookies.set(COOKIE, old_cookie)  # as a copy of the cookie would be replayed
        assert client.get("/api/v1/runs").status_code == 401
        page = client.get("/", headers={"Accept": "text/html"}, follow_redirects=False)
        assert page.status_code == 303
        assert page.headers["location"].startswith("/login")
        created = client.post(
            "/api/v1/keys",
            json={"name": "after-logout", "role": "viewer"},
            headers={"X-CSRF-Token": token},
        )
        assert created.status_code == 401


def test_revoking_the_key_deletes_its_sessions_on_the_server(
    fresh_settings: ApiSettings, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    with TestClient(create_app(fresh_settings)) as client:
        _log_in(client, fresh_keys.viewer)
        with fresh_sessions() as session:
            (viewer_key,) = [k for k in keys.list_keys(session) if k.name == "viewer-key"]
        revoked = client.post(
            f"/api/v1/keys/{viewer_key.id}/revoke",
            headers={"Authorization": f"Bearer {fresh_keys.admin}"},
        )
        assert revoked.status_code == 200
        assert client.get("/api/v1/runs").status_code == 401
    with fresh_sessions() as session:
        left = session.scalars(
            select(OperatorSession).where(OperatorSession.key_id == viewer_key.id)
        ).all()
    assert left == []


def test_a_session_past_its_server_side_expiry_is_refused(
    fresh_settings: ApiSettings, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    with TestClient(create_app(fresh_settings)) as client:
        _log_in(client, fresh_keys.viewer)
        assert client.get("/api/v1/runs").status_code == 200
        with fresh_sessions.begin() as session:
            session.execute(
                update(OperatorSession).values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
            )
        refused = client.get("/api/v1/runs")
    assert refused.status_code == 401
    assert "session is over" in refused.json()["detail"]


# ------------------------------------------------------------ the login form


def test_the_login_form_needs_its_own_csrf_token(client: TestClient, api_keys: Keys) -> None:
    client.cookies.clear()
    bare = client.post("/login", data={"api_key": api_keys.viewer}, follow_redirects=False)
    assert bare.status_code == 403
    assert "did not come from this site" in bare.text
    assert COOKIE not in bare.cookies

    token = login_form_token(client)
    wrong = client.post("/login", data={"api_key": api_keys.viewer, "csrf_token": token + "x"})
    assert wrong.status_code == 403
    client.cookies.clear()  # a cross-site form: the token, but not this browser's cookie
    foreign = client.post(
        "/login", data={"api_key": api_keys.viewer, "csrf_token": token}, follow_redirects=False
    )
    assert foreign.status_code == 403
    assert COOKIE not in foreign.cookies


def test_failed_logins_are_limited_per_address_with_retry_after(
    fresh_settings: ApiSettings, fresh_keys: Keys
) -> None:
    clock = FakeClock()
    app = limited_app(fresh_settings, clock, login_per_minute=3)
    with TestClient(app) as client:
        for attempt in range(3):
            assert post_login(client, f"phx_guess{attempt}-{'x' * 39}").status_code == 401
        limited = post_login(client, fresh_keys.viewer)  # even the right key, for now
        assert limited.status_code == 429
        assert limited.headers["retry-after"] == "20"  # a failure is forgiven every 60 / 3 s
        assert "try again in 20 s" in limited.text
        assert COOKIE not in limited.cookies

        with TestClient(app, client=("192.0.2.9", 40000)) as elsewhere:
            assert post_login(elsewhere, fresh_keys.viewer).status_code == 303

        clock.advance(20)
        assert post_login(client, fresh_keys.viewer).status_code == 303


def test_failed_logins_are_limited_per_key_prefix_from_any_address(
    fresh_settings: ApiSettings, fresh_keys: Keys
) -> None:
    app = limited_app(fresh_settings, FakeClock(), login_per_minute=3)
    prefix = fresh_keys.operator[:12]
    for address in ("192.0.2.1", "192.0.2.2", "192.0.2.3"):
        with TestClient(app, client=(address, 40000)) as client:
            assert post_login(client, prefix + "wrong-guess").status_code == 401
    with TestClient(app, client=("192.0.2.4", 40000)) as client:
        assert post_login(client, fresh_keys.operator).status_code == 429
        assert post_login(client, fresh_keys.viewer).status_code == 303  # another prefix


def test_successful_logins_do_not_count_against_the_limit(
    fresh_settings: ApiSettings, fresh_keys: Keys
) -> None:
    app = limited_app(fresh_settings, FakeClock(), login_per_minute=2)
    with TestClient(app) as client:
        for _ in range(5):
            assert post_login(client, fresh_keys.viewer).status_code == 303


def test_cookies_are_secure_over_https_and_when_configured(
    fresh_settings: ApiSettings, fresh_keys: Keys
) -> None:
    with TestClient(create_app(fresh_settings)) as plain:
        cookie = post_login(plain, fresh_keys.viewer).headers["set-cookie"]
        assert "Secure" not in cookie
    with TestClient(create_app(fresh_settings), base_url="https://testserver") as tls:
        assert "Secure" in tls.get("/login").headers["set-cookie"]
        cookie = post_login(tls, fresh_keys.viewer).headers["set-cookie"]
        assert "Secure" in cookie
        assert tls.get("/api/v1/runs").status_code == 200
    configured = create_app(fresh_settings.model_copy(update={"cookie_secure": True}))
    with TestClient(configured, base_url="https://testserver") as tls:
        assert "Secure" in post_login(tls, fresh_keys.viewer).headers["set-cookie"]


def test_the_login_page_says_when_the_browser_will_drop_a_secure_cookie(
    fresh_settings: ApiSettings,
) -> None:
    configured = create_app(fresh_settings.model_copy(update={"cookie_secure": True}))
    with TestClient(configured, base_url="http://dashboard.example") as plain:
        assert "data-insecure-transport" in plain.get("/login").text
    with TestClient(configured, base_url="http://127.0.0.1:8080") as loopback:
        assert "data-insecure-transport" not in loopback.get("/login").text
    with TestClient(configured, base_url="https://dashboard.example") as tls:
        assert "data-insecure-transport" not in tls.get("/login").text
