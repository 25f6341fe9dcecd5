"""Reading a device-capacity trace: each worker's measured speed and links, from a CSV file.

Format
------
UTF-8 text (a leading byte-order mark is allowed), one record per line, fields
separated by commas, no quoting. Blank lines and lines whose first non-blank
character is ``#`` are ignored. The first other line is the header; its
columns may come in any order::

    # any comment, e.g. how the trace was made
    worker,seconds_per_sample,up_bytes_per_s,down_bytes_per_s,latency_s
    0,0.0012,1250000,12500000,0.04
    1,0.0051,250000,5000000,0.12

``worker`` (required)
    The worker's index: the rows number the workers ``0 .. N-1``, each once,
    in any order.
``seconds_per_sample`` (required)
    Compute time per training sample, in seconds; ``0 < x <= 3600``.
``up_bytes_per_s``, ``down_bytes_per_s`` (required)
    Uplink and downlink bandwidth, in bytes (not bits) per second;
    ``1 <= x <= 1e12``.
``latency_s`` (optional)
    One-way latency in seconds, ``0 <= x <= 3600``; without the column, the
    config's ``latency_s`` applies.

Numbers are plain decimals (``12``, ``0.5``, ``1.25e6``), surrounded by spaces
or not; ``inf``, ``nan``, ``1_000``, hex and quoted numbers are refused.

The file is treated as hostile: it must be a regular file of at most
:data:`MAX_TRACE_BYTES` bytes (checked before it is read, and again while
reading) with at most :data:`MAX_TRACE_ROWS` rows. Every refusal is one
:class:`TraceError` line that names the file, the line and the column, and
never quotes the file's contents, so that an error shown to a user of the API
reveals nothing of a file that was not a trace.
"""

from __future__ import annotations

import math
import os
import re
import stat
from dataclasses import dataclass

from phalanx.systems.config import (
    MAX_BYTES_PER_S,
    MAX_LATENCY_S,
    MAX_SECONDS_PER_SAMPLE,
    MIN_BYTES_PER_S,
)

MAX_TRACE_BYTES = 2 * 1024 * 1024
"""Largest trace file read, in bytes."""
MAX_TRACE_ROWS = 10_000
"""Most worker rows a trace may have (a run's most workers, ``phalanx.config.MAX_WORKERS``)."""
REQUIRED_COLUMNS = ("worker", "seconds_per_sample", "up_bytes_per_s", "down_bytes_per_s")
"""Columns every trace has."""
OPTIONAL_COLUMNS = ("latency_s",)
"""Columns a trace may have."""

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_WORKER_ID = re.compile(r"[0-9]+")
_MAX_FIELD = 64
"""Longest field, in characters: far more than any number in a trace needs."""

# column -> (lowest, highest, whether the lowest itself is refused)
_BOUNDS: dict[str, tuple[float, float, bool]] = {
    "seconds_per_sample": (0.0, MAX_SECONDS_PER_SAMPLE, True),
    "up_bytes_per_s": (MIN_BYTES_PER_S, MAX_BYTES_PER_S, False),
    "down_bytes_per_s": (MIN_BYTES_PER_S, MAX_BYTES_PER_S, False),
    "latency_s": (0.0, MAX_LATENCY_S, False),
}


class TraceError(ValueError):
    """A trace file that cannot be used, with the reason in one line."""


@dataclass(frozen=True)
class TraceRow:
    """One worker's device as a trace states it.

    Parameters
    ----------
    worker : int
        The worker's index, ``0 .. N-1``.
    seconds_per_sample : float
        Compute time per training sample.
    up_bytes_per_s, down_bytes_per_s : float
        Uplink and downlink bandwidth in bytes per second.
    latency_s : float or None
        One-way latency, or ``None`` when the trace has no ``latency_s`` column.
    """

    worker: int
    seconds_per_sample: float
    up_bytes_per_s: float
    down_bytes_per_s: float
    latency_s: float | None


def load_trace(path: str | os.PathLike[str]) -> tuple[TraceRow, ...]:
    """Read and check the trace at ``path``; rows in worker order.

    Raises
    ------
    TraceError
        When the file cannot be read, is not a regular file, is larger than
        :data:`MAX_TRACE_BYTES`, or its text breaks the format (see the module).
    """
    source = os.fspath(path)
    try:
        facts = os.stat(source)
        if not stat.S_ISREG(facts.st_mode):
            raise TraceError(f"trace {source}: not a regular file")
        if facts.st_size > MAX_TRACE_BYTES:
            raise TraceError(f"trace {source}: larger than {MAX_TRACE_BYTES} bytes")
        with open(source, "rb") as file:
            data = file.read(MAX_TRACE_BYTES + 1)
    except OSError as err:
        raise TraceError(f"trace {source}: cannot read it ({err.strerror or err})") from None
    if len(data) > MAX_TRACE_BYTES:
        raise TraceError(f"trace {source}: larger than {MAX_TRACE_BYTES} bytes")
    return parse_trace(data, source=source)


