"""What the coordinator reports after each round, independent of where it is stored."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from phalanx.agreement_record import AgreementRecord
from phalanx.english_list import name_numbers
from phalanx.event_kinds import FAULT_KINDS, EventKind
from phalanx.response_times import LateResponse, WorkerResponse

if TYPE_CHECKING:
    from phalanx.detection import Verdict
    from phalanx.replies import Rejection


@dataclass(frozen=True)
class EventReport:
    """One detection event: a flagged worker or a rejected reply."""

    worker: int | None
    client_id: str | None
    kind: str
    severity: str
    evidence: dict[str, Any]


@dataclass(frozen=True)
class ClientRound:
    """One worker's row of a local-data round (:mod:`phalanx.client_rounds`).

    A value is ``None`` when the round has none for the worker.
    """

    worker: int
    client_id: str | None
    samples: int | None = None
    """The sample count its accepted reply claimed (before any cap)."""
    distance: float | None = None
    """L2 distance of its update to the round's aggregate."""
    distance_ratio: float | None = None
    """``distance`` over the round's median distance."""
    eval_status: str | None = None
    """``counted``, ``clipped``, ``refused``, ``failed``, ``silent`` (asked, never
    answered); ``None``: not asked."""
    eval_loss: float | None = None
    eval_accuracy: float | None = None
    eval_samples: int | None = None


@dataclass(frozen=True)
class RoundReport:
    """Everything a finished round leaves behind.

    ``agreement`` records the round's agreement graph as detection saw it
    (:mod:`phalanx.agreement_record`), so that whoever shows the round only draws it.
    ``responses`` holds each dispatched worker's response time
    (:mod:`phalanx.response_times`) when the round was timed (by the systems model,
    or by real arrival times in a deployment); it is empty otherwise.
    ``late_responses`` are the replies to earlier rounds that came during this one,
    after their rounds closed, and to this round that came after its close while it
    sent the model again: each turns that round's ``missing`` response ``late``.
    ``seen_clients`` are the clients of the workers a reply came from this round
    (accepted or refused: each was heard from), so that their last contact is known
    whatever the transport.
    ``clients`` (local data) holds each worker's row of the per-client view
    (:mod:`phalanx.client_rounds`). ``late_responses`` are the replies to earlier
    rounds that came during this one, after their rounds closed, and to this round
    that came after its close while it sent the model again: each turns that
    round's ``missing`` response ``late``.
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
    responses: tuple[WorkerResponse, ...] = ()
    late_responses: tuple[LateResponse, ...] = ()
    seen_clients: tuple[str, ...] = ()
    clients: tuple[ClientRound, ...] = ()
    """Local data: each worker given work, its distance and federated evaluation."""

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


def suspects_event(verdict: Verdict, t: int) -> EventReport:
    """Build round ``t``'s notice of its suspects, workers left unflagged on purpose.

    They are outside a largest group of mutually agreeing workers, which proves nothing
    on one round: the groups tied (kind ``tied_groups``), or colluders may have outvoted
    them (``unproven_outsiders``). The notice names them and the files the round left out
    for them, in data and in words.
    """
    suspects = sorted(verdict.suspects)
    left_out = sorted(
        f for f, d in verdict.drops.items() if d.reason in ("disputed", "suspects_only")
    )
    size = len(verdict.max_cliques[0]) if verdict.max_cliques else 0
    names = name_numbers("Worker", "Workers", suspects)
    one = len(suspects) == 1
    if verdict.num_max_cliques > 1:
        kind = EventKind.TIED_GROUPS
        summary = (
            f"Round {t}: {verdict.num_max_cliques} largest groups of mutually agreeing workers "
            f"tied ({size} workers each), so the round could not tell which one is honest. "
            f"{names} {'is' if one else 'are'} outside one of them: any of them may be lying, "
            "none is flagged on this round alone. "
        )
    else:
        kind = EventKind.UNPROVEN_OUTSIDERS
        summary = (
            f"Round {t}: {names} disagreed with the largest group of mutually agreeing workers "
            f"({size} workers), which proves nothing on one round: colluders who share a file "
            f"can outvote an honest worker. {'It is' if one else 'They are'} not flagged "
            "unless the disputes across rounds prove it. "
        )
    if left_out:
        verb = "was" if len(left_out) == 1 else "were"
        summary += f"{name_numbers('File', 'Files', left_out)} {verb} left out."
    else:
        summary += "No file was left out."
    return EventReport(
        worker=None,
        client_id=None,
        kind=kind,
        severity="medium",
        evidence={
            "round": t,
            "suspects": suspects,
            "flagged": sorted(verdict.flagged),
            "num_max_cliques": verdict.num_max_cliques,
            "clique_size": size,
            "left_out": [{"file": f, "reason": verdict.drops[f].reason} for f in left_out],
            "summary": summary,
        },
    )
