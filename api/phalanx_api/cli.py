"""Command-line pieces of the control plane, as Typer apps the ``phalanx`` CLI mounts.

::

    from phalanx_api.cli import client_app, keys_app, serve_app

    app.add_typer(keys_app, name="keys")      # phalanx keys create|list|revoke
    app.add_typer(client_app, name="client")  # phalanx client keygen|register
    app.add_typer(serve_app)                  # phalanx serve

Heavy imports (FastAPI, uvicorn, the database) happen inside the commands, so
``phalanx --help`` stays fast. Listings take ``--format json``.
"""

from __future__ import annotations

import getpass
import json
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from phalanx_api.settings import ApiSettings

keys_app = typer.Typer(help="Operator API keys.", no_args_is_help=True)
client_app = typer.Typer(
    help="This machine as a Phalanx client: its key pair and its registration.",
    no_args_is_help=True,
)
serve_app = typer.Typer()

console = Console(stderr=True)


class KeyRole(StrEnum):
    """Roles of operator keys, as CLI choices."""

    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


class Format(StrEnum):
    """Output formats of listings."""

    TABLE = "table"
    JSON = "json"


class CurveChoice(StrEnum):
    """EC curves a client key can be on."""

    P256 = "P-256"
    P384 = "P-384"


FormatOption = Annotated[Format, typer.Option("--format", help="table or json")]


def _settings() -> ApiSettings:
    from phalanx_api.settings import get_api_settings

    return get_api_settings()


@contextmanager
def _migrated_sessions(settings: ApiSettings) -> Iterator[sessionmaker[Session]]:
    """Migrate the database to head, then yield its session factory; dispose of it after."""
    from phalanx.store import make_engine, migrate, session_factory

    url = settings.resolved_database_url
    migrate.upgrade(url)
    engine = make_engine(url)
    try:
        yield session_factory(engine)
    finally:
        engine.dispose()


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _default_name() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "operator"
    return f"{user}@{socket.gethostname()}"


# ------------------------------------------------------------------- keys


@keys_app.command("create")
def keys_create(
    role: Annotated[KeyRole, typer.Option(help="viewer, operator or admin.")] = KeyRole.VIEWER,
    name: Annotated[
        str | None, typer.Option(help="Whose key it is (audit log); default user@host.")
    ] = None,
    output: FormatOption = Format.TABLE,
) -> None:
    """Create an operator API key and print its secret, this once.

    Migrates the database (PHALANX_DATABASE_URL) to the latest revision first.
    """
    from phalanx.store import Role
    from phalanx_api import actions

    key_name = (name or _default_name()).strip()
    if not key_name or len(key_name) > 200 or "\x00" in key_name:
        raise typer.BadParameter("give a name of 1 to 200 characters", param_hint="--name")
    with _migrated_sessions(_settings()) as sessions, sessions.begin() as session:
        created = actions.create_key(session, name=key_name, role=Role(role.value), actor="cli")
        key = created.key
        record = {"id": key.id, "name": key.name, "role": key.role.value, "prefix": key.prefix}
    if output == Format.JSON:
        _print_json({**record, "secret": created.secret})
        return
    console.print(
        f"created {record['role']} key [bold]{record['name']}[/bold] ({record['id']}); "
        "its secret follows and is not shown again:"
    )
    sys.stdout.write(created.secret + "\n")


@keys_app.command("list")
def keys_list(
    include_revoked: Annotated[bool, typer.Option("--all", help="Also revoked keys.")] = False,
    output: FormatOption = Format.TABLE,
) -> None:
    """List operator keys (never their secrets)."""
    from phalanx.store import keys

    with _migrated_sessions(_settings()) as sessions, sessions() as session:
        rows = [
            {
                "id": key.id,
                "name": key.name,
                "role": key.role.value,
                "prefix": key.prefix,
                "created_at": key.created_at.isoformat(),
                "last_used_at": key.last_used_at.isoformat() if key.last_used_at else None,
                "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
            }
            for key in keys.list_keys(session, include_revoked=include_revoked)
        ]
    if output == Format.JSON:
        _print_json(rows)
        return
    table = Table(title="Operator keys")
    for column in ("id", "name", "role", "prefix", "last used", "revoked"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["id"],
            row["name"],
            row["role"],
            row["prefix"],
            row["last_used_at"] or "never",
            row["revoked_at"] or "",
        )
    Console().print(table)


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="The key's id.")]) -> None:
    """Revoke an operator key at once."""
    from phalanx.store import NotFoundError, audit, keys

    try:
        with _migrated_sessions(_settings()) as sessions, sessions.begin() as session:
            key = keys.revoke_key(session, key_id)
            audit.append_audit(
                session, actor="cli", action="key.revoke", target_type="key", target_id=key_id
            )
            name = key.name
    except NotFoundError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    console.print(f"revoked key {name} ({key_id})")


