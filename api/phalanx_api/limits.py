"""The request body size limit, enforced before any route reads the body."""

from __future__ import annotations

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from phalanx_api.errors import error_response


def too_large_message(limit: int) -> str:
    """Return the 413 message for a body over ``limit`` bytes."""
    return f"request body too large: the limit is {limit} bytes"


class BodySizeLimitMiddleware:
    """Answer 413 to a request whose body exceeds ``max_bytes``.

    A declared ``Content-Length`` over the limit is refused before the app runs;
    a body streamed without one is counted as it is read, and reading past the
    limit raises an ``HTTPException(413)`` that the error handlers answer.

    Parameters
    ----------
    app : ASGIApp
        The wrapped application.
    max_bytes : int
        Largest body accepted.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the declared length, then count the body as the app reads it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            response = error_response(413, too_large_message(self.max_bytes))
            await response(scope, receive, send)
            return

        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise HTTPException(413, too_large_message(self.max_bytes))
            return message

        await self.app(scope, counting_receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
