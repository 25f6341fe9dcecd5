"""Config models whose numbers are numbers: ``true`` and ``false`` are not 1 and 0.

Pydantic reads a JSON or TOML boolean as 1 or 0 where an int or a float is meant
(``"rounds": true`` would be one round). A model deriving from
:class:`NumbersNotBooleans` refuses that, with the field named, and still takes
booleans for its ``bool`` fields.
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel, ValidationInfo, field_validator


class NumbersNotBooleans(BaseModel):
    """A model that refuses ``true``/``false`` for each of its number fields."""

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name is not None:
            admitted = leaf_types(cls.model_fields[info.field_name].annotation)
            if bool not in admitted and admitted & {int, float}:
                raise ValueError("must be a number, not true or false")
        return value


def leaf_types(annotation: Any) -> set[type]:
    """Return the classes an annotation admits (``int | None`` -> {int, NoneType})."""
    args = get_args(annotation)
    if not args:
        return {annotation} if isinstance(annotation, type) else set()
    return set().union(*(leaf_types(arg) for arg in args))
