"""The error answers each route documents in OpenAPI (all raised, never built, by routes)."""

from __future__ import annotations

from typing import Any

from phalanx_api.schemas import ErrorOut, ValidationErrorOut

Responses = dict[int | str, dict[str, Any]]

BAD_REQUEST: Responses = {
    400: {"model": ErrorOut, "description": "Malformed request, or a refused proof."}
}
UNAUTHORIZED: Responses = {
    401: {"model": ErrorOut, "description": "No valid API key or session."},
    403: {"model": ErrorOut, "description": "The key's role is insufficient, or no CSRF token."},
}
NOT_REGISTRANT: Responses = {
    403: {"model": ErrorOut, "description": "Not this registration's registration token."}
}
NOT_FOUND: Responses = {404: {"model": ErrorOut, "description": "No such object."}}
CONFLICT: Responses = {409: {"model": ErrorOut, "description": "Contradicts the stored state."}}
TOO_LARGE: Responses = {413: {"model": ErrorOut, "description": "The request body is too large."}}
INVALID: Responses = {422: {"model": ValidationErrorOut, "description": "Invalid input."}}
TOO_MANY: Responses = {
    429: {
        "model": ErrorOut,
        "description": "Too many requests for now; retry after the seconds in Retry-After.",
        "headers": {
            "Retry-After": {
                "description": "Seconds to wait before retrying.",
                "schema": {"type": "integer", "minimum": 1},
            }
        },
    }
}
UNAVAILABLE: Responses = {503: {"model": ErrorOut, "description": "The database is unavailable."}}


def documented(*groups: Responses) -> Responses:
    """Merge response groups, e.g. ``documented(UNAUTHORIZED, NOT_FOUND)``."""
    merged: Responses = {}
    for group in groups:
        merged.update(group)
    return merged
