"""Column types shared by the models and the migrations.

Three types that the two supported databases store differently:

- ``UTCDateTime``: timezone-aware timestamps. PostgreSQL keeps ``timestamptz``;
  SQLite keeps text without an offset, so values are stored in UTC and come back
  with ``tzinfo=UTC`` on both.
- ``UInt64Text``: unsigned 64-bit integers (Flower node ids) as decimal text,
  since ``2**64 - 1`` overflows a signed ``BIGINT``.
- ``JSONType``: ``JSONB`` on PostgreSQL, ``JSON`` elsewhere; SQL ``NULL`` for
  ``None``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Dialect, Integer, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.types import TypeDecorator, TypeEngine

UINT64_MAX = 2**64 - 1

#: JSON column type: JSONB on PostgreSQL, JSON elsewhere; ``None`` is SQL NULL.
JSONType: TypeEngine[Any] = JSON(none_as_null=True).with_variant(
    JSONB(none_as_null=True), "postgresql"
)

#: Auto-incrementing 64-bit key: SQLite only auto-increments ``INTEGER PRIMARY KEY``.
BigIntegerKey: TypeEngine[int] = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    """Return the current time as an aware UTC datetime.

    Returns
    -------
    datetime
        ``datetime.now(UTC)``.
    """
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """An aware datetime stored in UTC; naive datetimes are refused.

    Raises
    ------
    ValueError
        When a naive datetime is bound: pass ``datetime.now(UTC)`` or another
        aware value.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Convert an aware datetime to UTC before it is stored."""
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                f"naive datetime {value!r}: pass an aware datetime such as datetime.now(UTC)"
            )
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Return stored timestamps as aware UTC datetimes."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class UInt64Text(TypeDecorator[int]):
    """An unsigned 64-bit integer stored as decimal text.

    Raises
    ------
    ValueError
        When a bound value is not an integer in ``[0, 2**64 - 1]``.
    """

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: int | None, dialect: Dialect) -> str | None:
        """Render the integer as decimal text, checking its range."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an int, got {type(value).__name__}")
        if not 0 <= value <= UINT64_MAX:
            raise ValueError(f"{value} is outside the unsigned 64-bit range [0, 2**64 - 1]")
        return str(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> int | None:
        """Parse the stored decimal text back into an int."""
        if value is None:
            return None
        return int(value)
