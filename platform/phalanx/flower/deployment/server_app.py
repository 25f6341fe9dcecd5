"""The ServerApp a SuperLink runs for a deployed Phalanx run.

Named by the Flower app of :mod:`phalanx.flower.deployment.flower_app`
(``phalanx.flower.deployment.server_app:app``). It runs in the SuperLink's
environment, reads ``PHALANX_DATABASE_URL`` (and ``PHALANX_DATA_DIR`` for
checkpoints) from it, and executes the Phalanx run its Flower run config names
(:func:`phalanx.flower.deployment.execute.execute_deployed_run`).
"""

from __future__ import annotations

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from phalanx.config import RunConfig
from phalanx.coordinator import Transport
from phalanx.flower.deployment.execute import execute_deployed_run
from phalanx.flower.deployment.flower_app import DeployedRunRequest
from phalanx.flower.deployment.roster import Roster
from phalanx.flower.transport import GridTransport
from phalanx.settings import get_settings
from phalanx.store import make_engine, session_factory

__all__ = ["app"]

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Execute the Phalanx run named in the Flower run config on the connected clients."""
    request = DeployedRunRequest.from_run_config(context.run_config)
    settings = get_settings()
    engine = make_engine(settings.resolved_database_url)

    def transport(roster: Roster, config: RunConfig) -> Transport:
        return GridTransport(
            grid, roster.node_of_worker, config.model_dump_json(), timeout=request.round_timeout
        )

    try:
        execute_deployed_run(
            session_factory(engine),
            request.run_id,
            claimer=request.claimer,
            checkpoint_dir=settings.checkpoint_dir,
            online=grid.get_node_ids,
            transport=transport,
            nodes_timeout=request.nodes_timeout,
        )
    finally:
        engine.dispose()
