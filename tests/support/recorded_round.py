"""A run with one recorded round, written as the coordinator's sink writes it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import EventData, RoundData, rounds, runs


def record_first_round(
    sessions: sessionmaker[Session],
    *,
    name: str,
    assignment: dict[str, Any],
    agreement: dict[str, Any],
    events: list[EventData],
) -> str:
    """Create a run named ``name`` and record its round 1; return the run's id."""
    now = datetime(2025, 1, 1, tzinfo=UTC)
    config = {
        "name": name,
        "rounds": 3,
        "assignment": {k: assignment[k] for k in ("scheme", "num_workers")},
    }
    with sessions.begin() as session:
        run = runs.create_run(session, name=name, config=config, seed=1)
        rounds.record_round(
            session,
            run.id,
            RoundData(
                number=1,
                started_at=now,
                finished_at=now,
                assignment=assignment,
                agreement=agreement,
            ),
            events,
        )
        return run.id
