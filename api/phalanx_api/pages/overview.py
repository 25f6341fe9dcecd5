"""The overview page: runs with their progress, clients by status, the review queue's size."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy.orm import Session

from phalanx.store import ClientStatus, RunStatus, runs
from phalanx.store.counts import clients_by_status, runs_by_status
from phalanx_api.pages.case_queue import open_case_count
from phalanx_api.pages.listings import PAGE_SIZE, RunRow, run_rows


@dataclass(frozen=True)
class Overview:
    """The overview page: runs, clients by status, the review queue's size."""

    runs: tuple[RunRow, ...]
    runs_by_status: Mapping[RunStatus, int]
    clients_by_status: Mapping[ClientStatus, int]
    open_cases: int
    offset: int
    next_offset: int | None


def overview(session: Session, *, offset: int = 0, limit: int = PAGE_SIZE) -> Overview:
    """Read the overview page.

    Parameters
    ----------
    session : Session
        A read session.
    offset, limit : int
        The page of runs, newest first.

    Returns
    -------
    Overview
        Runs with their progress, counts by status, and open cases.
    """
    rows = runs.list_runs(session, limit=limit + 1, offset=offset)
    return Overview(
        runs=run_rows(session, rows[:limit]),
        runs_by_status=runs_by_status(session),
        clients_by_status=clients_by_status(session),
        open_cases=open_case_count(session),
        offset=offset,
        next_offset=offset + limit if len(rows) > limit else None,
    )
