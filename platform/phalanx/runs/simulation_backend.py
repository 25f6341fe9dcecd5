"""The dispatcher's simulation backend: claimed runs simulated in this process.

A run whose ``deployment.backend`` is ``simulation`` has its data checked
before anything starts (bad data fails the run in one line, see
:func:`phalanx.preflight.check_run_data`), its virtual clients registered,
and is then executed by :func:`phalanx.runs.executor.execute` with simulated
identities, over the federation given (Flower's simulation engine for
``phalanx coordinator``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from phalanx.config import RunConfig
from phalanx.data_checks import DataError
from phalanx.data_files import DatasetNotFoundError
from phalanx.exchange import Transport
from phalanx.preflight import check_run_data
from phalanx.reports import RoundReport
from phalanx.roster import SimulatedRoster
from phalanx.runs.dispatcher import RunRefusedError
from phalanx.runs.executor import Federation, execute
from phalanx.runs.recorder import register_simulated_clients

__all__ = ["SimulationBackend"]


@dataclass(frozen=True)
class SimulationBackend:
    """Executes simulated runs in this process.

    Parameters
    ----------
    sessions : sessionmaker
        The Phalanx database.
    transport : Federation or Transport
        Where the simulated workers run (e.g. Flower's simulation engine).
    checkpoint_dir : Path
        Checkpoint files go to ``checkpoint_dir / run_id``.
    datasets_dir : Path, optional
        Where relative dataset paths of a run config are looked up.
    """

    sessions: sessionmaker[Session]
    transport: Federation | Transport
    checkpoint_dir: Path
    datasets_dir: Path | None = None

    def poll(self) -> None:
        """Nothing to do between runs."""

    def check(self, config: RunConfig) -> None:
        """Read the run's data and check it against its config.

        Raises
        ------
        RunRefusedError
            ``data refused: ...`` when the data is missing or does not fit.
        """
        try:
            check_run_data(config, self.datasets_dir)
        except (DataError, DatasetNotFoundError) as exc:
            raise RunRefusedError(f"data refused: {exc}", str(exc)) from exc

    def execute(
        self, run_id: str, config: RunConfig, *, claimer: str, alive: Callable[[], None]
    ) -> str:
        """Register the run's virtual clients and execute it to its end."""

        def after_round(report: RoundReport) -> None:
            alive()

        register_simulated_clients(self.sessions, run_id, config)
        summary = execute(
            self.sessions,
            run_id,
            transport=self.transport,
            roster=SimulatedRoster(run_id),
            claimer=claimer,
            checkpoint_dir=self.checkpoint_dir,
            on_round=after_round,
        )
        return (
            f"run {run_id} finished: {summary.rounds} of {config.rounds} rounds, "
            f"accuracy {summary.final_accuracy:.4f}"
        )
