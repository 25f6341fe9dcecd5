"""The ServerApp that ``flwr run`` loads (``[tool.flwr.app.components]`` in pyproject.toml).

It reads the run config named by the ``run-config`` key of Flower's run config
(``flwr run . --run-config 'run-config="examples/demo.toml"'``; a relative path is
resolved against the SuperLink's working directory), waits for as many nodes as
the config has workers, records the run in ``PHALANX_DATABASE_URL`` and drives
the coordinator over Flower's ``Grid``.
"""

from __future__ import annotations

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from phalanx.attacks import check_attack
from phalanx.config import load_run_config
from phalanx.flower.server_app import wait_for_nodes
from phalanx.flower.transport import GridTransport
from phalanx.runs.recorder import claimer_name, create_simulated_run
from phalanx.runs.service import run_recorded
from phalanx.settings import get_settings
from phalanx.store import make_engine, migrate, session_factory

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run the configured federation on the nodes connected to this Flower run."""
    config = load_run_config(Path(str(context.run_config.get("run-config", "examples/demo.toml"))))
    check_attack(config.attack)  # a bad attack fails here, not in every ClientApp
    workers = config.assignment.num_workers
    # Before the run is recorded: a federation too small must not leave a
    # `running` run behind for a coordinator to reclaim.
    try:
        nodes = wait_for_nodes(grid, workers)
    except TimeoutError as exc:
        raise TimeoutError(
            f"{exc}; in a simulation, pass `--federation-config num-supernodes={workers}`"
            " to `flwr run`"
        ) from exc
    settings = get_settings()
    url = settings.resolved_database_url
    migrate.upgrade(url)
    sessions = session_factory(make_engine(url))
    claimer = claimer_name()
    run_id = create_simulated_run(sessions, config, claimer)
    transport = GridTransport(grid, dict(enumerate(nodes)), config.model_dump_json())
    run_recorded(
        sessions,
        run_id,
        config,
        claimer=claimer,
        checkpoint_dir=settings.checkpoint_dir,
        transport=transport,
    )
