"""The run page's per-client view and partition heat map, in headless Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.browser import dismissed_dialogs, log_in, seeded_database, serve
from tests.support.ci import in_ci
from tests.support.local_runs import ATTACKER, HISTOGRAMS, HOSTILE_NAME, UNUSUAL, seed_local_run

try:
    from playwright.sync_api import Browser, expect
except ImportError:  # without Playwright: skipped locally, an error under CI
    if in_ci():
        raise
    pytest.skip("Playwright is not installed: pip install playwright", allow_module_level=True)

pytestmark = [pytest.mark.browser]


def test_an_operator_tells_the_unusual_honest_client_from_the_attacker(
    chromium: Browser, tmp_path: Path
) -> None:
    url, secret, seeded = seeded_database(tmp_path, seed_local_run)
    with serve(url, tmp_path / "data") as base_url:
        context = chromium.new_context()
        page = context.new_page()
        dialogs = dismissed_dialogs(page)
        log_in(page, base_url, f"/runs/{seeded.run_id}", secret)

        panel = page.locator("section.client-view")
        expect(panel).to_be_visible()
        expect(panel.locator("h2")).to_have_text("Clients")
        expect(panel).to_contain_text("federated evaluation after round 3")
        rows = panel.locator("table.client-view-table tbody tr")
        expect(rows).to_have_count(3)
        honest = panel.locator("tr[data-worker='0']")
        expect(honest.locator("[data-local-accuracy]")).to_have_text("73.0%")
        expect(honest.locator("[data-distance]")).to_have_text("1.00×")
        expect(honest).to_have_attribute("data-standing", "typical")
        unusual = panel.locator(f"tr[data-worker='{UNUSUAL}']")
        expect(unusual).to_have_attribute("data-standing", "unusual")
        expect(unusual.locator("[data-local-accuracy]")).to_have_text("55.0%")
        expect(unusual.locator(".unusual-tag")).to_be_visible()
        attacker = panel.locator(f"tr[data-worker='{ATTACKER}']")
        expect(attacker).to_have_attribute("data-standing", "far")
        expect(attacker).to_contain_text(HOSTILE_NAME)
        expect(attacker.locator("[data-distance]")).to_have_text("15.00×")
        expect(attacker.locator("[data-local-accuracy]")).to_have_text("refused")
        expect(attacker.locator(".far-tag")).to_be_visible()
        expect(attacker.locator(".flag-tag")).to_have_text("report refused")

        heat = panel.locator("figure.heat-map")
        expect(heat).to_be_visible()
        expect(heat).to_have_attribute("data-heat-clients", "3")
        expect(heat).to_have_attribute("data-heat-labels", "3")
        cells = heat.locator("rect.cell")
        expect(cells).to_have_count(9)
        darkest = heat.locator(f"rect.cell[data-worker='{UNUSUAL}'][data-label='1']")
        expect(darkest).to_have_attribute("data-count", str(HISTOGRAMS[1][1]))
        expect(darkest).to_have_attribute("fill-opacity", "1.0")
        box = darkest.bounding_box()
        assert box is not None and box["width"] > 5 and box["height"] > 5
        faint = heat.locator(f"rect.cell[data-worker='{UNUSUAL}'][data-label='0']")
        expect(faint).to_have_attribute("fill-opacity", str(round(2 / 85, 3)))
        # The clients' accuracy is charted and listed beside the server's.
        expect(page.locator("figure[data-chart='accuracy'] .key.k-fed_accuracy")).to_have_text(
            "Clients' test splits"
        )
        expect(page.locator("g[data-series='fed_accuracy']")).to_have_count(1)
        context.close()
    assert dialogs == []  # the hostile name never ran
