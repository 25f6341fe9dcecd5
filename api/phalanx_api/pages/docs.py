"""``/docs``: the OpenAPI explorer (Swagger UI), served from ``static/`` so it works offline.

FastAPI's own ``/docs`` loads Swagger UI from a CDN; this one loads the copy
vendored from npm's ``swagger-ui-dist`` in ``static/vendor/swagger-ui`` (see its
README for the version and license).
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

#: Where the vendored Swagger UI is served.
SWAGGER_UI = "/static/vendor/swagger-ui"

router = APIRouter(include_in_schema=False)


@router.get("/docs", response_class=HTMLResponse)
def swagger_ui() -> HTMLResponse:
    """Serve Swagger UI over this app's OpenAPI schema, without a CDN."""
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="Phalanx API",
        swagger_js_url=f"{SWAGGER_UI}/swagger-ui-bundle.js",
        swagger_css_url=f"{SWAGGER_UI}/swagger-ui.css",
        swagger_favicon_url=f"{SWAGGER_UI}/favicon-32x32.png",
    )
