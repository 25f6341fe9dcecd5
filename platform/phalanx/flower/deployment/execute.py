"""Executing a deployed run inside the ServerApp: real clients, recorded round by round.

The run lives in the database already, claimed by the coordinator that
launched it on the SuperLink (:mod:`phalanx.flower.deployment.backend`); this code
runs in the ServerApp process under that same lease. It waits for enough
approved clients to be online, maps them to workers
(:mod:`phalanx.flower.deployment.roster`), drives the coordinator over Flower's Grid
with every reply bound to its node (:mod:`phalanx.flower.deployment.binding`), and
records each round exactly as a simulated run does, resuming after the last
checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from phalanx.config import RunConfig
from phalanx.coordinator import Transport
from phalanx.faults import failure_cause
from phalanx.flower.deployment.binding import NodeBindingTransport
from phalanx.flower.deployment.roster import Enrolled, Roster, enrolled_clients, wait_for_roster
from phalanx.reports import RoundReport
from phalanx.runs.execute import build_coordinator
from phalanx.runs.recorder import StoreRecorder, finish, load_checkpoint, stored_config
from phalanx.runs.summary import RunSummary
from phalanx.store import LeaseLostError, RunStatus, clients

__all__ = ["TransportFactory", "execute_deployed_run"]

TransportFactory = Callable[[Roster, RunConfig], Transport]
"""Builds the transport to a roster's nodes (the Grid transport in the ServerApp)."""


def execute_deployed_run(
    sessions: sessionmaker[Session],
    run_id: str,
    *,
    claimer: str,
    checkpoint_dir: Path,
    online: Callable[[], Iterable[int]],
    transport: TransportFactory,
    nodes_timeout: float = 600.0,
    on_round: Callable[[RoundReport], None] | None = None,
) -> RunSummary:
    """Run (or resume) a claimed deployed run to its end; return its summary.

    Parameters
    ----------
    sessions : sessionmaker
        The Phalanx database.
    run_id : str
        The run, ``running`` under ``claimer``.
    claimer : str
        The lease this process works under (heartbeats between rounds).
    checkpoint_dir : Path
        Checkpoint files go to ``checkpoint_dir / run_id``.
    online : callable
        The Flower node ids connected now.
    transport : callable
        Builds the transport to the roster's nodes.
    nodes_timeout : float
        Seconds to wait for enough approved clients to come online.
    on_round : callable, optional
        Called after each recorded round.

    Returns
    -------
    RunSummary
        The stored summary.

    Notes
    -----
    The run ends ``succeeded`` after its last round, ``cancelled`` when an
    operator cancelled it between rounds, and ``failed`` (with the error) when
    anything else raised. A lost lease is re-raised and the run left alone.
    """
    config = stored_config(sessions, run_id)
    done = 0
    try:
        roster = wait_for_roster(
            online,
            lambda: _enrolled(sessions),
            config.assignment.num_workers,
            timeout=nodes_timeout,
        )
        _mark_seen(sessions, roster)
        done, checkpoint = load_checkpoint(sessions, run_id)
        recorder = StoreRecorder(sessions, run_id, checkpoint_dir, claimer)
        bound = NodeBindingTransport(
            transport(roster, config), roster.members, roster.node_of_worker
        )
        coordinator = build_coordinator(
            config, run_id, bound, recorder, checkpoint=checkpoint, members=roster.members
        )
        reports = coordinator.run(
            start_round=done + 1, on_round=on_round, should_stop=recorder.should_stop
        )
    except LeaseLostError:
        raise
    except Exception as exc:
        finish(
            sessions,
            run_id,
            RunStatus.FAILED,
            claimer=claimer,
            error=failure_cause(exc),
        )
        raise
    last = reports[-1].round if reports else done
    status = RunStatus.SUCCEEDED if last >= config.rounds else RunStatus.CANCELLED
    return finish(sessions, run_id, status, claimer=claimer)


def _enrolled(sessions: sessionmaker[Session]) -> list[Enrolled]:
    with sessions() as session:
        return list(enrolled_clients(session))


def _mark_seen(sessions: sessionmaker[Session], roster: Roster) -> None:
    with sessions.begin() as session:
        for worker in roster.workers:
            clients.touch_client(session, worker.client_id, flower_node_id=worker.node_id)
