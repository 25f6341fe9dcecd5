"""The overview in headless Chromium: it follows a running run without a reload."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from phalanx.store import RoundData, make_engine, rounds, session_factory
from tests.support.browser import log_in, seeded_database, serve
from tests.support.ci import in_ci
from tests.support.flagged_runs import seed_detected_run

try:
    from playwright.sync_api import Browser, expect
except ImportError:  # without Playwright: skipped locally, an error under CI
    if in_ci():
        raise
    pytest.skip("Playwright is not installed: pip install playwright", allow_module_level=True)

pytestmark = [pytest.mark.browser]


def test_a_round_finished_elsewhere_shows_on_the_open_overview(
    chromium: Browser, tmp_path: Path
) -> None:
    url, viewer, seeded = seeded_database(tmp_path, seed_detected_run)
    with serve(url, tmp_path / "data") as base_url:
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        log_in(page, base_url, "/", viewer)
        row = page.locator(f"tr[data-run='{seeded.run_id}']")
        expect(row.locator(".progress-cell small")).to_have_text("2 / 5 rounds")
        page.evaluate("window.loadedOnce = true")

        engine = make_engine(url)
        try:
            with session_factory(engine).begin() as session:
                now = datetime(2025, 1, 2, tzinfo=UTC)
                data = RoundData(
                    number=3, started_at=now, finished_at=now, metrics={"accuracy": 0.91}
                )
                rounds.record_round(session, seeded.run_id, data, [])
        finally:
            engine.dispose()

        expect(row.locator(".progress-cell small")).to_have_text("3 / 5 rounds", timeout=20_000)
        expect(row).to_contain_text("91.0%")
        assert page.evaluate("window.loadedOnce === true")  # redrawn in place, not reloaded
        context.close()
