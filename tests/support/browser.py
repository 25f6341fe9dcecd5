"""The dashboard under a real browser: the app under uvicorn, and where Chromium is.

- ``serve(database_url, data_dir)`` starts ``uvicorn --factory phalanx_api.main:create_app``
  on a free loopback port and stops it (by its pid) afterwards.
- ``CHROMIUM``: Debian's ``/usr/bin/chromium``, driven by Playwright through the
  ``chromium`` fixture (``tests/fixtures/browser.py``).
- ``seeded_database(tmp_path, seed)`` migrates a SQLite file, seeds it and makes a
  viewer key; ``log_in(page, base_url, path, secret)`` opens a page through the login form.

Tests that drive the browser are marked ``browser`` (``pytest -m browser``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import keys, make_engine, migrate, session_factory
from phalanx.store.models import Role
from tests.support.live_server import free_port

if TYPE_CHECKING:
    from playwright.sync_api import Dialog, Page

Seeded = TypeVar("Seeded")

#: Debian's Chromium; Playwright's own browser download is not used.
CHROMIUM = os.environ.get("PHALANX_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
#: Where screenshots go (tests/artifacts/, ignored by git).
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
#: The app under uvicorn, on loopback; the port is added per start.
UVICORN = [
    sys.executable,
    "-m",
    "uvicorn",
    "--factory",
    "phalanx_api.main:create_app",
    "--host",
    "127.0.0.1",
    "--log-level",
    "warning",
]
#: Seconds the server gets to answer /healthz after starting.
STARTUP_S = 60.0


@contextmanager
def serve(database_url: str, data_dir: Path, **settings: str) -> Iterator[str]:
    """Run the app under uvicorn on a free loopback port; yield its base URL.

    Parameters
    ----------
    database_url : str
        A migrated database.
    data_dir : Path
        The app's data directory.
    **settings : str
        More ``PHALANX_*`` settings, by field name (``ban_on_confirm="true"``).
    """
    env = {
        **os.environ,
        "PHALANX_DATABASE_URL": database_url,
        "PHALANX_DATA_DIR": str(data_dir),
        "PHALANX_SECRET_KEY": "browser-test-secret-key",
        **{f"PHALANX_{k.upper()}": v for k, v in settings.items()},
    }
    log_path = data_dir / "uvicorn.log"
    with log_path.open("ab") as log:
        for _ in range(3):  # the probed port can be taken before uvicorn binds it
            port = free_port()
            process = subprocess.Popen(
                [*UVICORN, "--port", str(port)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            base = f"http://127.0.0.1:{port}"
            try:
                if _wait_until_up(base, process):
                    yield base
                    return
            finally:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=15)
    pytest.fail(f"uvicorn did not start; see {log_path}")


def _wait_until_up(base: str, process: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            if httpx.get(f"{base}/healthz", timeout=2.0).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    return False


def seeded_database(
    tmp_path: Path, seed: Callable[[sessionmaker[Session]], Seeded]
) -> tuple[str, str, Seeded]:
    """Migrate a SQLite file under ``tmp_path``, seed it, add a viewer key.

    Returns
    -------
    tuple
        The database URL, the viewer key's secret and what ``seed`` returned.
    """
    url = f"sqlite:///{tmp_path}/phalanx.db"
    migrate.upgrade(url)
    engine = make_engine(url)
    try:
        sessions = session_factory(engine)
        seeded = seed(sessions)
        with sessions.begin() as session:
            secret = keys.create_key(session, name="viewer", role=Role.VIEWER).secret
    finally:
        engine.dispose()
    (tmp_path / "data").mkdir(exist_ok=True)
    return url, secret, seeded


def log_in(page: Page, base_url: str, path: str, secret: str) -> None:
    """Open ``path`` through the login form, which sends the browser back to it."""
    from playwright.sync_api import expect

    page.goto(f"{base_url}{path}")
    page.fill("#api_key", secret)
    page.click("form[action='/login'] button[type=submit]")
    expect(page).to_have_url(f"{base_url}{path}")


def dismissed_dialogs(page: Page) -> list[str]:
    """Dismiss every dialog ``page`` opens; return the list their messages go to.

    A test that renders hostile names asserts the list stays empty: no name ran as script.
    """
    seen: list[str] = []

    def dismiss(dialog: Dialog) -> None:
        seen.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    return seen
