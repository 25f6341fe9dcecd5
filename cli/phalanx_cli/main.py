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

Heavy imports (torch, Flower, FastAPI, the database) happen inside the commands,
so ``phalanx --help`` stays fast. Any error ends in one line on stderr
(:mod:`phalanx_cli.errors`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from phalanx_cli.client import client_app
from phalanx_cli.demo import demo
from phalanx_cli.deploy import deploy_app
from phalanx_cli.errors import DEBUG_ENV, ReportingGroup
from phalanx_cli.keys import keys_app
from phalanx_cli.output import console
from phalanx_cli.runs import coordinator, run
from phalanx_cli.serve import serve

app = typer.Typer(
    cls=ReportingGroup,
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
def db_upgrade(revision: Annotated[str, typer.Argument()] = "head") -> None:
    """Migrate the database (PHALANX_DATABASE_URL) to a revision."""
    from phalanx.settings import get_settings
    from phalanx.store import migrate

    url = get_settings().resolved_database_url
    migrate.upgrade(url, revision)
    console.print(f"database at {migrate.current_revision(url)}")


if __name__ == "__main__":
    app()