# ------------------------------------------------------------------ serve


@serve_app.command("serve")
def serve(
    host: Annotated[str | None, typer.Option(help="Default: PHALANX_API_HOST.")] = None,
    port: Annotated[int | None, typer.Option(help="Default: PHALANX_API_PORT.")] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    workers: Annotated[
        int, typer.Option(min=1, help="Server processes (each reads the PHALANX_* settings).")
    ] = 1,
) -> None:
    """Serve the REST API and dashboard (migrates the database first)."""
    import uvicorn

    from phalanx.store import migrate
    from phalanx_api.main import create_app

    settings = _settings()
    migrate.upgrade(settings.resolved_database_url)
    app = create_app(settings)
    bind_host = host or settings.api_host
    bind_port = port if port is not None else settings.api_port
    console.print(f"Phalanx API on http://{bind_host}:{bind_port} (docs at /docs)")
    if workers > 1:
        # Several processes need an import string; each builds its app from the environment.
        uvicorn.run(
            "phalanx_api.main:create_app",
            factory=True,
            host=bind_host,
            port=bind_port,
            log_level=log_level,
            workers=workers,
        )
        return
    uvicorn.run(app, host=bind_host, port=bind_port, log_level=log_level)


# ----------------------------------------------------------------- client


@client_app.command("keygen")
def client_keygen(
    out: Annotated[Path, typer.Option(help="Private key file; the public key goes to OUT.pub.")],
    curve: Annotated[CurveChoice, typer.Option(help="P-256 or P-384.")] = CurveChoice.P256,
    force: Annotated[bool, typer.Option(help="Overwrite existing files.")] = False,
) -> None:
    """Generate the client's key pair (OpenSSH format, usable as the Flower SuperNode key)."""
    from phalanx.identity import (
        generate_private_key,
        public_key_fingerprint,
        save_private_key,
        save_public_key,
    )

    key = generate_private_key(curve.value)
    public_path = out.with_name(out.name + ".pub")
    try:
        save_private_key(out, key, overwrite=force)
        save_public_key(public_path, key.public_key(), overwrite=force)
    except FileExistsError as exc:
        console.print(f"[red]{exc.filename} exists; pass --force to overwrite it[/red]")
        raise typer.Exit(1) from exc
    console.print(f"private key {out} (mode 0600), public key {public_path}")
    sys.stdout.write(public_key_fingerprint(key.public_key()) + "\n")


@client_app.command("register")
def client_register(
    key: Annotated[Path, typer.Option(help="The private key file from `client keygen`.")],
    api: Annotated[
        str | None, typer.Option(help="Control plane URL; default http://API_HOST:API_PORT.")
    ] = None,
    name: Annotated[str | None, typer.Option(help="The client's name; default the host.")] = None,
    output: FormatOption = Format.TABLE,
) -> None:
    """Register this client's key with the control plane and prove possession of it."""
    from phalanx.identity import IdentityError, load_private_key_file
    from phalanx_api.enrollment import EnrollmentError, register

    settings = _settings()
    api_url = api or f"http://{settings.api_host}:{settings.api_port}"
    try:
        private_key = load_private_key_file(key)
    except (IdentityError, OSError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--key") from exc
    try:
        enrollment = register(api_url, private_key, name or socket.gethostname())
    except EnrollmentError as exc:
        console.print(f"[red]registration failed: {exc}[/red]")
        raise typer.Exit(1) from exc
    if output == Format.JSON:
        _print_json({"id": enrollment.client_id, "status": enrollment.status})
        return
    sys.stdout.write(f"{enrollment.client_id} {enrollment.status}\n")
    if enrollment.status == "pending":
        console.print("registered; an operator must approve this client before it gets work")
