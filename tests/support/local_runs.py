"""A recorded local-data run with a per-client view: an unusual honest client and an attacker."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from phalanx.reports import ClientRound
from phalanx.store import EventData, Severity, rounds, runs
from tests.support.factories import seed_client
from tests.support.store_rows import round_data

#: A client name no page may render as markup.
HOSTILE_NAME = '<img src=x onerror=alert("heat")>'
#: Three clients by three labels; worker 1 holds one label mostly (an unusual honest client).
HISTOGRAMS = [[30, 30, 30], [2, 85, 3], [40, 25, 25]]
PARTITION = {
    "kind": "dirichlet",
    "parameters": {"alpha": 0.3, "seed": 7},
    "num_classes": 3,
    "samples": [90, 90, 90],
    "label_totals": [72, 140, 58],
    "unassigned": 0,
    "histograms": HISTOGRAMS,
}
ATTACKER = 2
UNUSUAL = 1


@dataclass(frozen=True)
class LocalRun:
    """The seeded run and its clients, by worker."""

    run_id: str
    clients: dict[int, str]


def client_rows(t: int, clients: dict[int, str]) -> list[ClientRound]:
    """Round ``t``'s rows: worker 2 sits far (and lies in round 3's evaluation)."""
    evaluated = t != 2  # round 2 ran no federated evaluation
    lying = t == 3
    return [
        ClientRound(0, clients[0], 72, 0.5, 1.0, "counted" if evaluated else None,
                    0.9 if evaluated else None, 0.70 + t / 100 if evaluated else None,
                    18 if evaluated else None),
        ClientRound(1, clients[1], 72, 1.4, 2.8, "counted" if evaluated else None,
                    1.2 if evaluated else None, 0.55 if evaluated else None,
                    18 if evaluated else None),
        ClientRound(2, clients[2], 72, 6.0 + t, 12.0 + t,
                    ("refused" if lying else "counted") if evaluated else None,
                    None if lying or not evaluated else 0.3,
                    None if lying or not evaluated else 0.97,
                    None if lying or not evaluated else 18),
    ]  # fmt: skip


def seed_local_run(sessions: sessionmaker[Session], *, name: str = "local") -> LocalRun:
    """A 3-round local-data run: partition stored, per-client rows, worker 2 flagged twice."""
    with sessions.begin() as session:
        run = runs.create_run(
            session,
            name=name,
            config={"name": name, "rounds": 3, "data": {"mode": "local"}},
            seed=7,
        )
        clients = {
            w: seed_client(session, HOSTILE_NAME if w == ATTACKER else f"{name}-worker-{w}")
            for w in range(3)
        }
        runs.record_partition(session, run.id, PARTITION)
        for t in (1, 2, 3):
            fed = {} if t == 2 else {"fed_accuracy": 0.6 + t / 100, "fed_loss": 1.1}
            events = [
                EventData(
                    kind="outlier",
                    severity=Severity.HIGH,
                    worker=ATTACKER,
                    client_id=clients[ATTACKER],
                    evidence={"round": t},
                )
            ] if t > 1 else []  # fmt: skip
            rounds.record_round(
                session,
                run.id,
                round_data(t, metrics={"accuracy": 0.5 + t / 10, "loss": 1.0, **fed}),
                events,
                clients=client_rows(t, clients),
            )
    return LocalRun(run.id, clients)
