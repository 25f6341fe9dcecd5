"""Errors a user can cause, and the one place that turns them into HTTP answers.

Every error answer is JSON with a ``detail`` message (:class:`~phalanx_api.schemas.ErrorOut`);
a 422 adds the invalid fields one by one
(:class:`~phalanx_api.schemas.ValidationErrorOut`). Routes never build error
responses themselves: they, the store and the request parsing raise, and the
handlers registered by :func:`install_error_handlers` answer.

=====================================  ======
raised                                 status
=====================================  ======
invalid request (path, query, body)    422
:class:`InvalidInputError`             422
:class:`BadRequestError`               400
:class:`AuthenticationError`           401
:class:`PermissionDeniedError`         403
store ``NotFoundError``                404
store ``ConflictError``                409
body over the size limit               413
:class:`RateLimitedError`              429
database refused a value               422
database locked, unreachable or busy   503 (``Retry-After``)
=====================================  ======
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel
from sqlalchemy.exc import DataError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

from phalanx.identity import IdentityError
from phalanx.store import ConflictError, NotFoundError
from phalanx.validation_messages import error_message
from phalanx_api.ratelimit import retry_after
from phalanx_api.schemas import ErrorOut, FieldErrorOut, ValidationErrorOut

logger = logging.getLogger(__name__)

#: Seconds a client is asked to wait before trying again when the database is busy.
RETRY_AFTER_S = 2


class ApiError(Exception):
    """An error the caller caused, answered with ``status_code`` and the message.

    Attributes
    ----------
    status_code : int
        The HTTP status.
    keep_changes : bool
        Commit the request's database changes although it failed (for an
        error that must not undo what the request recorded).
    """

    status_code: ClassVar[int] = 400
    keep_changes: ClassVar[bool] = False

    def __init__(self, message: str, *, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = dict(headers or {})


class BadRequestError(ApiError):
    """The request cannot be carried out as sent (400)."""


class ProofRejectedError(BadRequestError):
    """A proof of possession failed (400); the challenge stays live.

    The refusal itself is audited (``client.proof_failed``), so the request's changes
    are kept: that entry is the only one.
    """

    keep_changes = True


class AuthenticationError(ApiError):
    """No valid credentials (401)."""

    status_code = 401

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"WWW-Authenticate": "Bearer"})


class PermissionDeniedError(ApiError):
    """Valid credentials, insufficient role or missing CSRF token (403)."""

    status_code = 403


class RateLimitedError(ApiError):
    """Too many requests for now (429), with ``Retry-After`` in whole seconds.

    Parameters
    ----------
    message : str
        Which limit, and when to come back.
    retry_after_s : float
        Seconds until a retry can succeed.
    """

    status_code = 429

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message, headers={"Retry-After": retry_after(retry_after_s)})


class InvalidInputError(ApiError):
    """A well-formed request whose content is invalid (422).

    Parameters
    ----------
    message : str
        What is wrong, naming the field.
    loc : Sequence[str | int]
        Where, as in request validation errors, e.g. ``("body", "public_key")``.
    """

    status_code = 422

    def __init__(self, message: str, *, loc: Sequence[str | int] = ("body",)) -> None:
        super().__init__(message)
        self.loc = list(loc)


def error_response(
    status_code: int, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """Return the JSON answer of an error.

    Parameters
    ----------
    status_code : int
        The HTTP status.
    message : str
        What went wrong.
    headers : Mapping[str, str], optional
        Extra headers such as ``WWW-Authenticate``.

    Returns
    -------
    JSONResponse
        ``{"detail": message}``.
    """
    body = ErrorOut(detail=message).model_dump()
    return JSONResponse(body, status_code=status_code, headers=dict(headers or {}))


def validation_response(errors: Sequence[FieldErrorOut]) -> JSONResponse:
    """Return the 422 answer listing invalid fields, with a message naming them all."""
    message = "; ".join(f"{'.'.join(map(str, e.loc))}: {e.msg}" for e in errors)
    body = ValidationErrorOut(detail=message or "invalid request", errors=list(errors))
    return JSONResponse(body.model_dump(), status_code=422)


def _field_errors(raw: Sequence[Any], body: type[BaseModel] | None = None) -> list[FieldErrorOut]:
    """Word each error as the command line does (:mod:`phalanx.validation_messages`).

    ``body`` is the model of the request's body: an unknown field in it is
    compared with the fields its section has ("did you mean `optimizer`?").
    """
    errors = []
    for error in raw:
        loc = [part if isinstance(part, int) else str(part) for part in error.get("loc", ())]
        in_body = body is not None and loc[:1] == ["body"]
        message = (
            error_message({**error, "loc": loc[1:]}, body) if in_body else error_message(error)
        )
        errors.append(FieldErrorOut(loc=loc, msg=message, type=str(error.get("type", ""))))
    return errors


def _body_model(request: Request) -> type[BaseModel] | None:
    """Return the model of the body the request's route reads, if it reads one."""
    route = request.scope.get("route")
    field = route.body_field if isinstance(route, APIRoute) else None
    model = field.field_info.annotation if field is not None else None
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    if isinstance(exc, InvalidInputError):
        return validation_response([FieldErrorOut(loc=exc.loc, msg=exc.message, type="invalid")])
    return error_response(exc.status_code, exc.message, exc.headers)


async def _request_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return validation_response(_field_errors(exc.errors(), _body_model(request)))


async def _not_found(request: Request, exc: Exception) -> JSONResponse:
    return error_response(404, str(exc))


async def _conflict(request: Request, exc: Exception) -> JSONResponse:
    return error_response(409, str(exc))


async def _identity(request: Request, exc: Exception) -> JSONResponse:
    return validation_response([FieldErrorOut(loc=["body"], msg=str(exc), type="invalid")])


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return error_response(exc.status_code, str(exc.detail), exc.headers)


async def _data_error(request: Request, exc: Exception) -> JSONResponse:
    logger.warning("database refused a value: %s", exc)
    return error_response(422, "the database cannot store a value of this request")


async def _database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    logger.error("database unavailable: %s", exc)
    return error_response(
        503,
        "the database is unavailable; try again later",
        {"Retry-After": str(RETRY_AFTER_S)},
    )


async def _database_busy(request: Request, exc: Exception) -> JSONResponse:
    logger.error("no database connection free: %s", exc)
    return error_response(
        503,
        f"the database is busy; try again in {RETRY_AFTER_S} s",
        {"Retry-After": str(RETRY_AFTER_S)},
    )


def install_error_handlers(app: FastAPI) -> None:
    """Register every error handler of the API on ``app``.

    Parameters
    ----------
    app : FastAPI
        The application.
    """
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _request_validation)
    app.add_exception_handler(NotFoundError, _not_found)
    app.add_exception_handler(ConflictError, _conflict)
    app.add_exception_handler(IdentityError, _identity)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(DataError, _data_error)
    app.add_exception_handler(OperationalError, _database_unavailable)
    app.add_exception_handler(PoolTimeoutError, _database_busy)
