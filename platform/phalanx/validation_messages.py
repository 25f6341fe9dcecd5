"""Pydantic's validation errors in plain words, one line each, for the CLI and the API alike.

Pydantic words an error for a programmer: ``Value error, assignment: mols needs ...``,
``Extra inputs are not permitted``. A person who wrote a run config reads instead
``assignment: mols needs ...`` and ``training.optimiser: unknown field; did you mean
`optimizer`?``: the prefix of an error raised by a validator is dropped, and a field
the model does not have is compared with the fields it does have.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from phalanx.english_list import join_words

__all__ = ["describe", "error_message", "one_line"]

Loc = Sequence[str | int]

VALIDATOR_PREFIXES = ("Value error, ", "Assertion failed, ")
"""What pydantic puts before the message of an error a validator raised."""


def error_message(error: Mapping[str, Any], model: type[BaseModel] | None = None) -> str:
    """Return the message of one error in plain words.

    Parameters
    ----------
    error : Mapping
        One of ``ValidationError.errors()``: its ``type``, ``msg`` and ``loc``.
    model : type[BaseModel], optional
        The model whose fields ``error["loc"]`` names; an unknown field is then
        compared with its section's fields ("did you mean `optimizer`?").
    """
    if error.get("type") == "extra_forbidden":
        return _unknown_field(tuple(error.get("loc", ())), model)
    message = str(error.get("msg", ""))
    for prefix in VALIDATOR_PREFIXES:
        message = message.removeprefix(prefix)
    return message


def describe(exc: ValidationError, model: type[BaseModel] | None = None) -> list[str]:
    """Return each error of ``exc`` as ``field.path: message``.

    An error of the whole model (a rule across sections) names its fields itself,
    so it comes without a path.
    """
    lines = []
    for error in exc.errors():
        message = error_message(error, model)
        where = ".".join(map(str, error["loc"]))
        lines.append(f"{where}: {message}" if where else message)
    return lines


def one_line(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """Return every error of ``exc`` on one line, ``field.path: message; ...``."""
    return "; ".join(describe(exc, model))


def _unknown_field(loc: Loc, model: type[BaseModel] | None) -> str:
    """Say that the last part of ``loc`` is no field, naming the closest one there is."""
    section = model_at(model, loc[:-1]) if model is not None else None
    if section is None or not loc or not isinstance(loc[-1], str):
        return "unknown field"
    names = [info.alias or name for name, info in section.model_fields.items()]
    close = difflib.get_close_matches(loc[-1], names, n=1)
    if close:
        return f"unknown field; did you mean `{close[0]}`?"
    return f"unknown field; the fields here are {join_words(names)}"


def model_at(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """Return the model that ``loc`` leads to from ``model``, or None if it leads to none.

    Lists, tuples and optional fields are looked through: ``("files", 0)`` of a
    ``files: list[File]`` field leads to ``File``.
    """
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None:
            return None
        if isinstance(part, int):
            continue  # an item of a list or tuple: the model is its items'
        info = current.model_fields.get(part)
        current = _model_in(info.annotation) if info is not None else None
    return current


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """Return the model an annotation holds (``M``, ``M | None``, ``list[M]``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, tuple, typing.Annotated):
        for argument in typing.get_args(annotation):
            found = _model_in(argument)
            if found is not None:
                return found
    return None
