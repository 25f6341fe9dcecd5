"""``/docs`` in headless Chromium: Swagger UI starts under the app's Content-Security-Policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.store import migrate
from tests.support.browser import serve
from tests.support.ci import in_ci

try:
    from playwright.sync_api import Browser, expect
except ImportError:  # without Playwright: skipped locally, an error under CI
    if in_ci():
        raise
    pytest.skip("Playwright is not installed: pip install playwright", allow_module_level=True)

pytestmark = [pytest.mark.browser]


def test_swagger_ui_lists_the_api_with_no_policy_violation(
    chromium: Browser, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/phalanx.db"
    migrate.upgrade(url)
    (tmp_path / "data").mkdir()
    with serve(url, tmp_path / "data") as base_url:
        context = chromium.new_context()
        tab = context.new_page()
        problems: list[str] = []
        tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
        tab.on(
            "console",
            lambda message: (
                problems.append(f"console: {message.text}") if message.type == "error" else None
            ),
        )
        response = tab.goto(f"{base_url}/docs")
        assert response is not None
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        expect(tab.locator(".opblock-summary-path").first).to_be_visible(timeout=30_000)
        expect(tab.locator(".swagger-ui .title").first).to_contain_text("Phalanx")
        back = tab.locator("nav.phalanx-back a[data-back]")
        expect(back).to_be_visible()
        back.click()
        expect(tab).to_have_url(f"{base_url}/login?next=%2F")
        context.close()
    assert not problems, problems
