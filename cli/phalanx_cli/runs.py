"""``phalanx run`` and ``phalanx coordinator``: executing runs, one now or each queued one.

``phalanx run CONFIG`` records a run and simulates it here, through Flower's
simulation engine, showing its rounds as they finish; ``--resume RUN_ID`` takes a
run over from its last checkpoint. ``phalanx coordinator`` is the one dispatcher
loop (:class:`phalanx.runs.dispatcher.Dispatcher`): it claims runs queued through
the API and executes each on its backend, a simulation here or, with
``--superlink``, a deployment on that SuperLink.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from phalanx_cli.errors import INTERRUPTED_EXIT, RefusedError
from phalanx_cli.inputs import (
    check_attack,
    check_simulated,
    checked_data,
    interval,
    load_config,
    migrated_sessions,
)
from phalanx_cli.output import Format, FormatOption, console, print_summary, round_progress, say

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from phalanx.config import RunConfig
    from phalanx.runs.dispatcher import Backend
    from phalanx.runs.summary import RunSummary

DEPLOYMENT_NEEDS = (
    "deployment runs need `phalanx coordinator --superlink HOST:PORT --root-certificates CA`"
)
"""Why a coordinator without ``--superlink`` fails a deployment run."""


def simulate(
    config: RunConfig, *, resume: str | None, output: Format, ray_address: str | None = None
) -> RunSummary:
    """Record ``config`` as a new run (or take run ``resume`` over) and simulate it here.

    Raises
    ------
    typer.Exit
        With status 1 when the run failed (its cause printed in one line).
    """
    from phalanx.faults import RunFailedError
    from phalanx.flower.simulation import SimulationEngine
    from phalanx.roster import SimulatedRoster
    from phalanx.runs.executor import execute
    from phalanx.runs.recorder import claimer_name, create_simulated_run, take_over
    from phalanx.settings import get_settings

    settings = get_settings()
    with migrated_sessions(settings.resolved_database_url) as sessions:
        claimer = claimer_name()
        if resume is None:
            run_id = create_simulated_run(sessions, config, claimer)
        else:
            run_id = resume
            take_over(sessions, run_id, claimer)
        console.print(
            f"run [bold]{escape(run_id)}[/bold]: {escape(config.name)}, {config.rounds} rounds"
        )
        try:
            with round_progress(config, output) as (_, on_round):
                return execute(
                    sessions,
                    run_id,
                    transport=SimulationEngine(ray_address=ray_address),
                    roster=SimulatedRoster(run_id),
                    claimer=claimer,
                    checkpoint_dir=settings.checkpoint_dir,
                    on_round=on_round,
                )
        except RunFailedError as exc:
            say(f"error: run {run_id} failed: {exc}")
            raise typer.Exit(1) from exc
        except KeyboardInterrupt:
            say(interrupted(sessions, run_id, config.rounds))
            raise typer.Exit(INTERRUPTED_EXIT) from None


def interrupted(sessions: sessionmaker[Session], run_id: str, rounds: int) -> str:
    """Return the line that tells the operator where an interrupted run stopped."""
    from phalanx.runs.recorder import last_round

    done = last_round(sessions, run_id)
    return (
        f"interrupted: run {run_id} stopped after round {done} of {rounds}; "
        f"resume it with `phalanx run --resume {run_id}`"
    )


def run(
    config: Annotated[
        Path | None,
        typer.Argument(
            help="The run config, a TOML or JSON file such as examples/quick-digits.toml; "
            "not with --resume."
        ),
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option(metavar="RUN_ID", help="Continue this run from its last recorded round."),
    ] = None,
    output: FormatOption = Format.TABLE,
    ray_address: Annotated[
        str | None,
        typer.Option(
            metavar="HOST:PORT",
            help="Run on this existing Ray cluster; default: a Ray of the run's own.",
        ),
    ] = None,
) -> None:
    """Run a federation through Flower's simulation engine and record it."""
    if resume is not None and config is not None:
        raise typer.BadParameter(
            f"a resumed run keeps the config stored with it; give {config} or --resume, not both"
        )
    if resume is not None:
        from phalanx.runs.recorder import stored_config
        from phalanx.settings import get_settings

        with migrated_sessions(get_settings().resolved_database_url) as sessions:
            run_config = stored_config(sessions, resume)
        source = f"run {resume}"
        check_attack(run_config, source=source)
    elif config is None:
        raise typer.BadParameter("give a CONFIG file, or --resume RUN_ID")
    else:
        run_config = load_config(config)
        source = str(config)
    check_simulated(run_config, source=source)
    checked_data(run_config)
    summary = simulate(run_config, resume=resume, output=output, ray_address=ray_address)
    print_summary(summary, output)


