"""The per-client view of a local-data run as stored: each client's latest figures.

The rows are written with their round by :func:`phalanx.store.rounds.record_round`
(:class:`~phalanx.store.models.ClientRoundRow`, one per worker given work). The view
reads, per worker, its part of the stored partition (simulation), its latest
claimed sample count, its distance to the aggregate
in the latest round that measured one, its report in the latest round that ran a
federated evaluation, and how many flags detection gave it in the run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from phalanx.event_kinds import FLAG_KINDS
from phalanx.reports import ClientRound
from phalanx.store.models import ClientRoundRow, DetectionEvent
from phalanx.store.runs import get_partition, get_run


@dataclass(frozen=True)
class ClientView:
    """One client's row of the run page's per-client view (``None``: nothing recorded)."""

    worker: int
    client_id: str | None
    part: int | None
    """Samples the run's stored partition gave it (simulation)."""
    samples: int | None
    """The sample count its latest accepted reply claimed."""
    distance_round: int | None
    distance: float | None
    distance_ratio: float | None
    eval_round: int | None
    eval_status: str | None
    eval_loss: float | None
    eval_accuracy: float | None
    eval_samples: int | None
    flags: int

    def to_dict(self) -> dict[str, Any]:
        """Return the row as JSON-ready plain types."""
        return dict(self.__dict__)


def client_round_rows(
    run_id: str, number: int, clients: Iterable[ClientRound]
) -> list[dict[str, Any]]:
    """Return round ``number``'s client rows as one executemany's parameters."""
    return [
        {
            "run_id": run_id,
            "round": number,
            "worker": c.worker,
            "client_id": c.client_id,
            "samples": c.samples,
            "distance": c.distance,
            "distance_ratio": c.distance_ratio,
            "eval_status": c.eval_status,
            "eval_loss": c.eval_loss,
            "eval_accuracy": c.eval_accuracy,
            "eval_samples": c.eval_samples,
        }
        for c in clients
    ]


def _latest(session: Session, run_id: str, column: Any) -> int | None:
    """Return the latest round of ``run_id`` whose rows hold a value in ``column``."""
    return session.scalar(
        select(func.max(ClientRoundRow.round)).where(
            ClientRoundRow.run_id == run_id, column.is_not(None)
        )
    )


def client_view(session: Session, run_id: str) -> list[ClientView]:
    """Return every worker's latest figures in run ``run_id``, by worker.

    Every worker with a row or a part of the stored partition is listed (a worker
    with a part but no row yet has ``None`` figures).

    Raises
    ------
    NotFoundError
        When no run has this id.
    """
    get_run(session, run_id)
    by_worker: dict[int, dict[str, Any]] = {}

    def rows(number: int | None) -> list[ClientRoundRow]:
        if number is None:
            return []
        return list(
            session.scalars(
                select(ClientRoundRow).where(
                    ClientRoundRow.run_id == run_id, ClientRoundRow.round == number
                )
            )
        )

    latest_samples = session.execute(
        select(ClientRoundRow.worker, ClientRoundRow.client_id, ClientRoundRow.samples)
        .where(ClientRoundRow.run_id == run_id, ClientRoundRow.samples.is_not(None))
        .order_by(ClientRoundRow.round)
    )
    for worker, client_id, samples in latest_samples:  # later rounds overwrite earlier
        by_worker.setdefault(worker, {"client_id": client_id})["samples"] = samples
    distance_round = _latest(session, run_id, ClientRoundRow.distance)
    for row in rows(distance_round):
        entry = by_worker.setdefault(row.worker, {"client_id": row.client_id})
        entry.update(
            distance_round=distance_round, distance=row.distance, distance_ratio=row.distance_ratio
        )
    eval_round = _latest(session, run_id, ClientRoundRow.eval_status)
    for row in rows(eval_round):
        entry = by_worker.setdefault(row.worker, {"client_id": row.client_id})
        entry.update(
            eval_round=eval_round,
            eval_status=row.eval_status,
            eval_loss=row.eval_loss,
            eval_accuracy=row.eval_accuracy,
            eval_samples=row.eval_samples,
        )
    counted = session.execute(
        select(DetectionEvent.worker, func.count())
        .where(
            DetectionEvent.run_id == run_id,
            DetectionEvent.worker.is_not(None),
            DetectionEvent.kind.in_([str(k) for k in FLAG_KINDS]),
        )
        .group_by(DetectionEvent.worker)
    )
    flags = {worker: int(n) for worker, n in counted}
    report = get_partition(session, run_id)
    parts = report.get("samples") if isinstance(report, dict) else None
    if isinstance(parts, list):
        for w in range(len(parts)):
            by_worker.setdefault(w, {})
    return [
        ClientView(
            worker=w,
            client_id=e.get("client_id"),
            part=_part(parts, w),
            samples=e.get("samples"),
            distance_round=e.get("distance_round"),
            distance=e.get("distance"),
            distance_ratio=e.get("distance_ratio"),
            eval_round=e.get("eval_round"),
            eval_status=e.get("eval_status"),
            eval_loss=e.get("eval_loss"),
            eval_accuracy=e.get("eval_accuracy"),
            eval_samples=e.get("eval_samples"),
            flags=int(flags.get(w, 0)),
        )
        for w, e in sorted(by_worker.items())
    ]


def _part(parts: object, worker: int) -> int | None:
    """Return the stored partition's samples of ``worker``, when readable."""
    if not isinstance(parts, list) or not 0 <= worker < len(parts):
        return None
    value = parts[worker]
    return value if isinstance(value, int) and not isinstance(value, bool) else None
