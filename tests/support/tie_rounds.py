"""A recorded round whose largest agreeing groups tied, for the dashboard's tests."""

from __future__ import annotations

import itertools

import torch
from sqlalchemy.orm import Session, sessionmaker

from phalanx.agreement_record import AgreementRecord
from phalanx.assignment import Assignment
from phalanx.detection import Replica, detect, payload_digest
from phalanx.reports import suspects_event
from phalanx.store import EventData, Severity
from tests.support.recorded_round import record_first_round


def seed_tie(sessions: sessionmaker[Session]) -> tuple[str, set[int]]:
    """One round on the triples of 6 workers where colluders 0 and 1 tie with 2 and 3."""
    assignment = Assignment(num_workers=6, files=tuple(itertools.combinations(range(6), 3)))
    replicas = []
    for f, workers in enumerate(assignment.files):
        honest = torch.randn(8, generator=torch.Generator().manual_seed(f))
        lied = {0, 1} <= set(workers) and bool({2, 3} & set(workers))
        for w in workers:
            value = (-honest if lied and w < 2 else honest).to(torch.float32)
            replicas.append(Replica(w, f, value, payload_digest(value.numpy().tobytes())))
    verdict = detect(assignment, replicas)
    assert verdict.rule == "unanimity" and verdict.suspects == {0, 1, 2, 3}
    notice = suspects_event(verdict, 1)
    run_id = record_first_round(
        sessions,
        name="tie",
        assignment={"scheme": "subsets", "num_workers": 6, "r": 3, "num_files": 20},
        agreement=AgreementRecord.from_verdict(verdict).to_dict(),
        events=[
            EventData(
                kind=notice.kind,
                severity=Severity(notice.severity),
                worker=notice.worker,
                client_id=notice.client_id,
                evidence=notice.evidence,
            )
        ],
    )
    return run_id, set(verdict.dropped)
