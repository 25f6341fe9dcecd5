"""``HEAD`` answered like ``GET`` without the body, for every page and API reading.

FastAPI routes a ``GET`` route for ``GET`` only, so ``curl -I /`` and uptime checks
that send ``HEAD`` got a 405. HTTP defines ``HEAD`` as ``GET`` without the body
(RFC 9110, section 9.3.2): the same status and headers, ``Content-Length``
included. A route that answers ``GET`` therefore answers ``HEAD`` here; one that
does not (a ``POST`` only route) still answers 405.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGetMiddleware:
    """Serve a ``HEAD`` request as its ``GET`` and send the answer's headers only."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass any other request through; run a ``HEAD`` as ``GET``, dropping the body."""
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] != "http.response.body":
                await send(message)
            elif not message.get("more_body", False):
                await send({"type": "http.response.body", "body": b"", "more_body": False})

        await self.app({**scope, "method": "GET"}, receive, headers_only)
