"""The ``phalanx`` command line (Typer, noun-verb like ``flwr``): every command, mounted once.

::

    phalanx run CONFIG | --resume RUN_ID     simulate a run here and record it
    phalanx demo                             the dashboard, a run queued through the API
    phalanx coordinator [--superlink ...]    execute queued runs, one at a time
    phalanx serve                            the REST API and dashboard
    phalanx db upgrade                       migrate the database
    phalanx keys create|list|revoke          operator API keys
    phalanx client keygen|register|start     this machine as a client
    phalanx deploy certs|superlink|admit|probe-*   Flower's SuperLink, health probes

Heavy imports (torch, Flower, Ray, FastAPI, the database, pydantic, httpx,
cryptography) happen inside the commands, so ``phalanx --help`` and every
command's ``--help`` answer at once; the default ports shown in help come from
:mod:`phalanx.flower.deployment.ports`, which imports nothing. Any error ends in
one line on stderr (:mod:`phalanx_cli.errors`).
"""

from __future__ import annotations

from typing import Annotated, Any

import click
import typer
from typer.core import TyperArgument
from typer.models import ArgumentInfo
from typer.utils import get_params_from_function

from phalanx_cli.client import client_app
from phalanx_cli.demo import demo
from phalanx_cli.deploy import deploy_app
from phalanx_cli.errors import DEBUG_ENV, ReportingGroup
from phalanx_cli.keys import keys_app
from phalanx_cli.output import say
from phalanx_cli.runs import coordinator, run
from phalanx_cli.serve import serve


class PhalanxGroup(ReportingGroup):
    """The ``phalanx`` group: errors in one line, and every argument's help shown."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        restore_argument_help(self)


def restore_argument_help(command: click.Command) -> None:
    """Give the arguments of ``command`` and its subcommands their help texts back.

    Click 8.5's ``Argument`` takes a ``help`` of its own and resets it after
    Typer's ``TyperArgument`` set it, so ``--help`` listed arguments without a
    word. Each text is taken again from the command's function; an argument
    that has its help already keeps it.
    """
    if isinstance(command, click.Group):
        for subcommand in command.commands.values():
            restore_argument_help(subcommand)
    unhelped = [p for p in command.params if isinstance(p, TyperArgument) and p.help is None]
    function = getattr(command.callback, "__wrapped__", None)
    if not unhelped or function is None:
        return
    declared = get_params_from_function(function)
    for argument in unhelped:
        meta = declared.get(argument.name or "")
        if meta is not None and isinstance(meta.default, ArgumentInfo):
            argument.help = meta.default.help


app = typer.Typer(
    cls=PhalanxGroup,
    help="Phalanx: Byzantine-robust federated learning on Flower.",
    no_args_is_help=True,
)
db_app = typer.Typer(help="The database.", no_args_is_help=True)

app.command()(run)
app.command()(demo)
app.command()(coordinator)
app.command()(serve)
app.add_typer(db_app, name="db")
app.add_typer(keys_app, name="keys")
app.add_typer(client_app, name="client")
app.add_typer(deploy_app, name="deploy")


@app.callback()
def _global_options(
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", envvar=DEBUG_ENV, help="Show the traceback of an error, not one line."
        ),
    ] = False,
) -> None:
    """Options of every command (read by :class:`~phalanx_cli.errors.ReportingGroup`)."""


@db_app.command("upgrade")
def db_upgrade(
    revision: Annotated[
        str, typer.Argument(help="An Alembic revision id; head is the latest.")
    ] = "head",
) -> None:
    """Migrate the database (PHALANX_DATABASE_URL) to a revision."""
    from phalanx.settings import get_settings
    from phalanx.store import migrate

    try:
        migrate.check_revision(revision)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="REVISION") from exc
    url = get_settings().resolved_database_url
    migrate.upgrade(url, revision)
    say(f"database at {migrate.current_revision(url)}")


if __name__ == "__main__":
    app()
