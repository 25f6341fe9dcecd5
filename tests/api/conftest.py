"""Fixtures of the API tests: an app on a migrated SQLite or PostgreSQL database, keys per role.

Every test runs once on SQLite and once on PostgreSQL. ``app``, ``client``, ``sessions`` and
``api_keys`` are shared by the tests of a module (each test makes the rows it needs, fast);
the ``fresh_*`` ones give a test a database of its own, for assertions over whole tables.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store.migrate import upgrade
from phalanx_api.main import create_app
from phalanx_api.settings import ApiSettings
from tests.api.factories import Keys, TestClient, make_keys
from tests.integration import conftest as database_fixtures

# The database fixtures, shared with the integration tests.
sqlite_url = database_fixtures.sqlite_url
postgres_admin_engine = database_fixtures.postgres_admin_engine
postgres_url = database_fixtures.postgres_url
database_url = database_fixtures.database_url
migrated_url = database_fixtures.migrated_url


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
        "login_per_minute": 100_000,
    }
    values.update(overrides)
    return ApiSettings(**values)  # type: ignore[arg-type]


# ------------------------------------------- once per module and database


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ],
)
def module_database_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A migrated database for a whole module, on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('db')}/phalanx.db"
        upgrade(url)
        yield url
        return
    admin = request.getfixturevalue("postgres_admin_engine")
    schema = f"test_{uuid.uuid4().hex[:16]}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = admin.url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
        hide_password=False
    )
    upgrade(url)
    yield url
    with admin.connect() as connection:
        connection.execute(text("SET lock_timeout = '30s'"))
        connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.fixture(scope="module")
def api_settings(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> ApiSettings:
    return settings_for(module_database_url, tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def app(api_settings: ApiSettings) -> FastAPI:
    return create_app(api_settings)


@pytest.fixture(scope="module")
def client(app: FastAPI) -> Iterator[TestClient]:
    """A client of the module's app; the app's lifespan (engine disposal) runs around it."""
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def sessions(app: FastAPI) -> sessionmaker[Session]:
    """The app's own session factory, to seed and inspect the database."""
    factory: sessionmaker[Session] = app.state.phalanx.sessions
    return factory


@pytest.fixture(scope="module")
def api_keys(sessions: sessionmaker[Session]) -> Keys:
    return make_keys(sessions)


# ------------------------------------------- a database of its own per test


@pytest.fixture
def fresh_settings(migrated_url: str, tmp_path: Path) -> ApiSettings:
    return settings_for(migrated_url, tmp_path / "data")


@pytest.fixture
def fresh_app(fresh_settings: ApiSettings) -> FastAPI:
    return create_app(fresh_settings)


@pytest.fixture
def fresh_client(fresh_app: FastAPI) -> Iterator[TestClient]:
    with TestClient(fresh_app) as test_client:
        yield test_client


@pytest.fixture
def fresh_sessions(fresh_app: FastAPI) -> sessionmaker[Session]:
    factory: sessionmaker[Session] = fresh_app.state.phalanx.sessions
    return factory


@pytest.fixture
def fresh_keys(fresh_sessions: sessionmaker[Session]) -> Keys:
    return make_keys(fresh_sessions)
