"""Every dashboard page fits a 390 px wide phone: wide tables scroll inside their box."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import Role, keys
from tests.support.browser import log_in, seeded_database, serve
from tests.support.ci import in_ci
from tests.support.flagged_runs import Seeded, seed_detected_run

try:
    from playwright.sync_api import Browser
except ImportError:  # without Playwright: skipped locally, an error under CI
    if in_ci():
        raise
    pytest.skip("Playwright is not installed: pip install playwright", allow_module_level=True)

pytestmark = [pytest.mark.browser]


def seed(sessions: sessionmaker[Session]) -> tuple[Seeded, str]:
    run = seed_detected_run(sessions, num_rounds=6)
    with sessions.begin() as session:
        secret = keys.create_key(session, name="alice", role=Role.OPERATOR).secret
    return run, secret


def test_no_page_scrolls_sideways_at_390px(chromium: Browser, tmp_path: Path) -> None:
    url, _, (run, secret) = seeded_database(tmp_path, seed)
    with serve(url, tmp_path / "data") as base_url:
        context = chromium.new_context(viewport={"width": 390, "height": 844})
        page = context.new_page()
        log_in(page, base_url, "/", secret)
        overflows = {}
        for path in ("/", "/clients", "/events?status=all", "/cases", f"/runs/{run.run_id}"):
            page.goto(f"{base_url}{path}")
            page.locator("main").wait_for()
            overflows[path] = page.evaluate(
                "document.documentElement.scrollWidth - window.innerWidth"
            )
        context.close()
    assert {path: px for path, px in overflows.items() if px > 0} == {}
