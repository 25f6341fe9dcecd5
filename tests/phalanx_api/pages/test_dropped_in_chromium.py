"""A tied round in headless Chromium: its dropped files on the run page, its notice in the queue."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.browser import log_in, seeded_database, serve
from tests.support.ci import in_ci
from tests.support.tie_rounds import seed_tie

try:
    from playwright.sync_api import Browser, expect
except ImportError:  # without Playwright: skipped locally, an error under CI
    if in_ci():
        raise
    pytest.skip("Playwright is not installed: pip install playwright", allow_module_level=True)

pytestmark = [pytest.mark.browser]


def test_an_operator_sees_what_a_tied_round_left_out_and_whom_it_suspects(
    chromium: Browser, tmp_path: Path
) -> None:
    url, secret, (run_id, dropped) = seeded_database(tmp_path, seed_tie)
    with serve(url, tmp_path / "data") as base_url:
        context = chromium.new_context()
        page = context.new_page()
        log_in(page, base_url, f"/runs/{run_id}", secret)

        table = page.locator("section.dropped")
        expect(table).to_be_visible()
        expect(table.locator("h2")).to_have_text(f"Files left out in round 1 ({len(dropped)})")
        expect(table.locator("tbody tr")).to_have_count(len(dropped))
        expect(table).to_contain_text("only suspects of a tie sent it")
        expect(table).to_contain_text("workers 0, 1, 2 and 3")
        expect(page.locator("ul.latest")).to_contain_text("The round")

        page.goto(f"{base_url}/events?run_id={run_id}")
        card = page.locator("article.event.sev-medium")
        expect(card).to_have_count(1)
        expect(card.locator("h2")).to_contain_text("Round 1: Largest agreeing groups tied")
        expect(card).to_contain_text("bans nobody")
        context.close()
