"""The run page: settings, totals, charts, flags, the latest agreement graph, response times."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from phalanx.agreement_record import stored_agreeing, stored_digests
from phalanx.event_kinds import FLAG_KINDS
from phalanx.store import (
    Client,
    DetectionEvent,
    EventFilter,
    Round,
    Run,
    clients,
    events,
    rounds,
    runs,
)
from phalanx.store import dashboard as queries
from phalanx_api.pages import charts
from phalanx_api.pages.agreement import AgreementGraph, RoundEvent, agreement_graph
from phalanx_api.pages.case_queue import open_case_count
from phalanx_api.pages.client_panel import ClientPanel, client_panel
from phalanx_api.pages.dropped import DroppedFiles, dropped_files
from phalanx_api.pages.evidence import Explanation, explain
from phalanx_api.pages.formatting import human_bytes, number, percent
from phalanx_api.pages.listings import RunRow, run_rows
from phalanx_api.pages.response_panel import ResponsePanel, response_panel
from phalanx_api.pages.stored_json import (
    finite_number,
    integer,
    metric,
    run_config,
    section,
    total_rounds,
)


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
    dropped : DroppedFiles or None
        The files the latest round left out, and why (``None`` when it left none out).
    simulation : tuple of Fact
        Detection scored against the true adversaries, for simulated attacks.
    responses : ResponsePanel or None
        The workers' response times (``None`` when no round was timed).
    simulated_workers : int
        The simulated workers stored with the run, its own identities (0 when deployed).
    clients : ClientPanel or None
        Local data: the per-client view and the partition's heat map.
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
    dropped: DroppedFiles | None = None
    responses: ResponsePanel | None = None
    simulated_workers: int = 0
    clients: ClientPanel | None = None

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
    federated = any(metric(r.metrics, "fed_accuracy") is not None for r in done)
    accuracy = charts.line_chart(
        "accuracy",
        "Test accuracy",
        numbers,
        [
            ("accuracy", "Accuracy", [metric(r.metrics, "accuracy") for r in done]),
            *_federated_series(done, "fed_accuracy", "Clients' test splits", federated),
        ],
        fmt=lambda v: f"{v * 100:.0f}%",
        floor=0.0,
        ceiling=1.0,
    )
    loss = charts.line_chart(
        "loss",
        "Test loss",
        numbers,
        [
            ("loss", "Loss", [metric(r.metrics, "loss") for r in done]),
            *_federated_series(done, "fed_loss", "Clients' test splits", federated),
        ],
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
        clip_outliers=True,
    )
    marks = [(f.round, f.worker, f.kind) for f in queries.flagged_workers(session, run.id)]
    rejections = frozenset(k for _, _, k in marks if k not in FLAG_KINDS)
    flags = charts.flag_matrix(numbers, marks, rejections=rejections)
    graph: AgreementGraph | None = None
    latest: tuple[FlaggedInRound, ...] = ()
    dropped: DroppedFiles | None = None
    if done:
        last = done[-1]
        page = events.list_events(
            session, EventFilter(run_id=run.id, round=last.number), limit=events.MAX_PAGE_SIZE
        )
        in_round = sorted(page.items, key=lambda e: (e.worker is None, e.worker or 0, e.id))
        stored = rounds.get_agreement(session, run.id, last.number)
        dropped = dropped_files(last.number, stored)
        graph = agreement_graph(
            last.number,
            stored,
            num_workers=integer(
                last.assignment.get("num_workers"), default=_assigned(run, "num_workers")
            ),
            replication=integer(last.assignment.get("r"), default=_assigned(run, "r")),
            events=[RoundEvent(e.worker, e.kind, e.client_id) for e in in_round],
        )
        owners = queries.clients_by_id(session, {e.client_id for e in in_round if e.client_id})
        members = (
            stored_agreeing(stored.get("version"), stored.get("agreeing"))
            if isinstance(stored, dict)
            else None
        )
        digests = (
            stored_digests(stored.get("version"), stored.get("digests"))
            if isinstance(stored, dict)
            else ()
        )
        latest = tuple(
            FlaggedInRound(
                event=e,
                explanation=explain(e.kind, e.worker, e.evidence, members, digests),
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
        dropped=dropped,
        responses=response_panel(session, run.id, simulated=_simulated_clock(run))
        if done
        else None,
        simulated_workers=clients.count_run_clients(session, run.id),
        clients=client_panel(session, run.id),
    )


def _federated_series(
    done: Sequence[Round], key: str, label: str, shown: bool
) -> list[tuple[str, str, list[float | None]]]:
    """Return the federated evaluation's line (local data), to draw beside the server's."""
    if not shown:
        return []
    return [(key, label, [metric(r.metrics, key) for r in done])]


def run_progress(session: Session, run_id: str) -> dict[str, Any]:
    """Return the few fields the run page polls to know when to redraw.

    Besides the run's status and last finished round, the number of open cases
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
        "rounds": total_rounds(run),
        "cancel_requested": run.cancel_requested,
        "heartbeat_at": run.heartbeat_at.isoformat() if run.heartbeat_at else None,
        "open_cases": open_case_count(session),
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
    config = run_config(run)
    data, assignment = section(config, "data"), section(config, "assignment")
    aggregation, detection = section(config, "aggregation"), section(config, "detection")
    attack, codec = section(config, "attack"), section(config, "codec")
    scheme = str(assignment.get("scheme", "?"))
    facts = [
        Fact("Rounds", str(total_rounds(run))),
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
            f"{aggregation.get('rule', '?')}" + tolerated_inputs(aggregation.get("f")),
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
        Fact("Accuracy", percent(metric(last.metrics, "accuracy")), f"after round {last.number}"),
        Fact("Loss", number(metric(last.metrics, "loss")), f"after round {last.number}"),
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
            "false alarms (precision "
            + percent(finite_number(summary.get("precision")), digits=0)
            + ")",
        ),
    )


def _assigned(run: Run, field: str) -> int:
    """Return an integer of the run's ``assignment`` config (0 when unreadable)."""
    return integer(section(run_config(run), "assignment").get(field), default=0)


def tolerated_inputs(f: object) -> str:
    """How many Byzantine inputs the stored config asks the rule to tolerate, in words."""
    if f == "auto":
        return ", tolerating in each round the files that unproven liars could have supplied"
    return f", tolerating {f}" if f else ""


def _simulated_clock(run: Run) -> bool:
    """Whether the run's rounds were timed by the systems model (its stored config says)."""
    config = run.config if isinstance(run.config, dict) else {}
    systems = config.get("systems")
    return isinstance(systems, dict) and systems.get("enabled") is True
