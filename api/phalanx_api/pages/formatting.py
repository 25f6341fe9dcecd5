"""Numbers, sizes and times as a person reads them; registered as Jinja filters."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from jinja2 import Environment

from phalanx.response_times import seconds_text

_BYTE_UNITS = ("B", "kB", "MB", "GB", "TB", "PB")


def human_bytes(value: float | None) -> str:
    """Return a byte count in SI units, ``"4.27 MB"``; ``"–"`` for ``None``."""
    if value is None or not math.isfinite(value):
        return "–"
    size, unit = float(value), 0
    while abs(size) >= 1000 and unit < len(_BYTE_UNITS) - 1:
        size /= 1000
        unit += 1
    if unit == 0:
        return f"{int(size)} B"
    return f"{size:.3g} {_BYTE_UNITS[unit]}"


def percent(value: float | None, digits: int = 1) -> str:
    """Return a fraction as a percentage, ``0.6434 -> "64.3%"``; ``"–"`` for ``None``."""
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value * 100:.{digits}f}%"


def number(value: float | None, digits: int = 3) -> str:
    """Return a number with ``digits`` significant digits; ``"–"`` for ``None``."""
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value:.{digits}g}"


def timestamp(value: datetime | None) -> str:
    """Return a time in UTC to the second, ``"2025-11-29 17:24:05 UTC"``; ``"–"`` for ``None``."""
    if value is None:
        return "–"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(value: datetime | None, now: datetime | None = None) -> str:
    """Return how long ago a time was, ``"3 min ago"``; ``"never"`` for ``None``."""
    if value is None:
        return "never"
    seconds = ((now or datetime.now(UTC)) - value).total_seconds()
    if seconds < 0:
        return "just now"
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return f"{int(seconds)} s ago"


def duration(seconds: float | None) -> str:
    """Return a duration, ``"42.1 s"``, ``"3 min 5 s"``, ``"2 h 10 min"``; ``"–"`` for ``None``."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def short_id(value: str | None, length: int = 8) -> str:
    """Return the first characters of an id or digest, enough to tell them apart on a page."""
    return "–" if not value else value[:length]


def install_filters(env: Environment) -> None:
    """Register every formatter of this module as a Jinja filter of ``env``."""
    env.filters.update(
        human_bytes=human_bytes,
        percent=percent,
        number=number,
        timestamp=timestamp,
        ago=ago,
        duration=duration,
        short_id=short_id,
        seconds=seconds_text,
    )
