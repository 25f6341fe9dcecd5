"""The run page's response times: each worker's, slowest first, and the slow ones in words.

Slow is not lying: the panel stands apart from the flags, the agreement graph
and the review queue, and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy.orm import Session

from phalanx.response_times import ResponseSummary
from phalanx.store import Client, response_times
from phalanx.store import dashboard as queries

#: Workers listed on the page at most; the API lists every one.
SHOWN = 50


@dataclass(frozen=True)
class WorkerTimes:
    """A worker's response times and its client, for one row of the panel."""

    summary: ResponseSummary
    client: Client | None


@dataclass(frozen=True)
class ResponsePanel:
    """A run's response times as the run page shows them.

    Attributes
    ----------
    median_s : float or None
        The run's median response.
    rows : tuple of WorkerTimes
        At most ``SHOWN`` workers: the slow ones first, then by p90, slowest first.
    slow : tuple of WorkerTimes
        The slow workers among ``rows``, to say why in words.
    total, num_slow : int
        Workers with responses, and how many of them are slow, in the whole run.
    simulated : bool
        Whether the times are of the systems model's clock (else real seconds).
    """

    median_s: float | None
    rows: tuple[WorkerTimes, ...]
    slow: tuple[WorkerTimes, ...]
    total: int
    num_slow: int
    simulated: bool = False


def response_panel(
    session: Session, run_id: str, *, simulated: bool = False
) -> ResponsePanel | None:
    """Read a run's response times for its page; ``None`` when its rounds were not timed.

    ``simulated``: the run's rounds were timed by the systems model, not by real arrivals.
    """
    found = response_times.run_response_times(session, run_id)
    if not found.workers:
        return None
    ordered = sorted(found.workers, key=_slowest_first)[:SHOWN]
    owners = queries.clients_by_id(session, {w.client_id for w in ordered if w.client_id})
    rows = tuple(WorkerTimes(w, owners.get(w.client_id) if w.client_id else None) for w in ordered)
    return ResponsePanel(
        median_s=found.median_s,
        rows=rows,
        slow=tuple(r for r in rows if r.summary.slow),
        total=len(found.workers),
        num_slow=len(found.slow),
        simulated=simulated,
    )


def _slowest_first(summary: ResponseSummary) -> tuple[bool, float, int]:
    # A worker that never replied is slower than any time.
    p90 = math.inf if summary.p90_s is None else summary.p90_s
    return (not summary.slow, -p90, summary.worker)
