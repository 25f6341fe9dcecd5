"""The deployment backend: Phalanx runs executed on a Flower SuperLink.

:class:`DeploymentBackend` is the dispatcher's backend for runs whose
``deployment.backend`` is ``deployment`` (:mod:`phalanx.runs.dispatcher`): on
every turn of the loop it brings the SuperLink's registered keys in line with the
approved clients (:func:`~phalanx.flower.deployment.admission.reconcile`), and it
executes each claimed run on the SuperLink, or on the one its config names.

:func:`run_on_superlink` does what ``flwr run APP SUPERLINK`` does, with
Phalanx's app (:mod:`phalanx.flower.deployment.flower_app`), then follows the Flower
run to its end:

1. The Phalanx run is claimed (created first when no run id is given).
2. ``flwr run`` submits the app; its run config names the Phalanx run and the
   lease. The SuperLink starts the ServerApp
   (:mod:`phalanx.flower.server_app`), which records every round through
   ``PHALANX_DATABASE_URL`` and finishes the run; the run config's
   ``deployment.nodes_timeout_s`` and ``deployment.round_timeout_s`` bound its
   wait for clients and for each round.
3. Meanwhile this process streams the run's log (``flwr log --stream``) to a
   file and heartbeats the lease. An operator's cancel reaches the ServerApp
   between rounds; if the ServerApp has not ended the run ``cancel_grace``
   seconds later (e.g. it is still waiting for clients), ``flwr stop`` ends it.
4. When Flower reports the run finished and the Phalanx run is still open (the
   ServerApp crashed, was stopped, or never started), the run is closed here:
   ``failed`` with Flower's status, or ``cancelled`` when it was cancelled.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from phalanx.config import RunConfig
from phalanx.flower.deployment.admission import reconcile
from phalanx.flower.deployment.control import (
    ControlError,
    FlowerControl,
    FlowerRun,
    SuperLinkConnection,
)
from phalanx.flower.deployment.flower_app import APP_NAME, DeployedRunRequest, write_flower_app
from phalanx.flower.deployment.processes import ManagedProcess
from phalanx.runs.recorder import finish
from phalanx.store import LeaseLostError, RunStatus, runs

__all__ = ["DeployedRun", "DeploymentBackend", "create_deployed_run", "run_on_superlink"]


@dataclass(frozen=True)
class DeployedRun:
    """How a deployed run ended.

    Parameters
    ----------
    run_id : str
        The Phalanx run.
    flower_run_id : int
        Flower's run on the SuperLink.
    flower_status : str
        Flower's final status, e.g. ``finished:completed``.
    status : RunStatus
        The Phalanx run's final status.
    summary : dict or None
        The stored summary.
    error : str or None
        Why the run failed, when it did.
    log_path : Path
        The run's log as Flower streamed it.
    """

    run_id: str
    flower_run_id: int
    flower_status: str
    status: RunStatus
    summary: dict[str, Any] | None
    error: str | None
    log_path: Path


@dataclass
class DeploymentBackend:
    """Admits approved clients to a SuperLink and executes claimed runs on it.

    Parameters
    ----------
    sessions : sessionmaker
        The Phalanx database.
    control : FlowerControl
        The SuperLink's Control API.
    log_dir : Path
        Each Flower run's log goes here.
    report : callable
        Receives one line per admission event.
    """

    sessions: sessionmaker[Session]
    control: FlowerControl
    log_dir: Path
    report: Callable[[str], None] = print
    refused: set[str] = field(default_factory=set)
    told: dict[str, str] = field(default_factory=dict)
    """The last reason reported for each client not admitted, so that it is said once."""

    def poll(self) -> None:
        """Admit approved clients (every turn of the dispatcher loop)."""
        self.admit()

    def admit(self) -> bool:
        """Bring the SuperLink's registered keys in line with the approved clients.

        Returns whether every client was brought in line (none refused or out of reach).

        A client the SuperLink refuses for good (its key registered before) is
        reported once and not tried again; one that failed otherwise (the SuperLink
        out of reach for a moment) is tried again on every poll, its reason reported
        when it changes.
        """
        try:
            done = reconcile(self.sessions, self.control, skip=self.refused)
        except ControlError as exc:
            self.report(f"cannot reach the SuperLink's Control API: {exc}")
            return False
        for client_id, node_id in done.admitted.items():
            self.told.pop(client_id, None)
            self.report(f"client {client_id} admitted to the SuperLink as node {node_id}")
        for client_id, node_id in done.banned.items():
            self.told.pop(client_id, None)
            self.report(f"client {client_id} banned: node {node_id} unregistered")
        for client_id, reason in done.errors.items():
            if client_id in done.lasting:
                self.refused.add(client_id)
            if self.told.get(client_id) != reason:
                self.told[client_id] = reason
                self.report(f"client {client_id} not admitted: {reason}")
        return not done.errors and not done.skipped

    def check(self, config: RunConfig) -> None:
        """Nothing to check here: the data lives with the clients."""

    def execute(
        self, run_id: str, config: RunConfig, *, claimer: str, alive: Callable[[], None]
    ) -> str:
        """Execute a claimed run on its SuperLink; return how it ended, in one line."""
        result = run_on_superlink(
            config,
            self.control_for(config.deployment.superlink),
            sessions=self.sessions,
            claimer=claimer,
            run_id=run_id,
            log_dir=self.log_dir,
            on_heartbeat=alive,
        )
        return (
            f"run {run_id} {result.status.value} (Flower run {result.flower_run_id}: "
            f"{result.flower_status})" + (f": {result.error}" if result.error else "")
        )

    def control_for(self, address: str | None) -> FlowerControl:
        """Return the Control API of the SuperLink at ``address`` (this backend's by default).

        Another SuperLink is trusted through the same CA certificate, with a Flower
        home of its own beside this one's.
        """
        connection = self.control.connection
        if address is None or address == connection.address:
            return self.control
        home = self.control.home.with_name(
            f"{self.control.home.name}-{re.sub(r'[^A-Za-z0-9.-]', '_', address)}"
        )
        return FlowerControl(SuperLinkConnection(address, connection.root_certificates), home)


def create_deployed_run(sessions: sessionmaker[Session], config: RunConfig, claimer: str) -> str:
    """Create a run from ``config`` and claim it for ``claimer``; return its id."""
    with sessions.begin() as session:
        run = runs.create_run(
            session, name=config.name, config=config.model_dump(mode="json"), seed=config.seed
        )
        run_id = run.id
        runs.start_run(session, run_id, claimer)
    return run_id


def run_on_superlink(
    config: RunConfig,
    control: FlowerControl,
    *,
    sessions: sessionmaker[Session],
    claimer: str,
    run_id: str | None = None,
    log_dir: Path,
    heartbeat: float = 5.0,
    cancel_grace: float = 60.0,
    on_status: Callable[[FlowerRun], None] | None = None,
    on_heartbeat: Callable[[], None] | None = None,
) -> DeployedRun:
    """Execute a Phalanx run on the SuperLink behind ``control``; return once it ended.

    Parameters
    ----------
    config : RunConfig
        The run's configuration; used to create the run when ``run_id`` is None.
    control : FlowerControl
        The SuperLink's Control API.
    sessions : sessionmaker
        The Phalanx database (the same one the SuperLink's ServerApp writes to).
    claimer : str
        The lease; the run must be running under it when ``run_id`` is given.
    run_id : str, optional
        A run claimed already (``phalanx coordinator``); a new one otherwise.
    log_dir : Path
        The Flower run's log goes to ``log_dir / f"{run_id}.log"``.
    heartbeat : float
        Seconds between heartbeats of the lease.
    cancel_grace : float
        Seconds the ServerApp gets to honour a cancel before ``flwr stop``.
    on_status : callable, optional
        Called with Flower's status whenever this function reads it.
    on_heartbeat : callable, optional
        Called after every heartbeat of the lease (a liveness signal).

    Raises
    ------
    phalanx.flower.deployment.control.ControlError
        When the SuperLink refuses the run (the Phalanx run is marked failed).
    phalanx.store.LeaseLostError
        When another coordinator took the run over; the Flower run is stopped.
    """
    if run_id is None:
        run_id = create_deployed_run(sessions, config, claimer)
    request = DeployedRunRequest(run_id=run_id, claimer=claimer)
    log_path = log_dir / f"{run_id}.log"
    try:
        with tempfile.TemporaryDirectory(prefix="phalanx-fab-") as folder:
            app = write_flower_app(Path(folder) / APP_NAME)
            overrides = Path(folder) / "run-config.toml"
            overrides.write_text(request.to_toml(), encoding="utf-8")
            flower_run_id = control.start_run(app, overrides)
    except Exception as exc:
        finish(
            sessions, run_id, RunStatus.FAILED, claimer=claimer, error=f"SuperLink refused: {exc}"
        )
        raise
    follower = _Follower(
        control, sessions, run_id, claimer, flower_run_id, log_path, on_status, on_heartbeat
    )
    try:
        flower = follower.follow(heartbeat=heartbeat, cancel_grace=cancel_grace)
    finally:
        follower.close()
    return _conclude(sessions, run_id, claimer, flower, cancelled=follower.cancelled, log=log_path)


class _Follower:
    """Follows one Flower run: streams its log, heartbeats the lease, relays a cancel."""

    def __init__(
        self,
        control: FlowerControl,
        sessions: sessionmaker[Session],
        run_id: str,
        claimer: str,
        flower_run_id: int,
        log_path: Path,
        on_status: Callable[[FlowerRun], None] | None,
        on_heartbeat: Callable[[], None] | None,
    ) -> None:
        self.control = control
        self.sessions = sessions
        self.run_id = run_id
        self.claimer = claimer
        self.flower_run_id = flower_run_id
        self.log_path = log_path
        self.on_status = on_status
        self.on_heartbeat = on_heartbeat
        self.cancelled = False
        self.stream: ManagedProcess | None = None

    def follow(self, *, heartbeat: float, cancel_grace: float) -> FlowerRun:
        """Return Flower's final status of the run."""
        cancel_at: float | None = None
        stop_sent = False
        while True:
            if self.stream is None or not self.stream.running():
                flower = self._status()
                if flower.finished:
                    return flower
                self.stream = self.control.stream_logs(self.flower_run_id, self.log_path)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.stream.popen.wait(heartbeat)  # returns early when the stream ends
            lease = self._lease()
            if self.on_heartbeat is not None:
                self.on_heartbeat()
            if lease == "cancel" and cancel_at is None:
                cancel_at = time.monotonic()
                self.cancelled = True
            if (
                cancel_at is not None
                and not stop_sent
                and time.monotonic() - cancel_at > cancel_grace
            ):
                self.control.stop_run(self.flower_run_id)
                stop_sent = True

    def close(self) -> None:
        """Stop the log stream, if it still runs."""
        if self.stream is not None:
            self.stream.stop(timeout=5.0)

    def _status(self) -> FlowerRun:
        flower = self.control.run(self.flower_run_id)
        if self.on_status is not None:
            self.on_status(flower)
        return flower

    def _lease(self) -> str:
        """``"held"``, ``"cancel"`` (cancel requested) or ``"closed"`` (the run ended)."""
        with self.sessions.begin() as session:
            try:
                run = runs.heartbeat(session, self.run_id, self.claimer)
            except LeaseLostError:
                current = runs.get_run(session, self.run_id)
                if current.status.is_terminal:
                    return "closed"
                self.control.stop_run(self.flower_run_id)
                raise
            return "cancel" if run.cancel_requested else "held"


def _conclude(
    sessions: sessionmaker[Session],
    run_id: str,
    claimer: str,
    flower: FlowerRun,
    *,
    cancelled: bool,
    log: Path,
) -> DeployedRun:
    with sessions() as session:
        run = runs.get_run(session, run_id)
        status, summary, error = run.status, run.summary, run.error
    if not status.is_terminal:
        status = RunStatus.CANCELLED if cancelled else RunStatus.FAILED
        error = (
            None
            if cancelled
            else (
                f"Flower run {flower.run_id} ended {flower.status} before the ServerApp finished "
                f"the run{': ' + flower.details if flower.details else ''}; see {log}"
            )
        )
        summary = finish(sessions, run_id, status, claimer=claimer, error=error).to_dict()
    return DeployedRun(
        run_id=run_id,
        flower_run_id=flower.run_id,
        flower_status=flower.status,
        status=status,
        summary=summary,
        error=error,
        log_path=log,
    )
