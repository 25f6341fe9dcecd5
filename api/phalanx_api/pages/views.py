"""What each dashboard page shows, read from the store in a fixed number of queries.

One function per page returns a frozen view model; the routes render it with a
template and nothing else. No function here changes the database.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from phalanx.event_kinds import bans_on_confirm
from phalanx.store import (
    Client,
    ClientStatus,
    DetectionEvent,
    EventFilter,
    ReviewStatus,
    Round,
    Run,
    RunStatus,
    clients,
    events,
    rounds,
    runs,
)
from phalanx.store import dashboard as queries
from phalanx.store.counts import clients_by_status, runs_by_status
from phalanx_api.actions import CLIENT_TRANSITIONS, ClientAction
from phalanx_api.pages import charts
from phalanx_api.pages.agreement import AgreementGraph, RoundEvent, agreement_graph
from phalanx_api.pages.evidence import DETECTION_KINDS, Explanation, explain
from phalanx_api.pages.formatting import human_bytes, number, percent

#: Rows per page of the runs, clients and events listings.
PAGE_SIZE = 50

# ---------------------------------------------------------------- overview


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
    open_events : int
        Its detection events nobody has reviewed yet.
    """

    run: Run
    rounds_done: int
    rounds_total: int
    accuracy: float | None
    open_events: int


@dataclass(frozen=True)
class Overview:
    """The overview page: runs, clients by status, the review queue's size."""

    runs: tuple[RunRow, ...]
    runs_by_status: Mapping[RunStatus, int]
    clients_by_status: Mapping[ClientStatus, int]
    open_events: int
    offset: int
    next_offset: int | None


