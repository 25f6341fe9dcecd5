"""Server-rendered pages: the Jinja2 environment and the static files folder.

Templates live in ``phalanx_api/templates`` and static assets (CSS, JavaScript,
fonts: no CDN, the dashboard works offline) in ``phalanx_api/static``, served at
``/static``. Every template gets ``csrf_token(request)``, the token its forms
put in a hidden ``csrf_token`` field.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import Request
from fastapi.templating import Jinja2Templates

from phalanx_api.auth import CSRF_FIELD
from phalanx_api.context import app_context

TEMPLATES_DIR = Path(__file__).with_name("templates")
STATIC_DIR = Path(__file__).with_name("static")


def csrf_token(request: Request) -> str:
    """Return the CSRF token of the request's dashboard session, or ``""`` when logged out."""
    context = app_context(request.app)
    cookie = request.cookies.get(context.settings.session_cookie)
    session = context.signer.loads(cookie) if cookie else None
    return session.csrf_token if session is not None else ""


def make_templates() -> Jinja2Templates:
    """Return the template renderer of the dashboard (HTML autoescaped)."""
    templates = Jinja2Templates(directory=TEMPLATES_DIR)
    templates.env.globals["csrf_token"] = csrf_token
    templates.env.globals["csrf_field"] = CSRF_FIELD
    return templates
