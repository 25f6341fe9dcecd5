"""``/docs``: the OpenAPI explorer (Swagger UI), served from ``static/`` so it works offline.

FastAPI's own ``/docs`` loads Swagger UI from a CDN and starts it with an inline
script; this one loads the copy vendored from npm's ``swagger-ui-dist`` in
``static/vendor/swagger-ui`` (see its README for the version and license) and
starts it from ``static/swagger-init.js``, so the page runs under the same
Content-Security-Policy as the dashboard (no inline script).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from phalanx_api.deps import ContextDep

#: Where the vendored Swagger UI is served.
SWAGGER_UI = "/static/vendor/swagger-ui"

router = APIRouter(include_in_schema=False)


@router.get("/docs", response_class=HTMLResponse)
def swagger_ui(request: Request, context: ContextDep) -> Response:
    """Serve Swagger UI over this app's OpenAPI schema, without a CDN or inline script."""
    return context.templates.TemplateResponse(request, "docs.html", {"swagger_ui": SWAGGER_UI})
