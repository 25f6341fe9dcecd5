"""``phalanx keys``: operator API keys, created, listed and revoked from the server's shell.

Each command migrates the database (``PHALANX_DATABASE_URL``) to head first.
Listings take ``--format json``.
"""

from __future__ import annotations

import getpass
import socket
import sys
from enum import StrEnum
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from phalanx_cli.inputs import migrated_sessions
from phalanx_cli.output import Format, FormatOption, console, print_json, say

keys_app = typer.Typer(help="Operator API keys.", no_args_is_help=True)


class KeyRole(StrEnum):
    """Roles of operator keys, as CLI choices."""

    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


def _database_url() -> str:
    from phalanx_api.settings import get_api_settings

    return get_api_settings().resolved_database_url


def _default_name() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "operator"
    return f"{user}@{socket.gethostname()}"


@keys_app.command("create")
def keys_create(
    role: Annotated[
        KeyRole,
        typer.Option(
            help="What the key may do: viewer reads; operator also reviews cases, decides "
            "about clients and launches runs; admin also manages keys."
        ),
    ] = KeyRole.VIEWER,
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

    key_name = (_default_name() if name is None else name).strip()
    if not key_name or len(key_name) > 200 or "\x00" in key_name:
        raise typer.BadParameter("give a name of 1 to 200 characters", param_hint="--name")
    with migrated_sessions(_database_url()) as sessions, sessions.begin() as session:
        created = actions.create_key(session, name=key_name, role=Role(role.value), actor="cli")
        key = created.key
        record = {"id": key.id, "name": key.name, "role": key.role.value, "prefix": key.prefix}
    if output == Format.JSON:
        print_json({**record, "secret": created.secret})
        return
    console.print(
        f"created {record['role']} key [bold]{escape(record['name'])}[/bold] "
        f"({escape(record['id'])}); "
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

    with migrated_sessions(_database_url()) as sessions, sessions() as session:
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
        print_json(rows)
        return
    from rich.table import Table

    table = Table(title="Operator keys")
    for column in ("id", "name", "role", "prefix", "last used", "revoked"):
        table.add_column(column)
    for row in rows:
        cells = (
            row["id"],
            row["name"],
            row["role"],
            row["prefix"],
            row["last_used_at"] or "never",
            row["revoked_at"] or "",
        )
        table.add_row(*(escape(str(c)) for c in cells))
    Console().print(table)


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="The key's id.")]) -> None:
    """Revoke an operator key at once."""
    from phalanx.store import NotFoundError, audit, keys

    try:
        with migrated_sessions(_database_url()) as sessions, sessions.begin() as session:
            key = keys.revoke_key(session, key_id)
            audit.append_audit(
                session, actor="cli", action="key.revoke", target_type="key", target_id=key_id
            )
            name = key.name
    except NotFoundError as exc:
        console.print(f"[red]{escape(str(exc))}[/red]")
        raise typer.Exit(1) from exc
    say(f"revoked key {name} ({key_id})")
