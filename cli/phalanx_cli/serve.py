"""``phalanx serve``: the REST API and dashboard under uvicorn."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from phalanx_cli.output import say


class LogLevel(StrEnum):
    """uvicorn's log levels, the quietest first."""

    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    DEBUG = "debug"
    TRACE = "trace"


def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to bind; default PHALANX_API_HOST.")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(min=1, max=65535, help="Port to bind; default PHALANX_API_PORT."),
    ] = None,
    log_level: Annotated[
        LogLevel,
        typer.Option(help="How much the server logs, from critical errors to each request."),
    ] = LogLevel.INFO,
    workers: Annotated[
        int, typer.Option(min=1, help="Server processes (each reads the PHALANX_* settings).")
    ] = 1,
) -> None:
    """Serve the REST API and dashboard (migrates the database first)."""
    import uvicorn

    from phalanx.store import migrate
    from phalanx_api.main import create_app
    from phalanx_api.settings import get_api_settings

    settings = get_api_settings()
    migrate.upgrade(settings.resolved_database_url)
    app = create_app(settings)
    bind_host = host or settings.api_host
    bind_port = port if port is not None else settings.api_port
    say(f"Phalanx API on http://{bind_host}:{bind_port} (docs at /docs)")
    if workers > 1:
        # Several processes need an import string; each builds its app from the environment.
        uvicorn.run(
            "phalanx_api.main:create_app",
            factory=True,
            host=bind_host,
            port=bind_port,
            log_level=log_level.value,
            workers=workers,
        )
        return
    uvicorn.run(app, host=bind_host, port=bind_port, log_level=log_level.value)
