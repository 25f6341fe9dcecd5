"""The run page's per-client view of a local-data run, and its partition's heat map.

Per client: the samples the partition gave it and the count it claims, its local
accuracy in the latest federated evaluation, and how far its latest update sat
from the aggregate (over the round's median distance), with its flags. An honest
client with unusual data sits a few times the median away, trains on a skewed
label mix (the heat map shows it) and still reports a plausible local accuracy; a
crafted update usually sits far beyond and is flagged round after round.

The heat map draws the stored partition report (clients by labels) as inline SVG:
each cell's opacity is its count over the largest count (the page's CSP allows no
inline style, and SVG presentation attributes are not styles).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from phalanx.store import Client, client_rounds, runs
from phalanx.store import dashboard as queries
from phalanx.store.client_rounds import ClientView

#: Clients listed and drawn on the page at most; the API lists every one.
SHOWN = 50
#: Labels drawn in the heat map at most.
MAX_LABELS = 100
#: A distance ratio above this is unusual; above FAR, far from the aggregate.
UNUSUAL = 2.0
FAR = 5.0

CELL = 18
LEFT = 78
TOP = 22


@dataclass(frozen=True)
class ClientRow:
    """One client's row: its latest figures, its registered client, its part of the data."""

    view: ClientView
    client: Client | None

    @property
    def standing(self) -> str:
        """Its latest distance in words: ``typical``, ``unusual``, ``far`` or ``unknown``."""
        ratio = self.view.distance_ratio
        if ratio is None:
            return "unknown"
        if ratio > FAR:
            return "far"
        return "unusual" if ratio > UNUSUAL else "typical"


@dataclass(frozen=True)
class HeatCell:
    """One cell of the heat map: a client's samples of one label."""

    x: int
    y: int
    label: int
    count: int
    opacity: float


@dataclass(frozen=True)
class HeatRow:
    """One client's row of the heat map."""

    worker: int
    y: int
    total: int
    cells: tuple[HeatCell, ...]


@dataclass(frozen=True)
class HeatMap:
    """The partition's clients-by-labels counts, laid out for inline SVG."""

    kind: str
    rows: tuple[HeatRow, ...]
    labels: tuple[tuple[int, int], ...]
    """(label, x) of each column."""
    largest: int
    width: int
    height: int
    total_clients: int
    cell: int = CELL


@dataclass(frozen=True)
class ClientPanel:
    """The per-client view as the run page shows it."""

    rows: tuple[ClientRow, ...]
    total: int
    eval_round: int | None
    distance_round: int | None
    heat: HeatMap | None


def heat_map(report: Mapping[str, Any], *, shown: int = SHOWN) -> HeatMap | None:
    """Lay out a stored partition report's histograms; ``None`` when it has none to draw.

    The report is read as stored JSON: anything malformed draws nothing.
    """
    histograms = report.get("histograms")
    if not isinstance(histograms, list) or not histograms:
        return None
    rows: list[list[int]] = []
    for row in histograms[:shown]:
        if not isinstance(row, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in row
        ):
            return None
        rows.append(row[:MAX_LABELS])
    num_labels = max(len(r) for r in rows)
    largest = max((v for r in rows for v in r), default=0)
    labels = tuple((label, LEFT + label * CELL) for label in range(num_labels))
    drawn = []
    for worker, counts in enumerate(rows):
        y = TOP + worker * CELL
        cells = tuple(
            HeatCell(
                x=LEFT + label * CELL,
                y=y,
                label=label,
                count=count,
                opacity=round(count / largest, 3) if largest else 0.0,
            )
            for label, count in enumerate(counts)
        )
        drawn.append(HeatRow(worker=worker, y=y, total=sum(counts), cells=cells))
    kind = report.get("kind")
    return HeatMap(
        kind=kind if isinstance(kind, str) else "?",
        rows=tuple(drawn),
        labels=labels,
        largest=largest,
        width=LEFT + num_labels * CELL + 8,
        height=TOP + len(rows) * CELL + 4,
        total_clients=len(histograms),
    )


def client_panel(session: Session, run_id: str) -> ClientPanel | None:
    """Read a run's per-client view; ``None`` for a run with neither client rows nor partition."""
    views = client_rounds.client_view(session, run_id)
    report = runs.get_partition(session, run_id)
    if not views and report is None:
        return None
    shown = views[:SHOWN]
    owners = queries.clients_by_id(session, {v.client_id for v in shown if v.client_id})
    rows = tuple(
        ClientRow(
            view=v,
            client=owners.get(v.client_id) if v.client_id else None,
        )
        for v in shown
    )
    return ClientPanel(
        rows=rows,
        total=len(views),
        eval_round=max((v.eval_round for v in views if v.eval_round is not None), default=None),
        distance_round=max(
            (v.distance_round for v in views if v.distance_round is not None), default=None
        ),
        heat=heat_map(report) if isinstance(report, dict) else None,
    )
