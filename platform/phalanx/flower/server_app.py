"""The Phalanx ServerApp: the coordinator's round loop over Flower's ``Grid``.

One module for every way Flower runs Phalanx:

- :data:`app`, the component that ``flwr run .`` loads (``[tool.flwr.app.components]``
  in pyproject.toml) and that the deployment's Flower app names
  (:mod:`phalanx.flower.deployment.flower_app`). Its Flower run config says what to run:

  * ``phalanx-run-id`` and ``phalanx-claimer``: a run queued in the database and
    claimed by ``phalanx coordinator``, on the enrolled clients connected to the
    SuperLink (:class:`~phalanx.runs.enrolled.EnrolledRoster`);
  * otherwise ``run-config``, a run config file (``flwr run . --run-config
    'run-config="examples/demo.toml"'``; a relative path is resolved against the
    SuperLink's working directory): a new simulated run, recorded in
    ``PHALANX_DATABASE_URL``, on as many nodes as the config has workers.

- :func:`build_server_app`, the ServerApp of Flower's simulation engine
  (:mod:`phalanx.flower.simulation`), which hands the coordinator to its caller.

Either way :class:`GridFederation` seats the roster on the Grid's nodes
(:func:`phalanx.roster.wait_for_roster`, the one way of waiting for nodes) and
the executor (:func:`phalanx.runs.executor.execute`) drives the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from phalanx.attacks import check_attack
from phalanx.config import RunConfig, load_run_config
from phalanx.exchange import Transport
from phalanx.flower.deployment.binding import NodeBindingTransport
from phalanx.flower.deployment.flower_app import DeployedRunRequest
from phalanx.flower.interruption import Interruption
from phalanx.flower.transport import GridTransport
from phalanx.optim import prepare_in_background
from phalanx.roster import RosterSource, SimulatedRoster, wait_for_roster
from phalanx.runs.enrolled import EnrolledRoster
from phalanx.runs.executor import Drive, execute
from phalanx.runs.recorder import claimer_name, create_simulated_run
from phalanx.settings import get_settings
from phalanx.store import make_engine, migrate, session_factory

__all__ = ["DEFAULT_RUN_CONFIG", "GridFederation", "app", "build_server_app"]

DEFAULT_RUN_CONFIG = "examples/demo.toml"
"""The run config file ``flwr run .`` runs when its run config names none."""


@dataclass(frozen=True)
class GridFederation:
    """The nodes connected to a running ServerApp's Grid, and a transport to them.

    Parameters
    ----------
    grid : Grid
        Flower's grid of the running ServerApp.
    poll_interval : float
        Seconds between looks at the connected nodes while waiting for them.
    window : int, optional
        The most task messages of a round out at once (:class:`GridTransport`'s
        ``window``); ``None``, a deployment's: every task at once.
    batch : bool
        Send a node's tasks of a round in one message (:class:`GridTransport`'s
        ``batch``): the simulation's, whose virtual nodes host several workers.
    """

    grid: Grid
    poll_interval: float = 0.2
    window: int | None = None
    batch: bool = False

    def connect(self, config: RunConfig, roster: RosterSource, drive: Drive) -> None:
        """Wait for the roster's nodes, then drive the coordinator over a Grid transport.

        The run config's ``deployment.nodes_timeout_s`` and
        ``deployment.round_timeout_s`` bound the wait for nodes and for each
        round's replies. Workers that sign their node id (enrolled clients)
        have it checked on every reply (:mod:`phalanx.flower.deployment.binding`).
        """
        prepare_in_background()  # torch's first optimiser's import, while nodes connect
        seated = wait_for_roster(
            self.grid.get_node_ids,
            roster,
            config.assignment.num_workers,
            timeout=config.deployment.nodes_timeout_s,
            interval=self.poll_interval,
        )
        transport: Transport = GridTransport(
            self.grid,
            seated.node_of_worker,
            config.model_dump_json(),
            timeout=config.deployment.round_timeout_s,
            window=self.window,
            batch=self.batch,
        )
        if seated.binds_nodes:
            transport = NodeBindingTransport(transport, seated.members, seated.node_of_worker)
        drive(seated, transport)


def build_server_app(
    config: RunConfig,
    roster: RosterSource,
    drive: Drive,
    *,
    window: int | None = None,
    batch: bool = False,
    interruption: Interruption | None = None,
) -> ServerApp:
    """Build a ServerApp that seats ``roster`` on its Grid's nodes and calls ``drive``.

    ``window``: the most task messages of a round out at once; ``batch``: a node's
    tasks of a round in one message (both the simulation engine's); ``interruption``:
    how the main thread stops the ServerApp's (the simulation engine's).
    """
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        if interruption is not None:
            grid = interruption.grid(grid)
        GridFederation(grid, window=window, batch=batch).connect(config, roster, drive)

    return server_app


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Execute the run the Flower run config names: a claimed run, or a config file's."""
    run_config = context.run_config
    if DeployedRunRequest.names_a_run(run_config):
        _execute_claimed(grid, DeployedRunRequest.from_run_config(run_config))
    else:
        _execute_config_file(grid, Path(str(run_config.get("run-config", DEFAULT_RUN_CONFIG))))


def _execute_claimed(grid: Grid, request: DeployedRunRequest) -> None:
    """Execute a run claimed by ``phalanx coordinator`` on the enrolled clients."""
    settings = get_settings()
    engine = make_engine(settings.resolved_database_url)
    try:
        sessions = session_factory(engine)
        execute(
            sessions,
            request.run_id,
            transport=GridFederation(grid),
            roster=EnrolledRoster(sessions),
            claimer=request.claimer,
            checkpoint_dir=settings.checkpoint_dir,
        )
    finally:
        engine.dispose()


def _execute_config_file(grid: Grid, path: Path) -> None:
    """Record a new simulated run from a config file and execute it on the connected nodes."""
    config = load_run_config(path)
    check_attack(config.attack)  # a bad attack fails here, not in every ClientApp
    settings = get_settings()
    url = settings.resolved_database_url
    migrate.upgrade(url)
    engine = make_engine(url)
    try:
        sessions = session_factory(engine)
        claimer = claimer_name()
        run_id = create_simulated_run(sessions, config, claimer)
        execute(
            sessions,
            run_id,
            transport=GridFederation(grid),
            roster=SimulatedRoster(run_id),
            claimer=claimer,
            checkpoint_dir=settings.checkpoint_dir,
        )
    finally:
        engine.dispose()
