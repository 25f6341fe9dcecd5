"""Filling PostgreSQL for ``bench_api.py``: runs, rounds, clients, and events by ``COPY``."""

from __future__ import annotations

import json
import random
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import torch
from sqlalchemy import insert

from phalanx.assignment import bibd_assignment
from phalanx.detection import Replica, detect, payload_digest
from phalanx.store import make_engine
from phalanx.store.models import Client, Round, Run


class SeedSettings(Protocol):
    """What seeding reads of the benchmark's settings."""

    @property
    def runs(self) -> int: ...
    @property
    def rounds_per_run(self) -> int: ...
    @property
    def clients(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def events_per_round(self) -> int: ...


# ------------------------------------------------------------------- seeding


def flag_evidence() -> dict[str, Any]:
    """Evidence of one flag, as the coordinator stores it: a liar in a 7-worker STS round."""
    assignment = bibd_assignment(7, 3)
    replicas = []
    for f, workers in enumerate(assignment.files):
        honest = torch.randn(1000, generator=torch.Generator().manual_seed(f))
        for w in workers:
            value = (-honest if w == 4 else honest).to(torch.float32)
            replicas.append(Replica(w, f, value, payload_digest(value.numpy().tobytes())))
    evidence: dict[str, Any] = detect(assignment, replicas).evidence[4].to_dict()
    return evidence


#: Event kinds and how often each occurs.
KINDS = ("outside_max_clique", "majority_minority", "bad_signature", "stale_round")
KIND_WEIGHTS = (0.7, 0.1, 0.1, 0.1)
#: Review statuses and how often each occurs.
STATUSES = ("open", "confirmed", "dismissed")
STATUS_WEIGHTS = (0.7, 0.2, 0.1)


@dataclass(frozen=True)
class Seeded:
    run_ids: list[str]
    client_ids: list[str]
    max_event_id: int
    seconds: float
    evidence_bytes: int


def seed(url: str, settings: SeedSettings) -> Seeded:
    """Fill the database: runs, rounds, clients in bulk inserts; events with ``COPY``."""
    started = time.perf_counter()
    rng = random.Random(settings.seed)
    engine = make_engine(url)
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    run_ids = [str(uuid.uuid4()) for _ in range(settings.runs)]
    client_ids = [str(uuid.uuid4()) for _ in range(settings.clients)]
    config = {
        "name": "bench",
        "rounds": settings.rounds_per_run,
        "assignment": {"scheme": "random", "num_workers": settings.clients, "r": 3},
    }
    with engine.begin() as connection:
        connection.execute(
            insert(Client),
            [
                {
                    "id": cid,
                    "name": f"bench/worker-{i}",
                    "public_key": "-----BEGIN PUBLIC KEY-----\n...\n-----END PUBLIC KEY-----\n",
                    "fingerprint": f"SHA256:bench-{i}",
                    "status": "approved",
                    "created_at": t0,
                }
                for i, cid in enumerate(client_ids)
            ],
        )
        connection.execute(
            insert(Run),
            [
                {
                    "id": rid,
                    "name": f"bench-{i}",
                    "config": config,
                    "status": "succeeded",
                    "seed": i,
                    "created_at": t0 + timedelta(hours=i),
                    "attempts": 1,
                    "cancel_requested": False,
                    "current_round": settings.rounds_per_run,
                }
                for i, rid in enumerate(run_ids)
            ],
        )
        connection.execute(
            insert(Round),
            [
                {
                    "run_id": rid,
                    "number": n,
                    "started_at": t0 + timedelta(hours=i, minutes=n),
                    "finished_at": t0 + timedelta(hours=i, minutes=n, seconds=30),
                    "duration_s": 30.0,
                    "timings": {"assign": 0.001, "exchange": 25.0, "detect": 0.2},
                    "bytes_up": 4_271_226,
                    "bytes_down": 1_423_128,
                    "metrics": {"accuracy": min(0.99, 0.1 + 0.008 * n), "loss": 2.3 / n},
                    "num_flagged": settings.events_per_round,
                    "num_rejected": 0,
                    "assignment": config["assignment"],
                    "model_digest": "0" * 64,
                }
                for i, rid in enumerate(run_ids)
                for n in range(1, settings.rounds_per_run + 1)
            ],
        )
    evidence = flag_evidence()
    reason = json.dumps({"reason": "signature does not verify", "round": 1})
    columns = (
        "run_id, round, client_id, worker, kind, severity, evidence, review_status, created_at"
    )
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        with cursor.copy(f"COPY detection_events ({columns}) FROM STDIN") as copy:
            written = 0
            for i, rid in enumerate(run_ids):
                for n in range(1, settings.rounds_per_run + 1):
                    for _ in range(settings.events_per_round):
                        worker = rng.randrange(settings.clients)
                        kind = rng.choices(KINDS, KIND_WEIGHTS)[0]
                        if kind in ("outside_max_clique", "majority_minority"):
                            body = json.dumps({**evidence, "worker": worker})
                        else:
                            body = reason
                        copy.write_row(
                            (
                                rid,
                                n,
                                client_ids[worker],
                                worker,
                                kind,
                                "high",
                                body,
                                rng.choices(STATUSES, STATUS_WEIGHTS)[0],
                                t0 + timedelta(hours=i, minutes=n, microseconds=written),
                            )
                        )
                        written += 1
        raw.commit()
        cursor.execute("ANALYZE")
        raw.commit()
        cursor.execute("SELECT max(id) FROM detection_events")
        max_id = int(cursor.fetchone()[0])  # type: ignore[index]
    finally:
        raw.close()
        engine.dispose()
    return Seeded(
        run_ids=run_ids,
        client_ids=client_ids,
        max_event_id=max_id,
        seconds=time.perf_counter() - started,
        evidence_bytes=len(json.dumps(evidence)),
    )
