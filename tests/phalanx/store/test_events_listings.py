"""The store's read-only listings (event summaries, round records) and its JSON parsing.

On a migrated SQLite and PostgreSQL database, like the repositories' own tests.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, fields
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session

from phalanx.store import (
    EventData,
    EventFilter,
    EventSummary,
    ReviewStatus,
    RoundData,
    RoundRecord,
    Severity,
    events,
    rounds,
    runs,
)
from phalanx.store.engine import parse_json

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
FLAG_SUMMARY = "Worker 2 disagreed with workers 0 and 1 on file 3 (digests differ)."

#: Evidence shapes the coordinator stores, and some it never does.
EVIDENCE: dict[str, dict[str, Any]] = {
    "flag": {"summary": FLAG_SUMMARY, "files": [{"file": 3, "replicas": []}], "clique": [0, 1]},
    "refusal": {"reason": "signature does not verify", "round": 1},
    "both": {"summary": "the summary wins", "reason": "not this"},
    "neither": {"files": [1, 2]},
    "number": {"summary": 42},
    "unicode": {"summary": "Worker ß disagreed — über alles ✓"},
}


def _round(number: int) -> RoundData:
    return RoundData(
        number=number,
        started_at=T0 + timedelta(minutes=number),
        finished_at=T0 + timedelta(minutes=number, seconds=30),
        timings={"assign": 0.001, "detect": 0.25},
        bytes_up=2**40 + number,
        metrics={"accuracy": 0.5 + number / 100, "loss": 1 / 3, "per_class": [0.1, 0.2]},
        assignment={"scheme": "subsets", "r": 3, "files": list(range(5))},
        model_digest=f"{number:064x}",
    )


@pytest.fixture
def run_with_events(db_session: Session) -> Iterator[str]:
    """A run of three rounds; each round has one event per evidence shape."""
    run_id = runs.create_run(db_session, name="r", config={"rounds": 3}, seed=1, now=T0).id
    for number in (1, 2, 3):
        found = [
            EventData(
                kind="outside_max_clique" if shape == "flag" else f"kind_{shape}",
                severity=Severity.LOW if shape == "neither" else Severity.HIGH,
                worker=worker,
                evidence=evidence,
            )
            for worker, (shape, evidence) in enumerate(EVIDENCE.items())
        ]
        rounds.record_round(db_session, run_id, _round(number), found)
    db_session.commit()
    yield run_id


def _pages(session: Session, where: EventFilter, size: int) -> list[EventSummary]:
    seen: list[EventSummary] = []
    before = None
    while True:
        page = events.list_event_summaries(session, where, before=before, limit=size)
        seen += page.items
        if page.next_before is None:
            return seen
        before = page.next_before


@pytest.mark.parametrize(
    "where",
    [
        {},
        {"round": 2},
        {"kind": "kind_refusal"},
        {"severity": Severity.LOW},
        {"review_status": ReviewStatus.OPEN},
        {"round": 3, "worker": 1},
    ],
    ids=lambda where: "-".join(f"{k}={v}" for k, v in where.items()) or "all",
)
@pytest.mark.parametrize("size", [1, 4, 100])
def test_summaries_page_through_the_same_events_as_the_full_listing(
    db_session: Session, run_with_events: str, where: dict[str, Any], size: int
) -> None:
    flt = EventFilter(run_id=run_with_events, **where)

    full = events.list_events(db_session, flt, limit=1000).items
    summaries = _pages(db_session, flt, size)

    assert full, "the filter should match some events"
    assert [s.id for s in summaries] == [e.id for e in full]
    for summary, event in zip(summaries, full, strict=True):
        for field in fields(EventSummary):
            if field.name not in ("summary", "evidence"):
                assert getattr(summary, field.name) == getattr(event, field.name), field.name
        assert summary.evidence is None


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ("flag", FLAG_SUMMARY),
        ("refusal", "signature does not verify"),
        ("both", "the summary wins"),
        ("neither", None),
        ("number", "42"),
        ("unicode", EVIDENCE["unicode"]["summary"]),
    ],
)
def test_the_summary_is_the_evidence_summary_else_the_refusal_reason(
    db_session: Session, run_with_events: str, shape: str, expected: str | None
) -> None:
    worker = list(EVIDENCE).index(shape)
    where = EventFilter(run_id=run_with_events, round=1, worker=worker)

    (item,) = events.list_event_summaries(db_session, where).items

    assert item.summary == expected


def test_summaries_with_evidence_carry_the_stored_evidence(
    db_session: Session, run_with_events: str
) -> None:
    where = EventFilter(run_id=run_with_events, round=1)

    page = events.list_event_summaries(db_session, where, with_evidence=True)

    by_worker = {item.worker: item.evidence for item in page.items}
    assert by_worker == dict(enumerate(EVIDENCE.values()))


def test_summaries_of_reviewed_events_carry_the_review(
    db_session: Session, run_with_events: str
) -> None:
    target = events.list_events(db_session, EventFilter(run_id=run_with_events)).items[0]
    events.review_event(
        db_session, target.id, ReviewStatus.DISMISSED, reviewer="ops", note="noise", now=T0
    )
    db_session.commit()

    (item,) = events.list_event_summaries(
        db_session, EventFilter(review_status=ReviewStatus.DISMISSED)
    ).items

    assert (item.id, item.review_status, item.reviewed_by, item.reviewed_at, item.note) == (
        target.id,
        ReviewStatus.DISMISSED,
        "ops",
        T0,
        "noise",
    )


@pytest.mark.parametrize("limit", [0, events.MAX_PAGE_SIZE + 1])
def test_a_summary_page_size_outside_the_limits_is_refused(db_session: Session, limit: int) -> None:
    with pytest.raises(ValueError, match="between 1 and 1000"):
        events.list_event_summaries(db_session, limit=limit)


def test_round_records_hold_what_the_rounds_hold(db_session: Session, run_with_events: str) -> None:
    stored = rounds.list_rounds(db_session, run_with_events)

    records = rounds.list_round_records(db_session, run_with_events)

    assert [r.number for r in records] == [1, 2, 3]
    for record, row in zip(records, stored, strict=True):
        assert asdict(record) == {f.name: getattr(row, f.name) for f in fields(RoundRecord)}
    assert records[0].bytes_up == 2**40 + 1
    assert records[2].started_at.tzinfo is not None


def test_round_records_of_an_unknown_run_are_empty(db_session: Session) -> None:
    assert rounds.list_round_records(db_session, "no-such-run") == []


def test_json_columns_read_back_what_was_written(db_session: Session) -> None:
    run_id = runs.create_run(db_session, name="json", config={}, seed=1, now=T0).id
    metrics = {
        "big": 2**70,
        "negative": -(2**63),
        "float": 0.1 + 0.2,
        "tiny": 5e-324,
        "nested": {"list": [1, 2.5, None, True, "x"], "empty": {}},
        "text": 'quote " backslash \\ newline \n ünïcödé ✓ 𝔘',
    }
    data = RoundData(number=1, started_at=T0, finished_at=T0, metrics=metrics)
    rounds.record_round(db_session, run_id, data)
    db_session.commit()

    (record,) = rounds.list_round_records(db_session, run_id)

    assert record.metrics == metrics
    assert type(record.metrics["big"]) is int


@pytest.mark.parametrize(
    "text",
    ['{"a": [1, 2.5, null, true, "s"]}', "[]", '"x"', "1e400", b'{"k": "\\u00fc"}'],
)
def test_parse_json_agrees_with_the_standard_library(text: str | bytes) -> None:
    import json

    assert parse_json(text) == json.loads(text)


def test_parse_json_reads_the_non_finite_numbers_json_dumps_writes() -> None:
    value = parse_json("[NaN, Infinity, -Infinity]")

    assert math.isnan(value[0]) and value[1:] == [math.inf, -math.inf]


def test_parse_json_refuses_what_is_not_json() -> None:
    with pytest.raises(ValueError):
        parse_json("{'single': 'quotes'}")
