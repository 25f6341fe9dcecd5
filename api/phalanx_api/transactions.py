"""A request's write: one short transaction, in the thread of the code that writes.

The request's session (:data:`phalanx_api.deps.SessionDep`) only reads. A route
that changes something does it in ``with writing(db):``, which begins a write
transaction (``BEGIN IMMEDIATE`` on SQLite) and commits it when the block ends,
before the route returns. The write lock is therefore never held while the
request waits for a thread, for its body or for its answer to be sent::

    @router.post("/{run_id}/cancel")
    def cancel_run(run_id: UUID, db: SessionDep, user: OperatorDep) -> RunOut:
        with writing(db):
            run = actions.cancel_run(db, str(run_id), actor=user)
        return RunOut.model_validate(run)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.orm import Session

from phalanx.store.transactions import write_transaction
from phalanx_api.errors import ApiError


def _keeps_changes(exc: BaseException) -> bool:
    return isinstance(exc, ApiError) and exc.keep_changes


@contextmanager
def writing(db: Session) -> Iterator[Session]:
    """Run the block in one write transaction of ``db``, committed when the block ends.

    Rolled back if the block raises, unless the error says to keep the changes
    (:attr:`phalanx_api.errors.ApiError.keep_changes`).

    Parameters
    ----------
    db : Session
        The request's session.

    Yields
    ------
    Session
        ``db``.
    """
    with write_transaction(db, keep=_keeps_changes) as session:
        yield session
