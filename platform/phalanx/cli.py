"""The ``phalanx`` command line (Typer, noun-verb like ``flwr``)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Literal

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sqlalchemy.orm import Session, sessionmaker

from phalanx.cli_errors import DEBUG_ENV, RefusedError, ReportingGroup, validation_summary
from phalanx.config import RunConfig, load_run_config
from phalanx.data_checks import DataError, DatasetFacts
from phalanx.data_files import DatasetNotFoundError
from phalanx.faults import RunFailedError
from phalanx.flower.deployment.cli import client_start, deploy_app
from phalanx.preflight import check_run_data
from phalanx.reports import RoundReport
from phalanx.runs.summary import RunSummary
from phalanx.settings import get_settings
from phalanx_api.cli import client_app, keys_app, serve_app

app = typer.Typer(
    cls=ReportingGroup,
    help="Phalanx: Byzantine-robust federated learning on Flower.",
    no_args_is_help=True,
)
db_app = typer.Typer(help="The database.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(keys_app, name="keys")
app.add_typer(client_app, name="client")
app.add_typer(serve_app)
client_app.command("start")(client_start)
app.add_typer(deploy_app, name="deploy")

console = Console(stderr=True)
Format = Literal["table", "json"]
DEMO_CONFIG = Path(__file__).with_name("demo.toml")


@app.callback()
def _global_options(
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", envvar=DEBUG_ENV, help="Show the traceback of an error, not one line."
        ),
    ] = False,
) -> None:
    """Options of every command (read by :class:`~phalanx.cli_errors.ReportingGroup`)."""


def _sessions() -> sessionmaker[Session]:
    """Open the configured database, migrated to head."""
    from phalanx.store import make_engine, migrate, session_factory

    url = get_settings().resolved_database_url
    migrate.upgrade(url)
    return session_factory(make_engine(url))


def _execute(
    config: RunConfig, *, resume: str | None, output: Format, ray_address: str | None
) -> RunSummary:
    from phalanx.flower.simulation import SimulationEngine
    from phalanx.roster import SimulatedRoster
    from phalanx.runs.executor import execute
    from phalanx.runs.recorder import claimer_name, create_simulated_run, take_over

    sessions = _sessions()
    claimer = claimer_name()
    if resume is None:
        run_id = create_simulated_run(sessions, config, claimer)
    else:
        run_id = resume
        take_over(sessions, run_id, claimer)
    console.print(f"run [bold]{run_id}[/bold]: {config.name}, {config.rounds} rounds")
    try:
        with _progress(config, output) as (_, on_round):
            return execute(
                sessions,
                run_id,
                transport=SimulationEngine(ray_address=ray_address),
                roster=SimulatedRoster(run_id),
                claimer=claimer,
                checkpoint_dir=get_settings().checkpoint_dir,
                on_round=on_round,
            )
    except RunFailedError as exc:
        console.print(
            f"error: run {run_id} failed: {exc}", highlight=False, markup=False, soft_wrap=True
        )
        raise typer.Exit(1) from exc


@contextmanager
def _progress(
    config: RunConfig, output: Format, out: Console = console
) -> Iterator[tuple[Progress, Callable[[RoundReport], None]]]:
    """Show a progress bar (round, accuracy, flagged workers) while rounds finish.

    On a console that is not a terminal (a log file, a pipe, CI) a bar is
    only drawn at the end, so each round is also printed as a line of its own,
    except with ``--format json``, whose console output is kept to the summary.
    """
    live = out.is_terminal
    with Progress(
        TextColumn("round"),
        MofNCompleteColumn(),
        BarColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=out,
        disable=not live,
    ) as progress:
        task = progress.add_task("rounds", total=config.rounds, status="")

        def on_round(report: RoundReport) -> None:
            flagged = ",".join(map(str, report.flagged)) or "none"
            status = f"accuracy {report.accuracy:.3f}  flagged {flagged}"
            progress.update(task, completed=report.round, status=status)
            if not live and output != "json":
                out.print(f"round {report.round}/{config.rounds}  {status}", highlight=False)

        yield progress, on_round


def _print_summary(summary: RunSummary, output: Format) -> None:
    if output == "json":
        sys.stdout.write(json.dumps(summary.to_dict(), indent=2) + "\n")
        return
    table = Table(title=f"Run {summary.run_id}")
    table.add_column("measure")
    table.add_column("value")
    rows = {
        "rounds": str(summary.rounds),
        "final accuracy": f"{summary.final_accuracy:.4f}",
        "flagged clients": str(len(summary.flagged)),
        "adversaries (ground truth)": str(len(summary.adversaries)),
        "precision": _ratio(summary.precision),
        "recall": _ratio(summary.recall),
        "bytes up": f"{summary.bytes_up:,}",
        "bytes down": f"{summary.bytes_down:,}",
        "model digest": summary.model_digest[:16],
    }
    for key, value in rows.items():
        table.add_row(key, value)
    Console().print(table)


def _ratio(value: float | None) -> str:
    """Format a precision or recall; "n/a" without ground truth (a deployed run)."""
    return "n/a" if value is None else f"{value:.2f}"


def _load_config(path: Path) -> RunConfig:
    """Read a local run config; relative dataset paths are taken from the working directory."""
    try:
        config = load_run_config(path)
    except ValidationError as exc:
        raise RefusedError(f"{path}: {validation_summary(exc)}") from exc
    except (OSError, ValueError) as exc:
        raise RefusedError(f"{path}: {exc}") from exc
    prefix, _, given = config.data.dataset.partition(":")
    if prefix in ("idx", "npz") and not Path(given).is_absolute():
        data = config.data.model_copy(update={"dataset": f"{prefix}:{Path(given).absolute()}"})
        config = config.model_copy(update={"data": data})
    _check_attack(config, source=str(path))
    return config


def _check_attack(config: RunConfig, *, source: str) -> None:
    """Refuse (exit 2) a run whose attack does not load, before anything starts."""
    from phalanx.attack_plugins import AttackPluginError
    from phalanx.attacks import check_attack

    try:
        check_attack(config.attack)
    except AttackPluginError as exc:
        raise RefusedError(f"{source}: attack.{exc.field}: {exc}") from exc


def _checked_data(config: RunConfig, root: Path | None = None) -> DatasetFacts:
    """Check the run's data before anything is recorded or started (refused: exit 2)."""
    try:
        facts = check_run_data(config, root)
    except (DataError, DatasetNotFoundError) as exc:
        raise RefusedError(str(exc)) from exc
    console.print(f"data {escape(facts.describe())}")
    return facts


