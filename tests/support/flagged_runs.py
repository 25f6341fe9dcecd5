"""A running run with real detection evidence, as the dashboard's page tests read it.

7 workers on an STS(7) assignment, two colluding liars (workers 2 and 5) flagged by
:func:`phalanx.detection.detect` every round, and in the last round a refused reply
(worker 6); each round recorded through the store like the coordinator records it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import torch
from sqlalchemy.orm import Session, sessionmaker

from phalanx.agreement_record import AgreementRecord
from phalanx.assignment import bibd_assignment
from phalanx.detection import Replica, detect, payload_digest
from phalanx.event_kinds import EventKind
from phalanx.store import EventData, RoundData, Severity, rounds, runs
from tests.support.factories import seed_client

LIARS = (2, 5)


@dataclass(frozen=True)
class Seeded:
    run_id: str
    clients: list[str]  # by worker index


def _replicas(liars: tuple[int, ...], refused: int | None = None) -> list[Replica]:
    assignment = bibd_assignment(7, 3)
    out = []
    for f, workers in enumerate(assignment.files):
        honest = torch.randn(8, generator=torch.Generator().manual_seed(f))
        for w in workers:
            value = (-honest if w in liars else honest).to(torch.float32)
            if w != refused:
                out.append(Replica(w, f, value, payload_digest(value.numpy().tobytes())))
    return out


def seed_detected_run(sessions: sessionmaker[Session], num_rounds: int = 2) -> Seeded:
    """A running run of 7 workers with rounds, flags from real evidence and one refused reply.

    Each round is stored as the coordinator stores it: its events and its agreement
    graph; in the last round worker 6's reply is refused before detection.
    """
    config = {
        "name": "seeded",
        "rounds": 5,
        "assignment": {"scheme": "bibd", "num_workers": 7, "r": 3},
        "attack": {"name": "reversed_gradient", "q": 2, "selection": "weak"},
    }
    start = datetime(2025, 1, 1, tzinfo=UTC)
    with sessions.begin() as session:
        run = runs.create_run(session, name="seeded", config=config, seed=1)
        runs.start_run(session, run.id, "test")
        clients = [seed_client(session, f"seeded/worker-{w}") for w in range(7)]
        for number in range(1, num_rounds + 1):
            refused = 6 if number == num_rounds else None
            verdict = detect(bibd_assignment(7, 3), _replicas(LIARS, refused))
            assert verdict.flagged == set(LIARS)
            events = [
                EventData(
                    kind=e.kind,
                    severity=Severity(e.severity),
                    worker=w,
                    client_id=clients[w],
                    evidence=e.to_dict(),
                )
                for w, e in sorted(verdict.evidence.items())
            ]
            if number == num_rounds:
                events.append(
                    EventData(
                        kind=EventKind.BAD_SIGNATURE,
                        severity=Severity.HIGH,
                        worker=6,
                        client_id=clients[6],
                        evidence={"reason": "signature does not verify", "round": number},
                    )
                )
            rounds.record_round(
                session,
                run.id,
                RoundData(
                    number=number,
                    started_at=start + timedelta(minutes=number),
                    finished_at=start + timedelta(minutes=number, seconds=30),
                    bytes_up=1_000_000 * number,
                    bytes_down=400_000,
                    metrics={"accuracy": 0.3 + 0.2 * number, "loss": 2.0 / number},
                    num_flagged=len(verdict.flagged),
                    num_rejected=int(number == num_rounds),
                    assignment={"scheme": "bibd", "num_workers": 7, "r": 3, "num_files": 7},
                    agreement=AgreementRecord.from_verdict(verdict).to_dict(),
                ),
                events,
            )
        return Seeded(run.id, clients)
