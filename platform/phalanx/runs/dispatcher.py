"""The one dispatcher loop: claim queued runs one at a time, hand each to its backend.

``phalanx coordinator`` runs :class:`Dispatcher`. Every turn:

1. touch ``alive_file`` (a container health check sees the loop turn) and let
   every backend do its periodic work (:meth:`Backend.poll`: the deployment
   backend admits approved clients to its SuperLink);
2. claim the oldest queued run, or one whose coordinator died (a locked or
   unreachable database is tried again within the retry policy);
3. refuse, with the reason stored as the run's error, a run whose stored config
   no longer validates or names an attack this host does not allow, or whose
   ``deployment.backend`` this coordinator does not serve, or that its backend
   refuses (:meth:`Backend.check`: the simulation backend reads the run's data);
4. execute it on its backend, to its end.

A run that fails never stops the loop; its error is stored with the run and
reported in one line. The backends are the simulation backend
(:class:`phalanx.runs.simulation_backend.SimulationBackend`) and the
deployment backend (``phalanx.flower.deployment.backend.DeploymentBackend``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError
from sqlalchemy.orm import Session, sessionmaker

from phalanx.attack_plugins import AttackPluginError
from phalanx.attacks import check_attack
from phalanx.config import RunConfig
from phalanx.store import RunStatus, runs
from phalanx.store.retry import RetryPolicy, retry_transient
from phalanx.validation_messages import one_line

__all__ = ["Backend", "Dispatcher", "RunRefusedError"]

Report = Callable[[str], None]


class RunRefusedError(Exception):
    """A claimed run that cannot start; it ends ``failed`` with this error.

    Parameters
    ----------
    error : str
        Stored as the run's error.
    reason : str, optional
        What the dispatcher reports (``run ID refused: REASON``); the error by default.
    """

    def __init__(self, error: str, reason: str | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.reason = reason or error


class Backend(Protocol):
    """Executes claimed runs of one ``deployment.backend``."""

    def poll(self) -> None:
        """Do the periodic work of this backend (called on every turn of the loop)."""
        ...

    def check(self, config: RunConfig) -> None:
        """Refuse a run before it starts.

        Raises
        ------
        RunRefusedError
            Saying why the run cannot start.
        """
        ...

    def execute(
        self, run_id: str, config: RunConfig, *, claimer: str, alive: Callable[[], None]
    ) -> str:
        """Execute a claimed run to its end; return one line saying how it ended.

        ``alive`` is called now and then while the run goes on (a liveness signal).
        """
        ...


@dataclass
class Dispatcher:
    """Claims queued runs and executes each on its backend, one at a time.

    Parameters
    ----------
    sessions : sessionmaker
        The Phalanx database.
    claimer : str
        This coordinator's lease name.
    backends : mapping
        ``deployment.backend`` value -> the backend that executes such runs.
    unavailable : mapping
        ``deployment.backend`` value -> why this coordinator cannot execute such
        runs (stored as their error, e.g. the option that would enable it).
    report : callable
        Receives one line per event (runs claimed, refused and ended).
    alive_file : Path, optional
        Touched on every turn and while a run goes on.
    retry : RetryPolicy
        How long a claim may wait for a locked or unreachable database.
    """

    sessions: sessionmaker[Session]
    claimer: str
    backends: Mapping[str, Backend]
    unavailable: Mapping[str, str] = field(default_factory=dict)
    report: Report = print
    alive_file: Path | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    executing: str | None = field(default=None, init=False)
    """The run being executed; still set when its execution was interrupted (Ctrl-C)."""

    def turn(self) -> bool:
        """Poll the backends, then claim and execute one run; ``False`` when none was queued."""
        self.alive()
        for backend in self.backends.values():
            backend.poll()
        job = retry_transient(self._claim, what="claiming the next queued run", policy=self.retry)
        if job is None:
            return False
        run_id, stored = job
        try:
            config, backend = self._admit(stored)
        except RunRefusedError as exc:
            self._refuse(run_id, exc)
            return True
        where = config.deployment.backend
        self.report(f"run {run_id} ({config.name}) claimed; executing it on the {where} backend")
        self.executing = run_id
        try:
            self.report(backend.execute(run_id, config, claimer=self.claimer, alive=self.alive))
        except Exception as exc:  # one bad run must not stop the loop
            self.report(f"run {run_id} failed: {type(exc).__name__}: {exc}")
        self.executing = None
        return True

    def serve(self, *, poll: float = 2.0, once: bool = False) -> None:
        """Turn for ever, sleeping ``poll`` seconds when nothing is queued (or stop, ``once``)."""
        while True:
            if not self.turn():
                if once:
                    return
                time.sleep(poll)

    def alive(self) -> None:
        """Touch the alive file, if there is one."""
        if self.alive_file is not None:
            self.alive_file.parent.mkdir(parents=True, exist_ok=True)
            self.alive_file.touch()

    def _claim(self) -> tuple[str, Any] | None:
        with self.sessions.begin() as session:
            claimed = runs.claim_next_run(session, self.claimer)
            return (claimed.id, claimed.config) if claimed else None

    def _admit(self, stored: Any) -> tuple[RunConfig, Backend]:
        """Return the run's config and backend, or raise the reason it cannot start."""
        try:
            config = RunConfig.model_validate(stored)
            check_attack(config.attack)
        except ValidationError as exc:
            error = f"invalid config: {one_line(exc, RunConfig)}"
            raise RunRefusedError(error, "invalid config") from exc
        except AttackPluginError as exc:
            error = f"invalid config: attack.{exc.field}: {exc}"
            raise RunRefusedError(error, "invalid config") from exc
        name = config.deployment.backend
        backend = self.backends.get(name)
        if backend is None:
            why = self.unavailable.get(name, f"this coordinator executes no {name} runs")
            raise RunRefusedError(why)
        backend.check(config)
        return config, backend

    def _refuse(self, run_id: str, refusal: RunRefusedError) -> None:
        with self.sessions.begin() as session:
            runs.finish_run(
                session, run_id, RunStatus.FAILED, claimer=self.claimer, error=refusal.error
            )
        self.report(f"run {run_id} refused: {refusal.reason}")