@app.command()
def run(
    config: Annotated[Path | None, typer.Argument(help="Run config, TOML or JSON.")] = None,
    resume: Annotated[
        str | None, typer.Option(help="Continue this run from its last round.")
    ] = None,
    output: Annotated[str, typer.Option("--format", help="table or json")] = "table",
    ray_address: Annotated[str | None, typer.Option(help="Run on an existing Ray cluster.")] = None,
) -> None:
    """Run a federation through Flower's simulation engine and record it."""
    fmt = _format(output)
    if resume is not None:
        from phalanx.runs.recorder import stored_config

        run_config = stored_config(_sessions(), resume)
        _check_attack(run_config, source=f"run {resume}")
    elif config is None:
        raise typer.BadParameter("give a CONFIG file, or --resume RUN_ID")
    else:
        run_config = _load_config(config)
    _checked_data(run_config)
    _print_summary(_execute(run_config, resume=resume, output=fmt, ray_address=ray_address), fmt)


@app.command()
def demo(
    output: Annotated[str, typer.Option("--format", help="table or json")] = "table",
    serve: Annotated[
        bool, typer.Option("--serve/--no-serve", help="Serve the dashboard (default).")
    ] = True,
    config: Annotated[
        Path | None, typer.Option(help="Another run config, e.g. examples/quick-digits.toml.")
    ] = None,
) -> None:
    """K = 15 workers, STS(15) assignment, 3 ALIE adversaries, Fashion-MNIST CNN.

    By default the API and dashboard are served, the run is queued through the
    API and coordinated by this process, and the dashboard stays up until
    Ctrl-C; ``--no-serve`` runs the demo and exits, for scripts.
    """
    fmt = _format(output)
    run_config = _load_config(config or DEMO_CONFIG)
    _checked_data(run_config)
    if not serve:
        _print_summary(_execute(run_config, resume=None, output=fmt, ray_address=None), fmt)
        return
    from phalanx_api.demo import serve_demo
    from phalanx_api.settings import get_api_settings

    settings = get_api_settings()
    with _progress(run_config, fmt) as (progress, on_round):

        def until_interrupted(summary: RunSummary) -> None:
            progress.stop()
            _print_summary(summary, fmt)
            url = f"http://{settings.api_host}:{settings.api_port}/"
            console.print(f"The dashboard stays up at {url} until Ctrl-C.")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                console.print("stopping")

        serve_demo(
            run_config,
            settings,
            say=console.print,
            on_round=on_round,
            keep_serving=until_interrupted,
        )


