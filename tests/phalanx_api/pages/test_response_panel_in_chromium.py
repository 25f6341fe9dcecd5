"""Response times in headless Chromium: the run page's panel and the clients page's column."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.browser import log_in, seeded_database, serve
from tests.support.ci import in_ci
from tests.support.response_rounds import HOSTILE_NAME, seed_timed_run

try:
    from playwright.sync_api import Browser, Dialog, expect
except ImportError:  # without Playwright: skipped locally, an error under CI
    if in_ci():
        raise
    pytest.skip("Playwright is not installed: pip install playwright", allow_module_level=True)

pytestmark = [pytest.mark.browser]


def test_an_operator_reads_who_is_slow_in_words_and_no_name_runs_as_script(
    chromium: Browser, tmp_path: Path
) -> None:
    url, secret, timed = seeded_database(tmp_path, seed_timed_run)
    dialogs: list[str] = []
    with serve(url, tmp_path / "data") as base_url:
        context = chromium.new_context()
        page = context.new_page()

        def dismiss(dialog: Dialog) -> None:
            dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", dismiss)
        log_in(page, base_url, f"/runs/{timed.run_id}", secret)

        panel = page.locator("section.responses")
        expect(panel).to_be_visible()
        expect(panel.locator("h2")).to_have_text("Response times")
        expect(panel.locator("ul.slow-workers li")).to_have_count(2)
        straggler = panel.locator("li[data-slow-worker='4']")
        expect(straggler).to_contain_text(f"Worker 4 ({HOSTILE_NAME}) took at least 3 times")
        expect(straggler).to_contain_text("40.3 s against the run's 2.0 s")
        expect(panel).to_contain_text("Slow is not lying")
        expect(panel.locator("tbody tr")).to_have_count(6)
        expect(panel.locator("tr.slow .slow-tag")).to_have_count(2)

        page.goto(f"{base_url}/clients")
        row = page.locator(f"tr[data-client='{timed.clients[4]}']")
        expect(row).to_contain_text(HOSTILE_NAME)
        expect(row.locator("td.responses")).to_contain_text("p90 40.5 s · 5 late")
        expect(row.locator(".slow-tag")).to_be_visible()
        quick = page.locator(f"tr[data-client='{timed.clients[0]}'] td.responses")
        expect(quick).to_contain_text("p90 1.0 s · 0 late")
        expect(quick.locator(".slow-tag")).to_have_count(0)
        context.close()
    assert dialogs == []  # the hostile name never ran
