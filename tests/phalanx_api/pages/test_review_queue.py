"""The review queue shows each flag's agreeing group from the round's record.

An event stores the group as a count and a digest; the members are stored once, with
the round (:class:`~phalanx.agreement_record.AgreementRecord`). Recorded as the
coordinator records them, then read through the dashboard on SQLite and PostgreSQL.
"""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from phalanx.agreement_record import AgreementRecord
from phalanx.assignment import bibd_assignment
from phalanx.detection import detect
from phalanx.store import EventData, EventFilter, Severity
from phalanx_api.pages.review_queue import review_queue
from tests.support.factories import Keys, TestClient, post_login
from tests.support.recorded_round import record_first_round
from tests.support.replicas import attacked

HTML = {"Accept": "text/html,application/xhtml+xml"}


def seed_flag(sessions: sessionmaker[Session], *, with_group: bool = True) -> str:
    """One round of STS(15) in which worker 4 lied on every file and was flagged."""
    assignment = bibd_assignment(15, 3)
    verdict = detect(assignment, attacked(assignment, {4}))
    assert verdict.flagged == {4}
    agreement = AgreementRecord.from_verdict(verdict).to_dict()
    if not with_group:
        agreement = {**agreement, "version": 2}
        del agreement["agreeing"]
    evidence = verdict.evidence[4]
    return record_first_round(
        sessions,
        name="flag",
        assignment={"scheme": "bibd", "num_workers": 15, "r": 3, "num_files": 35},
        agreement=agreement,
        events=[
            EventData(
                kind=evidence.kind,
                severity=Severity(evidence.severity),
                worker=4,
                client_id=None,
                evidence=evidence.to_dict(),
            )
        ],
    )


def test_the_operator_sees_who_agreed_on_the_queue_and_through_the_api(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    run_id = seed_flag(fresh_sessions)
    with fresh_sessions() as session:
        (card,) = review_queue(session, EventFilter(run_id=run_id)).cards
        assert "clique" not in card.event.evidence
        assert card.event.evidence["agreeing"]["count"] == 14
        facts = dict(card.explanation.facts)
        assert facts["Agreeing group"] == "workers 0, 1, 2, 3 and 5 to 14"  # all 14 named
        assert facts["Disagreed with"] == "every worker of the agreeing group"
    assert post_login(fresh_client, fresh_keys.viewer).status_code == 303
    queue = fresh_client.get("/events", params={"run_id": run_id}, headers=HTML).text
    assert "Agreeing group" in queue and "workers 0, 1, 2, 3 and 5 to 14" in queue
    detail = fresh_client.get(
        f"/api/v1/runs/{run_id}/rounds/1", headers=fresh_keys.headers("viewer")
    ).json()
    assert detail["agreement"]["agreeing"] == [[0, 3], [5, 14]]


def test_a_round_without_the_group_says_so_instead_of_guessing(
    fresh_sessions: sessionmaker[Session],
) -> None:
    run_id = seed_flag(fresh_sessions, with_group=False)
    with fresh_sessions() as session:
        (card,) = review_queue(session, EventFilter(run_id=run_id)).cards
        assert dict(card.explanation.facts)["Agreeing group"] == (
            "14 workers (the round's record does not list them)"
        )


def test_the_queue_shows_each_replica_s_full_digest_from_the_round_s_record(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    run_id = seed_flag(fresh_sessions)
    with fresh_sessions() as session:
        (card,) = review_queue(session, EventFilter(run_id=run_id)).cards
        rows = [r for f in card.explanation.files for r in f.replicas]
        assert rows and all(len(r.digest) == 32 for r in rows)
        assert all(len(r.full_digest) == 64 and r.full_digest.startswith(r.digest) for r in rows)
    assert post_login(fresh_client, fresh_keys.viewer).status_code == 303
    queue = fresh_client.get("/events", params={"run_id": run_id}, headers=HTML).text
    assert all(f'title="{r.full_digest}"' in queue for r in rows)
    detail = fresh_client.get(
        f"/api/v1/runs/{run_id}/rounds/1", headers=fresh_keys.headers("viewer")
    ).json()
    assert {r.full_digest for r in rows} <= set(detail["agreement"]["digests"])
