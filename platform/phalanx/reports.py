"""What the coordinator reports after each round, independent of where it is stored."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from phalanx.agreement_record import AgreementRecord
from phalanx.event_kinds import FAULT_KINDS

if TYPE_CHECKING:
    from phalanx.replies import Rejection


@dataclass(frozen=True)
class EventReport:
    """One detection event: a flagged worker or a rejected reply."""

    worker: int
    client_id: str | None
    kind: str
    severity: str
    evidence: dict[str, Any]


@dataclass(frozen=True)
class RoundReport:
    """Everything a finished round leaves behind.

    ``agreement`` records the round's agreement graph as detection saw it
    (:mod:`phalanx.agreement_record`), so that whoever shows the round only draws it.
    """

    round: int
    started_at: datetime
    finished_at: datetime
    loss: float
    accuracy: float
    flagged: tuple[int, ...]
    rejected: tuple[int, ...]
    dropped_files: tuple[int, ...]
    events: tuple[EventReport, ...]
    bytes_up: int
    bytes_down: int
    timings: dict[str, float]
    assignment: dict[str, Any]
    model_digest: str
    metrics: dict[str, float] = field(default_factory=dict)
    agreement: AgreementRecord | None = None

    @property
    def duration_s(self) -> float:
        """Wall-clock length of the round."""
        return (self.finished_at - self.started_at).total_seconds()


class RoundSink(Protocol):
    """Where finished rounds go (the database, a list in tests, the console)."""

    def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
        """Persist the checkpoint, then the round; only then does the round count as done."""
        ...


def rejection_event(rejection: Rejection, client_id: str | None, t: int) -> EventReport:
    """Build the event of a refused reply, or of a worker that failed (a fault: low severity)."""
    fault = rejection.kind in FAULT_KINDS
    return EventReport(
        worker=rejection.worker,
        client_id=client_id,
        kind=rejection.kind,
        severity="low" if fault else "high",
        evidence={"reason": rejection.reason, "round": t},
    )