def parse_trace(data: bytes, *, source: str = "<trace>") -> tuple[TraceRow, ...]:
    """Check the bytes of a trace file and return its rows in worker order.

    Parameters
    ----------
    data : bytes
        The file's contents.
    source : str
        What to call the file in errors.

    Raises
    ------
    TraceError
        When the data breaks the format described in the module.
    """
    if len(data) > MAX_TRACE_BYTES:
        raise TraceError(f"trace {source}: larger than {MAX_TRACE_BYTES} bytes")
    if b"\x00" in data:
        raise TraceError(f"trace {source}: contains NUL bytes, so it is not a text file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise TraceError(f"trace {source}: not UTF-8 text (byte {err.start})") from None
    records = [
        (number, line.rstrip("\r"))
        for number, line in enumerate(text.split("\n"), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not records:
        raise TraceError(f"trace {source}: no header; the first line must name the columns")
    (header_line, header), *body = records
    columns = _columns(header, f"trace {source}: line {header_line}")
    if not body:
        raise TraceError(f"trace {source}: a header but no worker rows")
    if len(body) > MAX_TRACE_ROWS:
        raise TraceError(f"trace {source}: more than {MAX_TRACE_ROWS} worker rows")
    rows: dict[int, TraceRow] = {}
    first_line: dict[int, int] = {}
    for number, line in body:
        where = f"trace {source}: line {number}"
        row = _row(line, columns, len(body), where)
        if row.worker in rows:
            raise TraceError(
                f"{where}, column worker: the same worker as line {first_line[row.worker]}; "
                "each worker has one row"
            )
        rows[row.worker] = row
        first_line[row.worker] = number
    return tuple(rows[worker] for worker in sorted(rows))


def _columns(header: str, where: str) -> tuple[str, ...]:
    """Return the header's column names: known ones, each once, the required ones present."""
    known = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
    names = tuple(field.strip() for field in header.split(","))
    for position, name in enumerate(names, start=1):
        if name not in known:
            raise TraceError(f"{where}: header column {position} is not one of {', '.join(known)}")
        if names.index(name) != position - 1:
            raise TraceError(f"{where}: header names column {name} twice")
    missing = [name for name in REQUIRED_COLUMNS if name not in names]
    if missing:
        raise TraceError(f"{where}: header lacks column {', '.join(missing)}")
    return names


def _row(line: str, columns: tuple[str, ...], num_rows: int, where: str) -> TraceRow:
    """One worker row, every field checked."""
    fields = [field.strip() for field in line.split(",")]
    if len(fields) != len(columns):
        raise TraceError(f"{where}: {len(fields)} fields, but the header has {len(columns)}")
    values: dict[str, float] = {}
    worker = -1
    for name, field in zip(columns, fields, strict=True):
        if name == "worker":
            worker = _worker_id(field, num_rows, f"{where}, column worker")
        else:
            values[name] = _number(field, name, f"{where}, column {name}")
    return TraceRow(
        worker=worker,
        seconds_per_sample=values["seconds_per_sample"],
        up_bytes_per_s=values["up_bytes_per_s"],
        down_bytes_per_s=values["down_bytes_per_s"],
        latency_s=values.get("latency_s"),
    )


def _worker_id(field: str, num_rows: int, where: str) -> int:
    if len(field) > _MAX_FIELD or not _WORKER_ID.fullmatch(field):
        raise TraceError(f"{where}: not a worker index (digits 0-9 only)")
    worker = int(field)
    if worker >= num_rows:
        raise TraceError(
            f"{where}: worker index must be below {num_rows}, the number of rows "
            f"(the workers are 0..{num_rows - 1})"
        )
    return worker


def _number(field: str, name: str, where: str) -> float:
    if not field:
        raise TraceError(f"{where}: empty")
    if len(field) > _MAX_FIELD or not _DECIMAL.fullmatch(field):
        raise TraceError(f"{where}: not a decimal number")
    value = float(field)
    if not math.isfinite(value):
        raise TraceError(f"{where}: too large to be a finite number")
    low, high, open_low = _BOUNDS[name]
    if (value <= low if open_low else value < low) or value > high:
        lowest = f"> {low:g}" if open_low else f">= {low:g}"
        raise TraceError(f"{where}: must be {lowest} and <= {high:g}")
    return value
