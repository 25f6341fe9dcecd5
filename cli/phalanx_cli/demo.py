"""``phalanx demo``: the control plane, a coordinator, and a run queued through the API.

By default ``phalanx demo`` starts the API and dashboard in this process,
creates an admin key, queues the demo run with ``POST /api/v1/runs`` like any
operator would, claims and executes it as ``phalanx coordinator`` does, and
keeps the dashboard up until Ctrl-C. ``--no-serve`` runs the demo and exits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from phalanx_cli.inputs import check_simulated, checked_data, load_config
from phalanx_cli.output import Format, FormatOption, print_summary, round_progress, say
from phalanx_cli.runs import simulate

if TYPE_CHECKING:
    from phalanx.config import RunConfig
    from phalanx.exchange import Transport
    from phalanx.reports import RoundReport
    from phalanx.runs.executor import Federation
    from phalanx.runs.summary import RunSummary
    from phalanx_api.settings import ApiSettings

DEMO_CONFIG = Path(__file__).with_name("demo.toml")
"""K = 15 workers, STS(15) assignment, 3 ALIE adversaries, Fashion-MNIST CNN."""

Say = Callable[[str], None]


def demo(
    output: FormatOption = Format.TABLE,
    serve: Annotated[
        bool,
        typer.Option(
            "--serve/--no-serve",
            help="Serve the API and dashboard and keep them up after the run; "
            "--no-serve runs the demo and exits, for scripts.",
        ),
    ] = True,
    config: Annotated[
        Path | None,
        typer.Option(
            help="A run config to use instead of the demo's, e.g. examples/quick-digits.toml."
        ),
    ] = None,
) -> None:
    """Run a demo: 15 workers on STS(15), 3 ALIE adversaries, a Fashion-MNIST CNN.

    By default the API and dashboard are served, the run is queued through the
    API and coordinated by this process, and the dashboard stays up until
    Ctrl-C; with --no-serve the demo runs and exits, for scripts.
    """
    path = config or DEMO_CONFIG
    run_config = load_config(path)
    check_simulated(run_config, source=str(path))
    checked_data(run_config)
    if not serve:
        print_summary(simulate(run_config, resume=None, output=output), output)
        return
    from phalanx_api.settings import get_api_settings

    settings = get_api_settings()
    with round_progress(run_config, output) as (progress, on_round):

        def until_interrupted(summary: RunSummary) -> None:
            progress.stop()
            print_summary(summary, output)
            url = f"http://{settings.api_host}:{settings.api_port}/"
            say(f"The dashboard stays up at {url} until Ctrl-C.")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                say("stopping")

        serve_demo(
            run_config,
            settings,
            say=say,
            on_round=on_round,
            keep_serving=until_interrupted,
        )


class DemoServer:
    """The API and dashboard, served from a background thread."""

    def __init__(self, settings: ApiSettings, host: str, port: int) -> None:
        import uvicorn

        from phalanx_api.main import create_app

        config = uvicorn.Config(create_app(settings), host=host, port=port, log_level="warning")
        self.server: uvicorn.Server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="phalanx-api", daemon=True)
        self.url = f"http://{host}:{port}"

    def start(self, timeout: float = 60.0) -> None:
        """Start serving; raise ``RuntimeError`` if the server does not come up."""
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the API did not start on {self.url}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self.server.should_exit = True
        if self.thread.ident is not None:  # started
            self.thread.join(timeout=30)


def queue_through_api(url: str, secret: str, config: RunConfig) -> str:
    """Queue a run with ``POST /api/v1/runs`` and return its id.

    Raises
    ------
    RuntimeError
        When the API refuses the run, with the API's own message (for
        instance data outside ``PHALANX_DATASETS_DIR``).
    """
    import httpx

    response = httpx.post(
        f"{url}/api/v1/runs",
        json=config.model_dump(mode="json"),
        headers={"Authorization": f"Bearer {secret}"},
        timeout=30,
    )
    if response.is_error:
        try:
            detail = str(response.json()["detail"])
        except (ValueError, KeyError, TypeError):
            detail = response.text[:500]
        raise RuntimeError(f"the API refused the run ({response.status_code}): {detail}")
    return str(response.json()["id"])


def dashboard_lines(url: str, secret: str) -> list[str]:
    """Return the lines naming the dashboard and its admin key, the key on a line of its own.

    Alone on its line, the key is copied whole, from a terminal or a log alike.
    """
    return [f"Dashboard: {url}/", "Log in with this admin key:", secret]


def serve_demo(
    config: RunConfig,
    settings: ApiSettings,
    *,
    say: Say,
    on_round: Callable[[RoundReport], None] | None = None,
    keep_serving: Callable[[RunSummary], None] | None = None,
    federation: Callable[[str], Transport | Federation] | None = None,
) -> RunSummary:
    """Serve the dashboard, run ``config`` queued through the API, keep serving.

    Parameters
    ----------
    config : RunConfig
        The run to queue.
    settings : ApiSettings
        Database, data directory, host and port.
    say : callable
        Prints a line for the person at the terminal.
    on_round : callable, optional
        Called after every recorded round (a progress bar).
    keep_serving : callable, optional
        Receives the run's summary and blocks while the dashboard should stay
        up (until Ctrl-C).
    federation : callable, optional
        Makes the run's workers from its id; by default Flower's simulation
        engine (Ray). Tests pass workers in this process.
    """
    from phalanx.flower.simulation import SimulationEngine
    from phalanx.roster import SimulatedRoster
    from phalanx.runs.executor import execute
    from phalanx.runs.recorder import claimer_name, register_simulated_clients
    from phalanx.store import Role, keys, make_engine, migrate, runs, session_factory

    url = settings.resolved_database_url
    migrate.upgrade(url)
    sessions = session_factory(make_engine(url))
    with sessions.begin() as session:
        created = keys.create_key(session, name="demo-admin", role=Role.ADMIN)
    secret = created.secret
    simulated = config.attack.q > 0
    if simulated:  # the demo's run is a simulated attack: its own server must accept it
        settings = settings.model_copy(update={"api_allow_attacks": True})
    server = DemoServer(settings, settings.api_host, settings.api_port)
    shown = False
    try:
        server.start()
        run_id = queue_through_api(server.url, secret, config)
        for line in dashboard_lines(server.url, secret):
            say(line)
        shown = True
        if simulated:
            say("Simulated attacks are enabled on this demo server (PHALANX_API_ALLOW_ATTACKS).")
        say(f"Run {run_id} queued through the API; this process coordinates it.")
        claimer = claimer_name()
        with sessions.begin() as session:
            claimed = runs.start_run(session, run_id, claimer)
            assert claimed.id == run_id
        register_simulated_clients(sessions, run_id, config)
        summary = execute(
            sessions,
            run_id,
            transport=SimulationEngine() if federation is None else federation(run_id),
            roster=SimulatedRoster(run_id),
            claimer=claimer,
            checkpoint_dir=settings.checkpoint_dir,
            on_round=on_round,
        )
        if keep_serving is not None:
            keep_serving(summary)
        return summary
    finally:
        server.stop()
        if not shown:  # the demo failed before anyone saw the key: nobody may hold it
            with sessions.begin() as session:
                keys.revoke_key(session, created.key.id)
