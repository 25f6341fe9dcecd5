"""A recorded run whose rounds were timed: a straggler, an absent worker, honest quick ones."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from phalanx.response_times import WorkerResponse
from phalanx.store import RoundData, rounds, runs
from tests.support.factories import seed_client

#: A client name no page may render as markup.
HOSTILE_NAME = '<script>alert("slow")</script>&amp;'


@dataclass(frozen=True)
class TimedRun:
    """The seeded run: its id and the clients of its workers, by worker."""

    run_id: str
    clients: dict[int, str]
    straggler: int = 4
    absent: int = 5


def straggler_seconds(t: int) -> float:
    """The straggler's time in round ``t``: about 41 s against the others' 1 to 2.5 s."""
    return 40.0 + t / 10


def seed_timed_run(
    sessions: sessionmaker[Session],
    *,
    num_rounds: int = 5,
    num_workers: int = 6,
    name: str = "timed",
    straggler_name: str = HOSTILE_NAME,
    at: datetime | None = None,
    simulated: bool = True,
) -> TimedRun:
    """A run under ``fastest_k`` timed by the systems model (not ``simulated``: deployed).

    Workers 0..3 answer in 1 to 2.5 s and are kept; worker 4 (its client named
    ``straggler_name``) answers after about 41 s, late every round; worker 5 is
    away and never answers. Workers beyond 5, if any, answer in 2 s. No event
    is recorded: slowness is none.
    """
    start = at or datetime(2025, 1, 1, tzinfo=UTC)
    with sessions.begin() as session:
        run = runs.create_run(
            session,
            name=name,
            config={"name": name, "rounds": num_rounds, "systems": {"enabled": simulated}},
            seed=1,
            now=start,
        )
        clients = {
            w: seed_client(session, straggler_name if w == 4 else f"{name}-worker-{w}")
            for w in range(num_workers)
        }
        for t in range(1, num_rounds + 1):
            times: dict[int, float | None] = {
                w: 1.0 + w / 2 if w < 4 else 2.0 for w in range(num_workers)
            }
            times[4], times[5] = straggler_seconds(t), None
            responses = [
                WorkerResponse(
                    w,
                    s,
                    "missing" if s is None else "late" if w == 4 else "kept",
                    clients[w],
                )
                for w, s in times.items()
            ]
            rounds.record_round(
                session,
                run.id,
                RoundData(
                    number=t,
                    started_at=start + timedelta(minutes=t),
                    finished_at=start + timedelta(minutes=t, seconds=3),
                    metrics={"accuracy": 0.5, "loss": 1.0, "simulated_s": 2.5},
                ),
                responses=responses,
            )
        return TimedRun(run.id, clients)