def coordinator(
    poll: Annotated[
        float,
        typer.Option(help="Seconds between looks for queued runs.", callback=interval("--poll")),
    ] = 2.0,
    once: Annotated[bool, typer.Option(help="Exit when no run is queued.")] = False,
    superlink: Annotated[
        str | None, typer.Option(envvar="PHALANX_SUPERLINK", help="The SuperLink's HOST:PORT.")
    ] = None,
    root_certificates: Annotated[
        Path | None,
        typer.Option(envvar="PHALANX_ROOT_CERTIFICATES", help="CA certificate of the SuperLink."),
    ] = None,
    alive_file: Annotated[
        Path | None, typer.Option(help="Touched on every poll and during runs, for health checks.")
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            envvar="PHALANX_RAY_ADDRESS",
            metavar="HOST:PORT",
            help="Simulate on this existing Ray cluster; default: a Ray of each run's own.",
        ),
    ] = None,
) -> None:
    """Claim queued runs (and runs whose coordinator died) and execute them, one at a time.

    Runs whose deployment.backend is "simulation" are simulated here (on --ray-address's
    cluster when given). With
    --superlink, approved clients' keys are admitted to that SuperLink and runs
    whose deployment.backend is "deployment" execute on it (or on the SuperLink
    their config names, trusted through the same CA).
    """
    from phalanx.flower.deployment.backend import DeploymentBackend
    from phalanx.flower.deployment.control import FlowerControl, SuperLinkConnection
    from phalanx.flower.simulation import SimulationEngine
    from phalanx.runs.dispatcher import Dispatcher
    from phalanx.runs.recorder import claimer_name
    from phalanx.runs.simulation_backend import SimulationBackend
    from phalanx.settings import get_settings

    if superlink is not None and root_certificates is None:
        raise RefusedError("--superlink needs --root-certificates (the SuperLink's CA)")
    settings = get_settings()
    with migrated_sessions(settings.resolved_database_url) as sessions:
        backends: dict[str, Backend] = {
            "simulation": SimulationBackend(
                sessions,
                SimulationEngine(ray_address=ray_address),
                settings.checkpoint_dir,
                settings.datasets_dir,
            )
        }
        unavailable = {}
        if superlink is not None and root_certificates is not None:
            connection = SuperLinkConnection(superlink, root_certificates)
            backends["deployment"] = DeploymentBackend(
                sessions,
                FlowerControl(connection, settings.data_dir / "flwr-home"),
                settings.data_dir / "flower-runs",
                report=say,
            )
        else:
            unavailable["deployment"] = DEPLOYMENT_NEEDS
        claimer = claimer_name()
        dispatcher = Dispatcher(
            sessions, claimer, backends, unavailable, report=say, alive_file=alive_file
        )
        where = f" (SuperLink {superlink})" if superlink else ""
        say(f"coordinator {claimer} waiting for runs{where}")
        try:
            dispatcher.serve(poll=poll, once=once)
        except KeyboardInterrupt:
            say(coordinator_interrupted(sessions, dispatcher.executing))
            raise typer.Exit(INTERRUPTED_EXIT) from None


def coordinator_interrupted(sessions: sessionmaker[Session], run_id: str | None) -> str:
    """Return the line that tells the operator what an interrupted coordinator left behind."""
    from phalanx.runs.recorder import last_round, stored_config
    from phalanx.store.runs import DEFAULT_STALE_AFTER

    if run_id is None:
        return "interrupted: the coordinator stopped between runs"
    done = last_round(sessions, run_id)
    if stored_config(sessions, run_id).deployment.backend == "deployment":
        # Its ServerApp runs on the SuperLink and keeps the run's lease itself.
        return (
            f"interrupted: the coordinator stopped following run {run_id} after its round "
            f"{done}; the run goes on on its SuperLink (cancel it from the dashboard or "
            f"POST /api/v1/runs/{run_id}/cancel)"
        )
    minutes = DEFAULT_STALE_AFTER.total_seconds() / 60
    return (
        f"interrupted: the coordinator stopped during run {run_id}, after its round "
        f"{done}; the run stays running until a coordinator takes it over, {minutes:g} min "
        "after its last heartbeat"
    )
