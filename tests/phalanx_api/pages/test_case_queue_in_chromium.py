"""The review queue of cases in headless Chromium: bulk confirm, and a badge that counts cases."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import (
    AuditEntry,
    Client,
    ClientStatus,
    DetectionCase,
    DetectionEvent,
    ReviewStatus,
    Role,
    keys,
    make_engine,
    session_factory,
)
from tests.support.browser import ARTIFACTS, log_in, seeded_database, serve
from tests.support.ci import in_ci
from tests.support.flagged_runs import LIARS, Seeded, seed_detected_run

try:
    from playwright.sync_api import Browser, expect
except ImportError:  # without Playwright: skipped locally, an error under CI
    if in_ci():
        raise
    pytest.skip("Playwright is not installed: pip install playwright", allow_module_level=True)

pytestmark = [pytest.mark.browser]

ROUNDS = 6


@dataclass(frozen=True)
class Queue:
    run: Seeded
    operator: str
    cases: dict[int, int]  # worker -> case id


def seed_queue(sessions: sessionmaker[Session]) -> Queue:
    """Six rounds flagging workers 2 and 5 (12 events), a refused reply of worker 6; an operator."""
    run = seed_detected_run(sessions, num_rounds=ROUNDS)
    with sessions.begin() as session:
        operator = keys.create_key(session, name="alice", role=Role.OPERATOR).secret
        rows = session.scalars(select(DetectionCase).where(DetectionCase.run_id == run.run_id))
        by_worker = {row.worker: row.id for row in rows if row.worker is not None}
    return Queue(run, operator, by_worker)


def test_bulk_confirm_closes_every_open_event_of_the_clients_and_the_badge_counts_cases(
    chromium: Browser, tmp_path: Path
) -> None:
    url, _, queue = seeded_database(tmp_path, seed_queue)
    with serve(url, tmp_path / "data", ban_on_confirm="true") as base_url:
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        log_in(page, base_url, "/cases", queue.operator)

        badge = page.locator(".bar [data-open-cases]")
        expect(badge).to_have_text("3")  # 3 clients, 13 open events
        cards = page.locator("article.case")
        expect(cards).to_have_count(3)
        liar = page.locator(f"article.case[data-case='{queue.cases[LIARS[0]]}']")
        expect(liar.locator("[data-count]")).to_have_text(f"{ROUNDS} events")
        expect(liar.locator("[data-rounds]")).to_have_text(f"rounds 1 to {ROUNDS}")
        expect(liar.locator(".summary").first).to_contain_text(f"Worker {LIARS[0]} disagreed")

        page.locator("[data-pick-all]").check()
        expect(page.locator("[data-picked]")).to_have_text("3 selected")
        page.locator(f"input[data-pick][value='{queue.cases[6]}']").uncheck()
        expect(page.locator("[data-picked]")).to_have_text("2 selected")
        page.locator("#bulk-note").fill("Reversed gradients in every round.")
        page.locator("button[data-bulk=confirm]").click()

        expect(page.locator("[data-flash=cases] p")).to_have_count(2)
        flash = page.locator("[data-flash=cases]")
        expect(flash).to_contain_text(f"{ROUNDS} of {ROUNDS} events closed")
        expect(flash.locator("[data-client-status=banned]")).to_have_count(2)
        expect(badge).to_have_text("1")
        expect(cards).to_have_count(1)
        expect(cards.first).to_have_attribute("data-case", str(queue.cases[6]))
        page.screenshot(path=ARTIFACTS / "case-queue.png", full_page=True)
        page.set_viewport_size({"width": 390, "height": 900})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the queue scrolls sideways by {overflow}px at 390px"
        context.close()

    engine = make_engine(url)
    try:
        with session_factory(engine)() as session:
            for worker in LIARS:
                client_id = queue.run.clients[worker]
                theirs = session.scalars(
                    select(DetectionEvent).where(DetectionEvent.client_id == client_id)
                ).all()
                assert len(theirs) == ROUNDS
                assert {(e.review_status, e.reviewed_by) for e in theirs} == {
                    (ReviewStatus.CONFIRMED, "alice")
                }
                client = session.get(Client, client_id)
                assert client is not None and client.status == ClientStatus.BANNED
            reviews = session.scalars(
                select(AuditEntry).where(AuditEntry.action == "event.review")
            ).all()
            assert len(reviews) == ROUNDS * len(LIARS)
            left = session.scalars(
                select(DetectionEvent).where(DetectionEvent.review_status == ReviewStatus.OPEN)
            ).all()
            assert [e.worker for e in left] == [6]
    finally:
        engine.dispose()


def test_a_mute_set_from_the_queue_is_lifted_by_its_unmute_button(
    chromium: Browser, tmp_path: Path
) -> None:
    url, _, queue = seeded_database(tmp_path, seed_queue)
    refused = queue.cases[6]
    with serve(url, tmp_path / "data") as base_url:
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        log_in(page, base_url, "/cases", queue.operator)
        card = page.locator(f"article.case[data-case='{refused}']")
        card.locator("textarea").fill("Clock skew on that host.")
        card.locator("input[data-mute]").check()
        card.locator("button[data-review=dismiss]").click()
        expect(page.locator(f"[data-reviewed-case='{refused}']")).to_contain_text("Muted:")

        page.goto(f"{base_url}/cases?status=dismissed")
        card = page.locator(f"article.case[data-case='{refused}']")
        expect(card.locator(".muted-tag")).to_have_text("muted by alice")
        card.locator("button[data-unmute=bad_signature]").click()

        expect(page.locator(f"[data-unmuted-case='{refused}']")).to_contain_text(
            "later events of its kinds arrive open"
        )
        expect(page).to_have_url(f"{base_url}/cases?status=dismissed&unmuted={refused}")
        card = page.locator(f"article.case[data-case='{refused}']")
        expect(card.locator(".muted-tag")).to_have_count(0)
        expect(card.locator("button[data-unmute]")).to_have_count(0)
        context.close()

    engine = make_engine(url)
    try:
        with session_factory(engine)() as session:
            entry = session.scalars(
                select(AuditEntry).where(AuditEntry.action == "case.unmute")
            ).one()
            assert (entry.actor, entry.target_id) == ("alice", str(refused))
            assert entry.details["muted_by"] == {"bad_signature": "alice"}
    finally:
        engine.dispose()