@app.command()
def coordinator(
    poll: Annotated[float, typer.Option(help="Seconds between looks for queued runs.")] = 2.0,
    once: Annotated[bool, typer.Option(help="Exit when no run is queued.")] = False,
    superlink: Annotated[
        str | None, typer.Option(envvar="PHALANX_SUPERLINK", help="SuperLink HOST:PORT.")
    ] = None,
    root_certificates: Annotated[
        Path | None,
        typer.Option(envvar="PHALANX_ROOT_CERTIFICATES", help="CA certificate of the SuperLink."),
    ] = None,
    alive_file: Annotated[
        Path | None, typer.Option(help="Touched on every poll and during runs, for health checks.")
    ] = None,
) -> None:
    """Claim queued runs (and runs whose coordinator died) and execute them, one at a time.

    Runs whose ``deployment.backend`` is ``simulation`` are simulated here. With
    ``--superlink``, approved clients' keys are admitted to that SuperLink and
    runs whose ``deployment.backend`` is ``deployment`` execute on it.
    """
    from phalanx.flower.deployment.backend import DeploymentBackend
    from phalanx.flower.deployment.control import FlowerControl, SuperLinkConnection
    from phalanx.flower.simulation import SimulationEngine
    from phalanx.runs.dispatcher import Backend, Dispatcher
    from phalanx.runs.recorder import claimer_name
    from phalanx.runs.simulation_backend import SimulationBackend

    if superlink is not None and root_certificates is None:
        raise typer.BadParameter("--superlink needs --root-certificates (the SuperLink's CA)")
    settings = get_settings()
    sessions = _sessions()
    claimer = claimer_name()

    def report(line: str) -> None:
        console.print(line, markup=False, highlight=False, soft_wrap=True)

    backends: dict[str, Backend] = {
        "simulation": SimulationBackend(
            sessions, SimulationEngine(), settings.checkpoint_dir, settings.datasets_dir
        )
    }
    unavailable = {}
    if superlink is not None and root_certificates is not None:
        control = FlowerControl(
            SuperLinkConnection(superlink, root_certificates), settings.data_dir / "flwr-home"
        )
        backends["deployment"] = DeploymentBackend(
            sessions, control, settings.data_dir / "flower-runs", report=report
        )
    else:
        unavailable["deployment"] = (
            "deployment runs need `phalanx coordinator --superlink HOST:PORT "
            "--root-certificates CA`"
        )
    dispatcher = Dispatcher(
        sessions, claimer, backends, unavailable, report=report, alive_file=alive_file
    )
    where = f" (SuperLink {superlink})" if superlink else ""
    console.print(f"coordinator {claimer} waiting for runs{where}")
    dispatcher.serve(poll=poll, once=once)


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument()] = "head") -> None:
    """Migrate the database (PHALANX_DATABASE_URL) to a revision."""
    from phalanx.store import migrate

    url = get_settings().resolved_database_url
    migrate.upgrade(url, revision)
    console.print(f"database at {migrate.current_revision(url)}")


def _format(value: str) -> Format:
    if value not in ("table", "json"):
        raise typer.BadParameter("--format is table or json")
    return value  # type: ignore[return-value]


if __name__ == "__main__":
    app()
