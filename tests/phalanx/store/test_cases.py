"""Cases (phalanx.store.cases): events gathered per client and run, reviewed together.

On a migrated SQLite and PostgreSQL database.
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import (
    CaseFilter,
    CaseSort,
    ConflictError,
    DetectionCase,
    DetectionEvent,
    EventKind,
    NotFoundError,
    ReviewStatus,
    Severity,
    cases,
    events,
    rounds,
)
from phalanx.store.rounds import EventData
from tests.support.store_rows import new_client, new_run, round_data

FLAG = EventKind.OUTSIDE_MAX_CLIQUE
REFUSAL = EventKind.BAD_SIGNATURE


def record(session: Session, run_id: str, number: int, *found: EventData) -> None:
    rounds.record_round(session, run_id, round_data(number), list(found))


def case_events(session: Session, case_id: int) -> list[DetectionEvent]:
    query = select(DetectionEvent).where(DetectionEvent.case_id == case_id)
    return list(session.scalars(query.order_by(DetectionEvent.id)))


def only_case(session: Session, run_id: str, subject: str) -> DetectionCase:
    query = select(DetectionCase).where(
        DetectionCase.run_id == run_id, DetectionCase.subject == subject
    )
    return session.scalars(query).one()


def test_the_events_of_one_client_in_one_run_form_one_case(db_session: Session) -> None:
    run_id = new_run(db_session).id
    other_run = new_run(db_session, name="other").id
    alice = new_client(db_session, "alice")
    for number in (1, 2, 3):
        record(
            db_session,
            run_id,
            number,
            EventData(kind=FLAG, severity=Severity.HIGH, worker=0, client_id=alice),
            EventData(kind=REFUSAL, severity=Severity.HIGH, worker=0, client_id=alice),
            EventData(kind=EventKind.OUTLIER, severity=Severity.LOW, worker=4),
            EventData(kind=EventKind.TIED_GROUPS, severity=Severity.MEDIUM),
        )
    record(db_session, other_run, 1, EventData(kind=FLAG, severity=Severity.HIGH, client_id=alice))
    db_session.commit()

    found = only_case(db_session, run_id, f"client:{alice}")
    assert (found.client_id, found.worker) == (alice, 0)
    assert (found.event_count, found.open_count, found.confirmed_count) == (6, 6, 0)
    assert (found.first_round, found.last_round) == (1, 3)
    assert found.review_status == ReviewStatus.OPEN and found.severity == Severity.HIGH
    assert [e.id for e in case_events(db_session, found.id)][-1] == found.latest_event_id
    kinds = cases.kinds_of(db_session, [found.id])[found.id]
    assert sorted((k.kind, k.event_count) for k in kinds) == [(REFUSAL, 3), (FLAG, 3)]
    worker_case = only_case(db_session, run_id, "worker:4")
    assert (worker_case.client_id, worker_case.event_count) == (None, 3)
    notices = only_case(db_session, run_id, "round")
    assert (notices.worker, notices.severity, notices.event_count) == (None, Severity.MEDIUM, 3)
    assert cases.count_cases(db_session) == 4
    assert cases.count_cases(db_session, CaseFilter(client_id=alice)) == 2
    assert cases.open_cases_by_run(db_session, [run_id, other_run, "none"]) == {
        run_id: 3,
        other_run: 1,
        "none": 0,
    }


def test_the_strongest_event_is_the_latest_of_the_highest_severity(db_session: Session) -> None:
    run_id = new_run(db_session).id
    severities = [Severity.LOW, Severity.HIGH, Severity.HIGH, Severity.MEDIUM, Severity.LOW]
    for number, severity in enumerate(severities, start=1):
        record(db_session, run_id, number, EventData(kind=FLAG, severity=severity, worker=1))
    db_session.commit()

    found = only_case(db_session, run_id, "worker:1")
    ids = [e.id for e in case_events(db_session, found.id)]
    assert found.strongest_event_id == ids[2]  # round 3: the later of the two high ones
    assert found.latest_event_id == ids[4]
    assert found.severity == Severity.HIGH


def test_confirming_a_case_closes_every_open_event_with_the_note(db_session: Session) -> None:
    run_id = new_run(db_session).id
    for number in range(1, 61):
        record(db_session, run_id, number, EventData(kind=FLAG, severity=Severity.HIGH, worker=2))
    found = only_case(db_session, run_id, "worker:2")
    first = case_events(db_session, found.id)[0]
    events.review_event(db_session, first.id, ReviewStatus.DISMISSED, reviewer="bob")
    assert found.open_count == 59
    db_session.commit()

    (closed,) = cases.review_cases(
        db_session, [found.id], ReviewStatus.CONFIRMED, reviewer="alice", note="lies every round"
    )
    db_session.commit()

    assert len(closed.event_ids) == 59 and closed.kinds == {FLAG}
    stored = case_events(db_session, found.id)
    assert [e.review_status for e in stored[1:]] == [ReviewStatus.CONFIRMED] * 59
    assert {(e.reviewed_by, e.note) for e in stored[1:]} == {("alice", "lies every round")}
    assert (stored[0].review_status, stored[0].reviewed_by) == (ReviewStatus.DISMISSED, "bob")
    db_session.refresh(found)
    assert (found.open_count, found.confirmed_count, found.event_count) == (0, 59, 60)
    assert (found.review_status, found.reviewed_by) == (ReviewStatus.CONFIRMED, "alice")
    with pytest.raises(ConflictError, match=f"case {found.id} was already confirmed by 'alice'"):
        cases.review_cases(db_session, [found.id], ReviewStatus.DISMISSED, reviewer="bob")


def test_a_review_names_unknown_cases_refuses_duplicates_and_changes_nothing(
    db_session: Session,
) -> None:
    run_id = new_run(db_session).id
    record(db_session, run_id, 1, EventData(kind=FLAG, severity=Severity.HIGH, worker=0))
    found = only_case(db_session, run_id, "worker:0")
    db_session.commit()

    with pytest.raises(NotFoundError, match=r"cases \[9999, 8888\] not found"):
        cases.review_cases(db_session, [found.id, 9999, 8888], ReviewStatus.CONFIRMED, reviewer="a")
    db_session.rollback()
    with pytest.raises(ValueError, match="once"):
        cases.review_cases(db_session, [found.id, found.id], ReviewStatus.CONFIRMED, reviewer="a")
    with pytest.raises(ValueError, match="reopen"):
        cases.review_cases(db_session, [found.id], ReviewStatus.OPEN, reviewer="a")
    db_session.rollback()
    assert [e.review_status for e in case_events(db_session, found.id)] == [ReviewStatus.OPEN]


def one_flag_case(session: Session) -> tuple[str, str, DetectionCase]:
    """A run whose client bob was flagged in round 1: the run, bob, his case."""
    run_id = new_run(session).id
    bob = new_client(session, "bob")
    record(session, run_id, 1, EventData(kind=FLAG, severity=Severity.HIGH, client_id=bob))
    return run_id, bob, only_case(session, run_id, f"client:{bob}")


def test_a_muted_kind_arrives_dismissed_and_stored_and_other_kinds_reopen_the_case(
    db_session: Session,
) -> None:
    run_id, bob, found = one_flag_case(db_session)
    (closed,) = cases.review_cases(
        db_session, [found.id], ReviewStatus.DISMISSED, reviewer="carol", note="noisy link"
    )
    assert cases.mute_kinds(db_session, found.id, closed.kinds, muted_by="carol") == [FLAG]
    assert cases.mute_kinds(db_session, found.id, [FLAG], muted_by="dave") == []  # first mute kept
    db_session.commit()

    record(db_session, run_id, 2, EventData(kind=FLAG, severity=Severity.HIGH, client_id=bob))
    db_session.commit()
    db_session.refresh(found)
    muted = case_events(db_session, found.id)[-1]
    assert muted.muted and muted.review_status == ReviewStatus.DISMISSED
    assert muted.reviewed_by == "carol"
    assert (found.event_count, found.muted_count, found.review_status) == (
        2,
        1,
        ReviewStatus.DISMISSED,
    )
    assert cases.count_cases(db_session, CaseFilter(review_status=ReviewStatus.OPEN)) == 0

    record(db_session, run_id, 3, EventData(kind=REFUSAL, severity=Severity.HIGH, client_id=bob))
    db_session.commit()
    db_session.refresh(found)
    assert (found.open_count, found.review_status) == (1, ReviewStatus.OPEN)
    other_run = new_run(db_session, name="next").id
    record(db_session, other_run, 1, EventData(kind=FLAG, severity=Severity.HIGH, client_id=bob))
    db_session.commit()
    assert not case_events(db_session, only_case(db_session, other_run, f"client:{bob}").id)[
        0
    ].muted  # a mute holds in its own run only


def test_an_unmute_lets_later_events_arrive_open_and_leaves_the_muted_ones_dismissed(
    db_session: Session,
) -> None:
    run_id, bob, found = one_flag_case(db_session)
    cases.review_cases(db_session, [found.id], ReviewStatus.DISMISSED, reviewer="carol")
    cases.mute_kinds(db_session, found.id, [FLAG], muted_by="carol", note="noisy link")
    record(db_session, run_id, 2, EventData(kind=FLAG, severity=Severity.HIGH, client_id=bob))
    db_session.commit()

    with pytest.raises(ConflictError, match=r"'bad_signature' is not muted \(muted kinds"):
        cases.unmute_kinds(db_session, found.id, [FLAG, REFUSAL])
    (lifted,) = cases.unmute_kinds(db_session, found.id, [FLAG])
    db_session.commit()

    assert (lifted.kind, lifted.muted_by, lifted.mute_note) == (FLAG, "carol", "noisy link")
    with pytest.raises(ConflictError, match="has no muted kind"):
        cases.unmute_kinds(db_session, found.id)
    with pytest.raises(NotFoundError):
        cases.unmute_kinds(db_session, 2**62)
    record(db_session, run_id, 3, EventData(kind=FLAG, severity=Severity.HIGH, client_id=bob))
    db_session.commit()
    db_session.refresh(found)
    stored = case_events(db_session, found.id)
    assert [(e.review_status, e.muted) for e in stored] == [
        (ReviewStatus.DISMISSED, False),
        (ReviewStatus.DISMISSED, True),
        (ReviewStatus.OPEN, False),
    ]
    assert (found.open_count, found.muted_count, found.review_status) == (
        1,
        1,
        ReviewStatus.OPEN,
    )


def test_reviewing_one_event_keeps_its_case_counts(db_session: Session) -> None:
    run_id = new_run(db_session).id
    record(db_session, run_id, 1, EventData(kind=FLAG, severity=Severity.HIGH, worker=3))
    found = only_case(db_session, run_id, "worker:3")
    (event,) = case_events(db_session, found.id)

    events.review_event(db_session, event.id, ReviewStatus.CONFIRMED, reviewer="a")
    assert (found.open_count, found.confirmed_count) == (0, 1)
    assert found.review_status == ReviewStatus.CONFIRMED
    events.review_event(db_session, event.id, ReviewStatus.OPEN, reviewer="a")
    assert (found.open_count, found.review_status) == (1, ReviewStatus.OPEN)


def test_cases_sort_by_severity_count_and_recency_and_filter(db_session: Session) -> None:
    run_id = new_run(db_session).id
    other_run = new_run(db_session, name="other").id
    # worker 0: 3 low events; worker 1: one high event; worker 2: two medium, the latest.
    for number in (1, 2, 3):
        record(db_session, run_id, number, EventData(kind=FLAG, severity=Severity.LOW, worker=0))
    record(db_session, run_id, 4, EventData(kind=REFUSAL, severity=Severity.HIGH, worker=1))
    for number in (5, 6):
        record(db_session, run_id, number, EventData(kind=FLAG, severity=Severity.MEDIUM, worker=2))
    record(db_session, other_run, 1, EventData(kind=FLAG, severity=Severity.LOW, worker=0))
    db_session.commit()
    here = CaseFilter(run_id=run_id)

    def order(sort: CaseSort, descending: bool = True, where: CaseFilter = here) -> list[str]:
        page = cases.list_cases(db_session, where, sort=sort, descending=descending)
        return [c.subject for c in page.items]

    assert order(CaseSort.SEVERITY) == ["worker:1", "worker:2", "worker:0"]
    assert order(CaseSort.COUNT) == ["worker:0", "worker:2", "worker:1"]
    assert order(CaseSort.RECENCY) == ["worker:2", "worker:1", "worker:0"]
    assert order(CaseSort.RECENCY, descending=False) == ["worker:0", "worker:1", "worker:2"]
    assert order(CaseSort.COUNT, where=CaseFilter(run_id=run_id, kind=REFUSAL)) == ["worker:1"]
    assert order(CaseSort.COUNT, where=CaseFilter(kind="no_such_kind")) == []
    assert order(CaseSort.COUNT, where=CaseFilter(severity=Severity.LOW)) == [
        "worker:0",
        "worker:0",
    ]
    page = cases.list_cases(db_session, here, sort=CaseSort.COUNT, limit=2)
    assert (page.total, page.next_offset, len(page.items)) == (3, 2, 2)
    rest = cases.list_cases(db_session, here, sort=CaseSort.COUNT, limit=2, offset=2)
    assert ([c.subject for c in rest.items], rest.next_offset) == (["worker:1"], None)
    with pytest.raises(ValueError, match="limit"):
        cases.list_cases(db_session, limit=0)


def test_cases_go_with_their_run(db_session: Session) -> None:
    run_id = new_run(db_session).id
    record(db_session, run_id, 1, EventData(kind=FLAG, severity=Severity.HIGH, worker=0))
    db_session.commit()
    from phalanx.store.models import Run

    run = db_session.get(Run, run_id)
    db_session.delete(run)
    db_session.commit()
    assert cases.count_cases(db_session) == 0


def test_a_long_lived_session_counts_on_a_case_reviewed_by_another(
    db_session_factory: sessionmaker[Session],
) -> None:
    with db_session_factory() as coordinator:
        run_id = new_run(coordinator).id
        record(coordinator, run_id, 1, EventData(kind=FLAG, severity=Severity.HIGH, worker=0))
        coordinator.commit()
        found = only_case(coordinator, run_id, "worker:0")  # kept in its identity map
        coordinator.commit()
        with db_session_factory() as reviewer:
            cases.review_cases(reviewer, [found.id], ReviewStatus.CONFIRMED, reviewer="alice")
            reviewer.commit()

        record(coordinator, run_id, 2, EventData(kind=FLAG, severity=Severity.HIGH, worker=0))
        coordinator.commit()

    with db_session_factory() as session:
        stored = only_case(session, run_id, "worker:0")
        assert (stored.event_count, stored.open_count, stored.confirmed_count) == (2, 1, 1)
        assert (stored.review_status, stored.reviewed_by) == (ReviewStatus.OPEN, "alice")


def test_two_reviewers_of_one_case_the_second_waits_then_finds_it_closed(
    db_session_factory: sessionmaker[Session],
) -> None:
    with db_session_factory.begin() as session:
        run_id = new_run(session).id
        record(session, run_id, 1, EventData(kind=FLAG, severity=Severity.HIGH, worker=0))
        case_id = only_case(session, run_id, "worker:0").id
    outcome: list[BaseException | None] = []
    first = db_session_factory()
    cases.review_cases(first, [case_id], ReviewStatus.CONFIRMED, reviewer="alice")

    def second() -> None:
        with db_session_factory() as session:
            try:
                cases.review_cases(session, [case_id], ReviewStatus.DISMISSED, reviewer="bob")
                session.commit()
                outcome.append(None)
            except ConflictError as exc:
                outcome.append(exc)

    waiting = threading.Thread(target=second)
    waiting.start()
    waiting.join(0.5)  # it waits for the first review's lock
    first.commit()
    first.close()
    waiting.join(60)

    assert len(outcome) == 1 and isinstance(outcome[0], ConflictError)
    assert "already confirmed by 'alice'" in str(outcome[0])
    with db_session_factory() as session:
        reviewed = {e.reviewed_by for e in case_events(session, case_id)}
        assert reviewed == {"alice"}
