"""One ANS stack for every coded table of an update.

A table (a layer's symbols, or a low-rank factor's) becomes one stream of
packed symbols, or two when :func:`~phalanx.codec.escape.plan_escape` splits
it: the core stream, then the tail stream of its escapes. Tables are encoded
last first, each table's streams in reverse, so the decoder pops them in
order; one flush ends the whole update.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import constriction
import numpy as np

from .entropy import (
    FloatArray,
    IntArray,
    SymbolArray,
    WordArray,
    group_model,
    group_size,
    group_symbols,
    unpack_values,
)
from .errors import CodecError
from .escape import plan_escape, split_frequencies, split_symbols, split_table

_CHUNK = 1 << 16
"""Coordinates whose escapes are filled at a time."""

Stream: TypeAlias = tuple[SymbolArray, IntArray, int]
"""Packed symbols, the frequency table they are coded with, and their count before packing."""


def table_streams(
    symbols: FloatArray, sym_min: int, frequencies: IntArray, packed: SymbolArray
) -> tuple[Stream, ...]:
    """Build the streams that code one table, in the order the decoder pops them.

    Parameters
    ----------
    symbols : numpy.ndarray
        The table's ``float32`` integer symbols, from ``sym_min``.
    sym_min : int
        Its smallest symbol.
    frequencies : numpy.ndarray
        Its frequency table, at least two entries.
    packed : numpy.ndarray
        ``group_symbols(symbols, sym_min, len(frequencies))``, used as it is
        when the table is not split.

    Returns
    -------
    tuple of Stream
        One stream, or the core stream and the tail stream (a split table's
        frequencies come from its symbols, so some symbol does escape).
    """
    size = symbols.size
    escape = plan_escape(frequencies, size)
    if escape is None:
        return ((packed, frequencies, size),)
    core_frequencies, tail_frequencies = split_frequencies(frequencies, escape)
    core, tail = split_symbols(symbols, sym_min, escape)
    return (
        (group_symbols(core, 0, escape.width + 1), core_frequencies, size),
        (group_symbols(tail, 0, len(tail_frequencies)), tail_frequencies, tail.size),
    )


def encode_symbols(tables: Sequence[Sequence[Stream]]) -> tuple[WordArray, list[int]]:
    """ANS-encode every table's streams into one stream of 32-bit words.

    Parameters
    ----------
    tables : sequence of sequence of Stream
        Per coded table, in order: its streams (:func:`table_streams`).

    Returns
    -------
    words : numpy.ndarray
        The compressed ``uint32`` words, in the coder's native order.
    bits : list of int
        Bits each table added to the stream, in order.
    """
    coder = constriction.stream.stack.AnsCoder()
    bits = [0] * len(tables)
    previous = 0
    for index in range(len(tables) - 1, -1, -1):
        for packed, frequencies, size in reversed(tables[index]):
            coder.encode_reverse(packed, group_model(frequencies, size))
        now = int(coder.num_valid_bits())
        bits[index] = now - previous
        previous = now
    return np.asarray(coder.get_compressed(), dtype=np.uint32), bits


def decode_symbols(
    words: WordArray, tables: Sequence[tuple[IntArray, FloatArray, FloatArray]]
) -> None:
    """Decode what :func:`encode_symbols` wrote, straight into values.

    Parameters
    ----------
    words : numpy.ndarray
        ``uint32`` words.
    tables : sequence of (numpy.ndarray, numpy.ndarray, numpy.ndarray)
        Per coded table, in order: its frequency table (at least two entries,
        positive sum), the finite ``float32`` value of each symbol, and the
        ``float32`` array its values go into (one per symbol of the table).

    Raises
    ------
    CodecError
        If the coder rejects the words, or words remain after the last table.
        (A stream that runs dry early cannot be told apart: ANS decodes its
        missing symbols as the most likely ones. The word count in the header
        still catches every truncated payload.)
    """
    try:
        coder = constriction.stream.stack.AnsCoder(words)
        for frequencies, values, out in tables:
            _decode_table(coder, frequencies, values, out)
        exhausted = bool(coder.is_empty())
    except (KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError):
        raise
    except BaseException as exc:  # constriction raises ValueError; a Rust panic is a BaseException
        raise CodecError(f"entropy decoder rejected the payload: {exc}") from exc
    if not exhausted:
        raise CodecError("payload does not end where the last table's symbols end")


def _pop(coder: Any, frequencies: IntArray, size: int) -> SymbolArray:
    groups = -(-size // group_size(len(frequencies), size))
    return np.asarray(coder.decode(group_model(frequencies, size), groups), dtype=np.int32)


def _decode_table(coder: Any, frequencies: IntArray, values: FloatArray, out: FloatArray) -> None:
    size = out.size
    escape = plan_escape(frequencies, size)
    if escape is None:
        unpack_values(_pop(coder, frequencies, size), values, out)
        return
    core_frequencies, tail_frequencies = split_frequencies(frequencies, escape)
    window_values, tail_values = split_table(values, escape)
    # The escape decodes to NaN, which no finite symbol value is, and marks where the tail goes.
    core_values = np.concatenate(([np.float32(np.nan)], window_values))
    unpack_values(_pop(coder, core_frequencies, size), core_values, out)
    escaped = np.isnan(out)
    count = int(np.count_nonzero(escaped))
    if count == 0:
        return
    tail = np.empty(count, dtype=np.float32)
    unpack_values(_pop(coder, tail_frequencies, count), tail_values, tail)
    # Chunks keep the index arrays small whatever the payload makes escape.
    filled = 0
    for first in range(0, size, _CHUNK):
        where = np.flatnonzero(escaped[first : first + _CHUNK])
        out[first : first + _CHUNK][where] = tail[filled : filled + where.size]
        filled += where.size
