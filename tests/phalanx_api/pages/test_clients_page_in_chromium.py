"""The clients page in headless Chromium: who proved its key, and only the actions that apply."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import ClientStatus, Role, clients, keys
from phalanx.store.types import utcnow
from tests.support.browser import ARTIFACTS, dismissed_dialogs, log_in, seeded_database, serve
from tests.support.ci import in_ci
from tests.support.store_rows import new_client

try:
    from playwright.sync_api import Browser, Page, expect
except ImportError:  # without Playwright: skipped locally, an error under CI
    if in_ci():
        raise
    pytest.skip("Playwright is not installed: pip install playwright", allow_module_level=True)

pytestmark = [pytest.mark.browser]

#: Each seeded client's status and the buttons its row must offer, in menu order
#: (the README's rules: approve from pending or suspended, and only once proven;
#: suspend from pending or approved; ban from any but banned; reinstate from
#: suspended or banned).
OFFERED = {
    "proven-pending": ["approve", "suspend", "ban"],
    "unproven-pending": ["suspend", "ban"],
    "approved": ["suspend", "ban"],
    "suspended": ["approve", "ban", "reinstate"],
    "banned": ["reinstate"],
}


@dataclass(frozen=True)
class Registry:
    operator: str
    ids: dict[str, str]  # name -> client id


def seed_registry(sessions: sessionmaker[Session]) -> Registry:
    """One client in each status, a pending one that has not proven its key; an operator."""
    with sessions.begin() as session:
        ids = {
            "proven-pending": new_client(session, "proven-pending"),
            "approved": new_client(session, "approved", status=ClientStatus.APPROVED),
            "suspended": new_client(session, "suspended", status=ClientStatus.SUSPENDED),
            "banned": new_client(session, "banned", status=ClientStatus.BANNED),
        }
        ids["unproven-pending"] = clients.create_registration(
            session,
            name="unproven-pending",
            public_key="-----BEGIN PUBLIC KEY-----\nunproven\n-----END PUBLIC KEY-----\n",
            fingerprint=hashlib.sha256(b"unproven").hexdigest(),
            challenge="Y2hhbGxlbmdl",
            expires_at=utcnow() + timedelta(minutes=10),
            token_hash=hashlib.sha256(b"token").hexdigest(),
        ).id
        operator = keys.create_key(session, name="alice", role=Role.OPERATOR).secret
    return Registry(operator, ids)


def _offered(page: Page, client_id: str) -> list[str]:
    buttons = page.locator(f"tr[data-client='{client_id}'] td.actions button")
    return [str(b.get_attribute("data-action")) for b in buttons.all()]


def test_the_page_says_who_proved_its_key_and_every_button_it_offers_works(
    chromium: Browser, tmp_path: Path
) -> None:
    url, _, registry = seeded_database(tmp_path, seed_registry)
    with serve(url, tmp_path / "data") as base_url:
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        dialogs = dismissed_dialogs(page)
        log_in(page, base_url, "/clients", registry.operator)

        unproven = page.locator(f"tr[data-client='{registry.ids['unproven-pending']}']")
        expect(unproven.locator("[data-unproven]")).to_have_text("key not proven yet")
        expect(unproven.locator("[data-proven]")).to_have_count(0)
        for name in OFFERED.keys() - {"unproven-pending"}:
            row = page.locator(f"tr[data-client='{registry.ids[name]}']")
            expect(row.locator("[data-proven]")).to_contain_text("key proven")
            expect(row.locator("[data-unproven]")).to_have_count(0)
        assert {name: _offered(page, registry.ids[name]) for name in OFFERED} == OFFERED
        page.screenshot(path=ARTIFACTS / "clients-page.png", full_page=True)

        # Every button offered leads to the change it names, never to an error page.
        for name, actions in OFFERED.items():
            for action in actions:
                page.goto(f"{base_url}/clients")
                if action not in _offered(page, registry.ids[name]):
                    continue  # an earlier click moved the client on
                row = page.locator(f"tr[data-client='{registry.ids[name]}']")
                row.locator(f"button[data-action='{action}']").click()
                expect(page.locator("[data-flash=client]")).to_contain_text(f"Client {name} is now")
                expect(page.locator("h1")).to_have_text("Clients")
        context.close()
    assert dialogs == []
