"""What the dashboard's listings share: their page size and a run's row.

The overview lists runs and the run page heads itself with the same row: its
progress, latest accuracy and open cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from phalanx.store import Run, cases
from phalanx.store import dashboard as queries
from phalanx_api.pages.stored_json import metric, total_rounds

#: Rows per page of the runs, clients and events listings.
PAGE_SIZE = 50


@dataclass(frozen=True)
class RunRow:
    """A run in a listing, with what its latest round says.

    Attributes
    ----------
    run : Run
        The run.
    rounds_done : int
        Finished rounds.
    rounds_total : int
        Rounds its config asks for.
    accuracy : float or None
        Test accuracy after the latest finished round.
    open_cases : int
        Its cases with events nobody has reviewed yet.
    """

    run: Run
    rounds_done: int
    rounds_total: int
    accuracy: float | None
    open_cases: int


def run_rows(session: Session, rows: Sequence[Run]) -> tuple[RunRow, ...]:
    """Return listing rows for runs: progress, latest accuracy, open cases."""
    ids = [r.id for r in rows]
    latest = queries.latest_rounds(session, ids)
    open_counts = cases.open_cases_by_run(session, ids)
    result = []
    for run in rows:
        last = latest.get(run.id)
        accuracy = metric(last.metrics, "accuracy") if last is not None else None
        result.append(
            RunRow(
                run=run,
                rounds_done=run.current_round or 0,
                rounds_total=total_rounds(run),
                accuracy=accuracy,
                open_cases=open_counts.get(run.id, 0),
            )
        )
    return tuple(result)