def run_rows(session: Session, rows: Sequence[Run]) -> tuple[RunRow, ...]:
    """Return listing rows for runs: progress, latest accuracy, open events."""
    ids = [r.id for r in rows]
    latest = queries.latest_rounds(session, ids)
    open_counts = queries.open_events_by_run(session, ids)
    result = []
    for run in rows:
        last = latest.get(run.id)
        accuracy = _metric(last.metrics, "accuracy") if last is not None else None
        result.append(
            RunRow(
                run=run,
                rounds_done=run.current_round or 0,
                rounds_total=_total_rounds(run),
                accuracy=accuracy,
                open_events=open_counts.get(run.id, 0),
            )
        )
    return tuple(result)


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
        Runs with their progress, counts by status, and open events.
    """
    rows = runs.list_runs(session, limit=limit + 1, offset=offset)
    return Overview(
        runs=run_rows(session, rows[:limit]),
        runs_by_status=runs_by_status(session),
        clients_by_status=clients_by_status(session),
        open_events=open_event_count(session),
        offset=offset,
        next_offset=offset + limit if len(rows) > limit else None,
    )


def open_event_count(session: Session) -> int:
    """Return how many detection events wait for review (the navigation's badge)."""
    return events.count_events(session, EventFilter(review_status=ReviewStatus.OPEN))


# ------------------------------------------------------------------ run page


@dataclass(frozen=True)
class Fact:
    """A labelled value, with an optional word of explanation."""

    label: str
    value: str
    hint: str = ""


@dataclass(frozen=True)
class FlaggedInRound:
    """A worker named by an event in the latest round, for the list beside the graph."""

    event: DetectionEvent
    explanation: Explanation
    client: Client | None


@dataclass(frozen=True)
class RunPage:
    """The run page: settings, totals, per-round charts, the latest agreement graph.

    Attributes
    ----------
    run : Run
        The run.
    row : RunRow
        Its progress and latest accuracy.
    settings : tuple of Fact
        Its configuration in words.
    totals : tuple of Fact
        Totals over its rounds.
    rounds : Sequence[Round]
        Its finished rounds, in order.
    accuracy, loss, traffic : LineChart
        Per-round charts.
    flags : FlagMatrix
        Which workers were named in which round.
    graph : AgreementGraph or None
        The latest round's agreement graph (``None`` before the first round).
    latest : tuple of FlaggedInRound
        The latest round's events.
    simulation : tuple of Fact
        Detection scored against the true adversaries, for simulated attacks.
    """

    run: Run
    row: RunRow
    settings: tuple[Fact, ...]
    totals: tuple[Fact, ...]
    rounds: Sequence[Round]
    accuracy: charts.LineChart
    loss: charts.LineChart
    traffic: charts.LineChart
    flags: charts.FlagMatrix
    graph: AgreementGraph | None
    latest: tuple[FlaggedInRound, ...]
    simulation: tuple[Fact, ...]

    @property
    def terminal(self) -> bool:
        """Whether the run is over (the page stops updating itself)."""
        return self.run.status.is_terminal


def run_page(session: Session, run_id: str) -> RunPage:
    """Read the run page.

    Parameters
    ----------
    session : Session
        A read session.
    run_id : str
        The run.

    Returns
    -------
    RunPage
        Everything the page draws.

    Raises
    ------
    NotFoundError
        When no run has this id.
    """
    run = runs.get_run(session, run_id)
    (row,) = run_rows(session, [run])
    done = list(rounds.list_rounds(session, run.id))
    numbers = [r.number for r in done]
    accuracy = charts.line_chart(
        "accuracy",
        "Test accuracy",
        numbers,
        [("accuracy", "Accuracy", [_metric(r.metrics, "accuracy") for r in done])],
        fmt=lambda v: f"{v * 100:.0f}%",
        floor=0.0,
        ceiling=1.0,
    )
    loss = charts.line_chart(
        "loss",
        "Test loss",
        numbers,
        [("loss", "Loss", [_metric(r.metrics, "loss") for r in done])],
        fmt=lambda v: number(v),
        floor=0.0,
    )
    traffic = charts.line_chart(
        "bytes",
        "Bytes per round",
        numbers,
        [
            ("bytes_up", "Up (workers to coordinator)", [float(r.bytes_up) for r in done]),
            ("bytes_down", "Down (coordinator to workers)", [float(r.bytes_down) for r in done]),
        ],
        fmt=human_bytes,
        floor=0.0,
    )
    marks = [(f.round, f.worker, f.kind) for f in queries.flagged_workers(session, run.id)]
    rejections = frozenset(k for _, _, k in marks if k not in DETECTION_KINDS)
    flags = charts.flag_matrix(numbers, marks, rejections=rejections)
    graph: AgreementGraph | None = None
    latest: tuple[FlaggedInRound, ...] = ()
    if done:
        last = done[-1]
        page = events.list_events(
            session, EventFilter(run_id=run.id, round=last.number), limit=events.MAX_PAGE_SIZE
        )
        in_round = sorted(page.items, key=lambda e: (e.worker is None, e.worker or 0, e.id))
        graph = agreement_graph(
            last.number,
            _int(last.assignment.get("num_workers"), default=_config_int(run, "num_workers")),
            _int(last.assignment.get("r"), default=_config_int(run, "r")),
            [RoundEvent(e.worker, e.kind, e.client_id, e.evidence) for e in in_round],
        )
        owners = queries.clients_by_id(session, {e.client_id for e in in_round if e.client_id})
        latest = tuple(
            FlaggedInRound(
                event=e,
                explanation=explain(e.kind, e.worker, e.evidence),
                client=owners.get(e.client_id) if e.client_id else None,
            )
            for e in in_round
        )
    return RunPage(
        run=run,
        row=row,
        settings=_settings(run),
        totals=_totals(done),
        rounds=done,
        accuracy=accuracy,
        loss=loss,
        traffic=traffic,
        flags=flags,
        graph=graph,
        latest=latest,
        simulation=_simulation(run),
    )


def run_progress(session: Session, run_id: str) -> dict[str, Any]:
    """Return the few fields the run page polls to know when to redraw.

    Besides the run's status and last finished round, the number of open events
    keeps the navigation's review-queue badge current.

    Raises
    ------
    NotFoundError
        When no run has this id.
    """
    run = runs.get_run(session, run_id)
    return {
        "id": run.id,
        "status": run.status.value,
        "terminal": run.status.is_terminal,
        "current_round": run.current_round or 0,
        "rounds": _total_rounds(run),
        "cancel_requested": run.cancel_requested,
        "heartbeat_at": run.heartbeat_at.isoformat() if run.heartbeat_at else None,
        "open_events": open_event_count(session),
    }


SCHEMES = {
    "none": "every file goes to one worker, nothing is compared",
    "groups": "workers form groups that compute the same files",
    "subsets": "each file goes to a different subset of workers",
    "bibd": "files follow a block design: every pair of workers shares a file",
    "mols": "files follow orthogonal Latin squares",
    "random": "each file goes to randomly chosen workers",
}


def _settings(run: Run) -> tuple[Fact, ...]:
    config = run.config if isinstance(run.config, dict) else {}
    data, assignment = _section(config, "data"), _section(config, "assignment")
    aggregation, detection = _section(config, "aggregation"), _section(config, "detection")
    attack, codec = _section(config, "attack"), _section(config, "codec")
    scheme = str(assignment.get("scheme", "?"))
    facts = [
        Fact("Rounds", str(_total_rounds(run))),
        Fact(
            "Workers",
            f"{assignment.get('num_workers', '?')}, each file computed by "
            f"{assignment.get('r', '?')}",
            "Every piece of work (a file of training samples) goes to several workers, so "
            "their answers can be compared.",
        ),
        Fact("Assignment", scheme, SCHEMES.get(scheme, "")),
        Fact(
            "Data",
            f"{data.get('dataset', '?')}, {data.get('model', '?')} model, "
            f"{data.get('samples_per_file', '?')} samples per file",
        ),
        Fact(
            "Detection",
            f"{detection.get('mode', '?')} comparison, tolerance {detection.get('tolerance', '?')}",
            "How two workers' updates for the same file are judged equal.",
        ),
        Fact(
            "Aggregation",
            f"{aggregation.get('rule', '?')}"
            + (f", tolerating {aggregation['f']}" if aggregation.get("f") else ""),
            "How the accepted updates are combined into one step of the model.",
        ),
        Fact("Compression", "predictive coding" if codec.get("enabled") else "off"),
    ]
    if attack.get("name") and attack.get("q"):
        facts.append(
            Fact(
                "Simulated attack",
                f"{attack['name']} by {attack['q']} workers ({attack.get('selection', 'weak')})",
                "Workers told to misbehave, to test detection.",
            )
        )
    return tuple(facts)


def _totals(done: Sequence[Round]) -> tuple[Fact, ...]:
    if not done:
        return ()
    last = done[-1]
    seconds = [r.duration_s for r in done if math.isfinite(r.duration_s)]
    return (
        Fact("Accuracy", percent(_metric(last.metrics, "accuracy")), f"after round {last.number}"),
        Fact("Loss", number(_metric(last.metrics, "loss")), f"after round {last.number}"),
        Fact("Uploaded", human_bytes(sum(r.bytes_up for r in done)), "workers to coordinator"),
        Fact("Downloaded", human_bytes(sum(r.bytes_down for r in done)), "coordinator to workers"),
        Fact("Flags", str(sum(r.num_flagged for r in done)), "workers flagged, over all rounds"),
        Fact(
            "Round time",
            f"{sum(seconds) / len(seconds):.1f} s" if seconds else "–",
            "mean wall-clock time of a round",
        ),
    )


def _simulation(run: Run) -> tuple[Fact, ...]:
    summary = run.summary if isinstance(run.summary, dict) else {}
    truth, flagged = summary.get("adversaries"), summary.get("flagged")
    if not isinstance(truth, list) or not truth or not isinstance(flagged, list):
        return ()
    caught = len(set(map(str, truth)) & set(map(str, flagged)))
    return (
        Fact("Adversaries caught", f"{caught} of {len(truth)}", "recall"),
        Fact(
            "Honest workers flagged",
            str(len(flagged) - caught),
            "false alarms (precision " + percent(_number(summary.get("precision")), digits=0) + ")",
        ),
    )


# ---------------------------------------------------------------- clients


@dataclass(frozen=True)
class ClientRow:
    """A client, its events, and what an operator can do to it now."""

    client: Client
    events: queries.EventCounts
    actions: tuple[ClientAction, ...]


@dataclass(frozen=True)
class ClientsPage:
    """The clients page: one page of clients, with counts per status."""

    rows: tuple[ClientRow, ...]
    status: ClientStatus | None
    by_status: Mapping[ClientStatus, int]
    offset: int
    next_offset: int | None


def actions_for(status: ClientStatus, *, proven: bool = True) -> tuple[ClientAction, ...]:
    """Return the actions that apply to a client in ``status``, in menu order.

    A client that has not proven it holds its key cannot be approved (nor
    reinstated, which approves it), so it is offered neither.
    """
    return tuple(
        action
        for action, (sources, target) in CLIENT_TRANSITIONS.items()
        if status in sources and (proven or target != ClientStatus.APPROVED)
    )


def clients_page(
    session: Session, *, status: ClientStatus | None, offset: int = 0, limit: int = PAGE_SIZE
) -> ClientsPage:
    """Read the clients page.

    Parameters
    ----------
    session : Session
        A read session.
    status : ClientStatus or None
        Only clients in this status.
    offset, limit : int
        The page, oldest registration first.

    Returns
    -------
    ClientsPage
        Clients with their event counts and applicable actions.
    """
    found = clients.list_clients(session, status=status, limit=limit + 1, offset=offset)
    shown = found[:limit]
    counts = queries.event_counts_by_client(session, [c.id for c in shown])
    return ClientsPage(
        rows=tuple(
            ClientRow(c, counts[c.id], actions_for(c.status, proven=c.proven_at is not None))
            for c in shown
        ),
        status=status,
        by_status=clients_by_status(session),
        offset=offset,
        next_offset=offset + limit if len(found) > limit else None,
    )


# ------------------------------------------------------------ review queue


@dataclass(frozen=True)
class EventCard:
    """A detection event as the review queue shows it.

    Attributes
    ----------
    event : DetectionEvent
        The event.
    explanation : Explanation
        Its evidence in words.
    client : Client or None
        The client it names, in its current status.
    run_name : str
        The name of its run.
    client_open : int
        Open events of the same client, this one included.
    may_ban : bool
        Whether confirming it may ban the client (never for a fault).
    """

    event: DetectionEvent
    explanation: Explanation
    client: Client | None
    run_name: str
    client_open: int
    may_ban: bool = True


@dataclass(frozen=True)
class ReviewQueue:
    """The review queue: a page of events matching a filter."""

    cards: tuple[EventCard, ...]
    where: EventFilter
    total: int
    next_before: int | None
    reviewed: EventCard | None


def review_queue(
    session: Session,
    where: EventFilter,
    *,
    before: int | None = None,
    limit: int = PAGE_SIZE,
    reviewed_id: int | None = None,
) -> ReviewQueue:
    """Read the review queue.

    Parameters
    ----------
    session : Session
        A read session.
    where : EventFilter
        Which events (by default the page asks for open ones).
    before : int, optional
        Keyset cursor from the previous page.
    limit : int
        Page size.
    reviewed_id : int, optional
        An event just reviewed, shown at the top with its client's new status.

    Returns
    -------
    ReviewQueue
        The cards, the filter's total, the next cursor.
    """
    page = events.list_events(session, where, before=before, limit=limit)
    items = list(page.items)
    reviewed_event: DetectionEvent | None = None
    if reviewed_id is not None:
        reviewed_event = session.get(DetectionEvent, reviewed_id)
    everything = [*items, *([reviewed_event] if reviewed_event is not None else [])]
    client_ids = {e.client_id for e in everything if e.client_id}
    owners = queries.clients_by_id(session, client_ids)
    names = queries.run_names(session, {e.run_id for e in everything})
    counts = queries.event_counts_by_client(session, client_ids)

    def card(event: DetectionEvent) -> EventCard:
        counted = counts.get(event.client_id) if event.client_id else None
        return EventCard(
            event=event,
            explanation=explain(event.kind, event.worker, event.evidence),
            client=owners.get(event.client_id) if event.client_id else None,
            run_name=names.get(event.run_id, event.run_id),
            client_open=counted.open if counted else 0,
            may_ban=bans_on_confirm(event.kind),
        )

    return ReviewQueue(
        cards=tuple(card(e) for e in items),
        where=where,
        total=events.count_events(session, where),
        next_before=page.next_before,
        reviewed=card(reviewed_event) if reviewed_event is not None else None,
    )


# ----------------------------------------------------------------- helpers


def _section(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = config.get(name)
    return value if isinstance(value, dict) else {}


def _total_rounds(run: Run) -> int:
    value = run.config.get("rounds") if isinstance(run.config, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _config_int(run: Run, field: str) -> int:
    assignment = _section(run.config if isinstance(run.config, dict) else {}, "assignment")
    return _int(assignment.get(field), default=0)


def _int(value: object, *, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _metric(metrics: Mapping[str, Any], name: str) -> float | None:
    return _number(metrics.get(name)) if isinstance(metrics, Mapping) else None
