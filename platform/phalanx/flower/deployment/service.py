"""The deployment coordinator: admit approved clients, claim queued runs, run them on the SuperLink.

One loop, one poll at a time:

1. :func:`~phalanx.flower.deployment.admission.reconcile` the SuperLink with the
   database, so a client approved a moment ago can connect (refusals are
   reported once per client, not on every poll);
2. claim the oldest queued run (or one whose coordinator died) and execute it
   with :func:`~phalanx.flower.deployment.backend.run_on_superlink`, to its end;
3. touch ``alive_file``, so a container health check can see the loop turn.

``phalanx coordinator`` runs this loop for runs whose backend is
``deployment``; ``python -m phalanx.flower.deployment.cli coordinator`` runs it for
every queued run (the compose demo).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError
from sqlalchemy.orm import Session, sessionmaker

from phalanx.config import RunConfig
from phalanx.flower.deployment.admission import reconcile
from phalanx.flower.deployment.backend import DeployedRun, run_on_superlink
from phalanx.flower.deployment.control import ControlError, FlowerControl
from phalanx.store import RunStatus, runs

__all__ = ["DeploymentService"]

Report = Callable[[str], None]


@dataclass
class DeploymentService:
    """Admits clients and executes queued runs on one SuperLink.

    Parameters
    ----------
    sessions : sessionmaker
        The Phalanx database.
    control : FlowerControl
        The SuperLink's Control API.
    claimer : str
        This coordinator's lease name.
    log_dir : Path
        Each Flower run's log goes here.
    alive_file : Path, optional
        Touched on every poll.
    report : callable
        Receives one line per event (admissions, runs claimed and ended).
    """

    sessions: sessionmaker[Session]
    control: FlowerControl
    claimer: str
    log_dir: Path
    alive_file: Path | None = None
    report: Report = print
    refused: set[str] = field(default_factory=set)

    def admit(self) -> None:
        """Bring the SuperLink's registered keys in line with the approved clients."""
        try:
            done = reconcile(self.sessions, self.control, skip=self.refused)
        except ControlError as exc:
            self.report(f"cannot reach the SuperLink's Control API: {exc}")
            return
        for client_id, node_id in done.admitted.items():
            self.report(f"client {client_id} admitted to the SuperLink as node {node_id}")
        for client_id, node_id in done.banned.items():
            self.report(f"client {client_id} banned: node {node_id} unregistered")
        for client_id, reason in done.errors.items():
            self.refused.add(client_id)
            self.report(f"client {client_id} not admitted: {reason}")

    def run_next(self) -> DeployedRun | None:
        """Claim one run and execute it to its end; ``None`` when nothing is queued."""
        with self.sessions.begin() as session:
            claimed = runs.claim_next_run(session, self.claimer)
            job = (claimed.id, claimed.config) if claimed else None
        if job is None:
            return None
        run_id, stored = job
        try:
            config = RunConfig.model_validate(stored)
        except ValidationError as exc:
            with self.sessions.begin() as session:
                runs.finish_run(
                    session,
                    run_id,
                    RunStatus.FAILED,
                    claimer=self.claimer,
                    error=f"invalid config: {exc}",
                )
            self.report(f"run {run_id} refused: invalid config")
            return None
        self.report(f"run {run_id} ({config.name}) claimed; starting it on the SuperLink")
        result = run_on_superlink(
            config,
            self.control,
            sessions=self.sessions,
            claimer=self.claimer,
            run_id=run_id,
            log_dir=self.log_dir,
            on_heartbeat=self._alive,
        )
        self.report(
            f"run {run_id} {result.status.value} (Flower run {result.flower_run_id}: "
            f"{result.flower_status})" + (f": {result.error}" if result.error else "")
        )
        return result

    def serve(self, *, poll: float = 5.0, once: bool = False) -> None:
        """Admit and run for ever (or until no run is queued, with ``once``)."""
        while True:
            self._alive()
            self.admit()
            try:
                result = self.run_next()
            except Exception as exc:  # one bad run must not stop the service
                self.report(f"run failed: {type(exc).__name__}: {exc}")
                continue
            if result is None:
                if once:
                    return
                time.sleep(poll)

    def _alive(self) -> None:
        if self.alive_file is not None:
            self.alive_file.parent.mkdir(parents=True, exist_ok=True)
            self.alive_file.touch()
