"""Error answers as pages, for a person in a browser.

The API answers every error with JSON (:mod:`phalanx_api.errors`). A browser
that asked for a dashboard page gets, for the same error, a page saying the same
thing; and when the answer is 401 (no session, or it expired) it is sent to the
login form, which brings it back afterwards. Requests to the REST API, the
probes and the metrics keep their JSON, whatever they accept.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any, cast
from urllib.parse import urlencode, urlsplit

from fastapi import FastAPI, Request
from fastapi.exceptions import WebSocketRequestValidationError
from fastapi.responses import RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from phalanx_api.paths import API_PREFIX

#: Paths that stay machine-readable whatever the client accepts.
MACHINE_PATHS = (API_PREFIX, "/healthz", "/readyz", "/metrics", "/openapi.json", "/static")

Handler = Callable[[Request, Exception], Response | Awaitable[Response]]

#: Titles of the statuses a dashboard user can meet.
TITLES = {
    400: "The request could not be carried out",
    403: "Not allowed",
    404: "Not found",
    409: "Already done, or not possible now",
    413: "Too large",
    422: "Invalid input",
    429: "Too many requests",
    503: "The database is unavailable",
}


def wants_page(request: Request) -> bool:
    """Whether an error answer to ``request`` should be a page rather than JSON."""
    path = request.url.path
    if any(path == p or path.startswith(p.rstrip("/") + "/") for p in MACHINE_PATHS):
        return False
    return "text/html" in request.headers.get("accept", "")


def login_redirect(request: Request) -> RedirectResponse:
    """Send a browser to the login form, to come back to this page (or, after a form, its page)."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if request.method != "GET":
        referer = urlsplit(request.headers.get("referer", ""))
        same_site = referer.netloc in ("", request.url.netloc)
        target = referer.path if same_site and referer.path.startswith("/") else "/"
    return RedirectResponse("/login?" + urlencode({"next": target}), status_code=303)


def install_error_pages(app: FastAPI, templates: Jinja2Templates) -> None:
    """Make every error handler of ``app`` answer browsers on dashboard pages with a page.

    Call once, after the API's handlers are installed and before the app serves.

    Parameters
    ----------
    app : FastAPI
        The app whose handlers are wrapped.
    templates : Jinja2Templates
        Renders ``error.html``.
    """
    for key, handler in list(app.exception_handlers.items()):
        if isinstance(key, type) and issubclass(key, WebSocketRequestValidationError):
            continue
        app.exception_handlers[key] = _for_browsers(cast(Handler, handler), templates)


def _for_browsers(handler: Handler, templates: Jinja2Templates) -> Handler:
    async def handle(request: Request, exc: Exception) -> Response:
        answer = handler(request, exc)
        response = await answer if inspect.isawaitable(answer) else answer
        if not wants_page(request):
            return response
        if response.status_code == 401:
            return login_redirect(request)
        return templates.TemplateResponse(
            request,
            "error.html",
            {
                "status": response.status_code,
                "title": TITLES.get(response.status_code, "Something went wrong"),
                "detail": _detail(response),
            },
            status_code=response.status_code,
            headers=_kept_headers(response),
        )

    return handle


def _kept_headers(response: Response) -> dict[str, str]:
    """Return the headers of the JSON answer a page keeps (``Retry-After``, ...), not its body's."""
    dropped = {"content-type", "content-length"}
    return {k: v for k, v in response.headers.items() if k.lower() not in dropped}


def _detail(response: Response) -> str:
    try:
        body: Any = json.loads(bytes(response.body))
    except (ValueError, TypeError):
        return ""
    detail = body.get("detail") if isinstance(body, dict) else None
    return detail if isinstance(detail, str) else ""
