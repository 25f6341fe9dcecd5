"""Checkpoints: where the model of a run was saved after a round.

The coordinator writes the checkpoint file first, then its row with
:func:`save_checkpoint` in the same transaction as
:func:`phalanx.store.rounds.record_round`; only then does the round count as done.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from phalanx.store.errors import ConflictError
from phalanx.store.models import Checkpoint
from phalanx.store.types import utcnow


def save_checkpoint(
    session: Session,
    run_id: str,
    round: int,
    *,
    path: str,
    digest: str,
    now: datetime | None = None,
) -> Checkpoint:
    """Record the checkpoint file of a run after a round.

    Parameters
    ----------
    session : Session
        The caller's session.
    run_id : str
        The run.
    round : int
        The round after which the model was saved (0 for the initial model).
    path : str
        Where the file is.
    digest : str
        SHA-256 of the model, to check the file on resume.
    now : datetime, optional
        Creation time; defaults to UTC now.

    Returns
    -------
    Checkpoint
        The stored checkpoint.

    Raises
    ------
    ConflictError
        When the run already has a checkpoint for this round or does not exist.
    """
    if session.get(Checkpoint, (run_id, round)) is not None:
        raise ConflictError(f"run {run_id!r} already has a checkpoint for round {round}")
    row = Checkpoint(
        run_id=run_id, round=round, path=path, digest=digest, created_at=now or utcnow()
    )
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError as exc:
        raise ConflictError(
            f"cannot save checkpoint of run {run_id!r} round {round}: "
            "it exists already, or the run does not"
        ) from exc
    return row


def latest_checkpoint(session: Session, run_id: str) -> Checkpoint | None:
    """Return the checkpoint of the run's highest round, or ``None`` if it has none.

    Parameters
    ----------
    session : Session
        The caller's session.
    run_id : str
        The run.

    Returns
    -------
    Checkpoint or None
        Where to resume from.
    """
    query = (
        select(Checkpoint)
        .where(Checkpoint.run_id == run_id)
        .order_by(Checkpoint.round.desc())
        .limit(1)
    )
    return session.scalars(query).first()
