"""Finishing a deployed run: its summary comes from the database, by client id.

A simulated run's summary scores detection against the red team it simulated
(:mod:`phalanx.runs.summary`). A deployed run has no ground truth: its summary
names the clients flagged by detection and counts the replies refused by kind,
with the same keys otherwise, and ``precision``/``recall`` left ``None``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from phalanx.runs.summary import DETECTION_KINDS
from phalanx.store import RunStatus, rounds, runs
from phalanx.store.models import DetectionEvent

__all__ = ["deployment_summary", "finish_deployed"]


def deployment_summary(session: Session, run_id: str) -> dict[str, Any]:
    """Summarise a deployed run as JSON, from its stored rounds and events."""
    rows = list(rounds.list_rounds(session, run_id))
    events = session.execute(
        select(DetectionEvent.kind, DetectionEvent.client_id).where(DetectionEvent.run_id == run_id)
    ).all()
    flagged = sorted({c for kind, c in events if kind in DETECTION_KINDS and c is not None})
    refused = Counter(kind for kind, _ in events if kind not in DETECTION_KINDS)
    last = rows[-1] if rows else None
    return {
        "run_id": run_id,
        "backend": "deployment",
        "rounds": len(rows),
        "final_accuracy": float(last.metrics.get("accuracy", 0.0)) if last else 0.0,
        "flagged": flagged,
        "refused_replies": dict(sorted(refused.items())),
        "adversaries": [],
        "precision": None,
        "recall": None,
        "bytes_up": sum(r.bytes_up for r in rows),
        "bytes_down": sum(r.bytes_down for r in rows),
        "model_digest": (last.model_digest or "") if last else "",
    }


def finish_deployed(
    sessions: sessionmaker[Session],
    run_id: str,
    status: RunStatus,
    *,
    claimer: str,
    error: str | None = None,
) -> dict[str, Any]:
    """Mark a deployed run finished under ``claimer`` with its summary; return the summary.

    Raises
    ------
    phalanx.store.LeaseLostError
        When the run is no longer held by ``claimer``.
    phalanx.store.ConflictError
        When the run is finished already.
    """
    with sessions.begin() as session:
        summary = deployment_summary(session, run_id)
        runs.finish_run(
            session,
            run_id,
            status,
            claimer=claimer,
            error=error,
            summary=summary,
            final_model_digest=summary["model_digest"] or None,
        )
    return summary
