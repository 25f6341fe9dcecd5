"""One ANS stack for every coded table of an update.

A table (a layer's symbols, or a low-rank factor's) becomes one stream of
packed symbols, or two when :func:`~phalanx.codec.escape.plan_escape` splits
it: the core stream, then the tail stream of its escapes. Tables are encoded
last first, each table's streams in reverse, so the decoder pops them in
order; one flush ends the whole update.

The decoder (:class:`SymbolDecoder`) pops each stream a block of groups at
a time straight into the values' destination, and finds a split table's
escapes by scanning that destination for their NaN markers a window at a
time: beyond the destination, it allocates a constant (see
:class:`SymbolDecoder`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias, TypeVar

import constriction
import numpy as np

from .entropy import (
    GROUP_ALPHABET,
    FloatArray,
    IntArray,
    SymbolArray,
    WordArray,
    group_model,
    group_symbols,
    group_values,
)
from .errors import CodecError
from .escape import plan_escape, split_frequencies, split_symbols, split_table

CHUNK = 1 << 14
"""Most groups popped at a time (and values popped for a short read)."""

WINDOW = 1 << 16
"""Coordinates decoded, then scanned for escapes, at a time."""

_T = TypeVar("_T")

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


class SymbolDecoder:
    """Pops the coded tables of one update from its ANS stream, in order, straight into values.

    Parameters
    ----------
    words : numpy.ndarray
        ``uint32`` words (little-endian or native); the coder keeps its own
        copy, and a misaligned or byte-swapped view is copied once more for it.

    Notes
    -----
    Beyond its destinations and the coder's copy of the words, decoding a
    table allocates, whatever the payload declares, a window's escape marks,
    indices and tail values (:data:`WINDOW` bytes, 8 and 4 bytes per
    coordinate), a block of popped groups (:data:`CHUNK` ``int32``) and a
    few arrays the size of the table's alphabet (its model, its values, a
    split table's two halves).
    """

    def __init__(self, words: WordArray) -> None:
        native = np.require(words, dtype=np.uint32, requirements=["A", "C"])
        self._coder = _guarded(constriction.stream.stack.AnsCoder, native)

    def table(
        self, frequencies: IntArray, values: FloatArray, destination: Sequence[FloatArray]
    ) -> None:
        """Decode one table's symbols into their values.

        Parameters
        ----------
        frequencies : numpy.ndarray
            The table's frequencies: at least two entries, positive sum.
        values : numpy.ndarray
            The finite ``float32`` value of each symbol.
        destination : sequence of numpy.ndarray
            One-dimensional ``float32`` views (strided ones too) that together
            take the table's symbols in order, one value each.
        """
        size = sum(part.size for part in destination)
        escape = plan_escape(frequencies, size)
        if escape is None:
            stream = _Stream(self._coder, frequencies, values, size)
            for part in destination:
                stream.read_into(part)
            return
        core_frequencies, tail_frequencies = split_frequencies(frequencies, escape)
        window_values, tail_values = split_table(values, escape)
        # The escape decodes to NaN, which no finite symbol value is, and marks where the tail goes.
        core_values = np.concatenate(([np.float32(np.nan)], window_values))
        core = _Stream(self._coder, core_frequencies, core_values, size)
        # The tail's group size depends on its length only below GROUP_ALPHABET symbols,
        # so the escapes are counted (while in cache) only up to there.
        count = 0
        for part in destination:
            first = 0
            while first < part.size and count < GROUP_ALPHABET:
                window = part[first : first + WINDOW]
                core.read_into(window)
                count += int(np.count_nonzero(np.isnan(window)))
                first += WINDOW
            core.read_into(part[first:])
        if count == 0:
            return
        tail = _Stream(self._coder, tail_frequencies, tail_values, count)
        del tail_frequencies, tail_values  # the stream keeps its own model and values
        buffer = np.empty(min(WINDOW, size), dtype=np.float32)
        for part in destination:
            for first in range(0, part.size, WINDOW):
                window = part[first : first + WINDOW]
                where = np.flatnonzero(np.isnan(window))
                if where.size:
                    filled = buffer[: where.size]
                    tail.read_into(filled)
                    window[where] = filled

    def finish(self) -> None:
        """Check that the last table's symbols end the stream.

        Raises
        ------
        CodecError
            If words remain.
        """
        if not _guarded(self._coder.is_empty):
            raise CodecError("payload does not end where the last table's symbols end")


class _Stream:
    """The values of one coded stream, in order, popped as they are read and no further.

    Parameters
    ----------
    coder : constriction.stream.stack.AnsCoder
    frequencies : numpy.ndarray
    values : numpy.ndarray
        The value of each symbol.
    size : int
        Symbols in the stream, or any number from
        :data:`~phalanx.codec.entropy.GROUP_ALPHABET` up when it has at least
        that many: it only fixes the group size. A read pops the groups that
        hold its values and no more, so the stream's end need not be known.
    """

    def __init__(self, coder: Any, frequencies: IntArray, values: FloatArray, size: int) -> None:
        self._coder = coder
        self._model = group_model(frequencies, size)
        self._table = group_values(values, size)
        self._group = self._table.shape[1]
        self._carry = self._table[:0, 0]
        """The rest of the last group popped (past the stream's last value: its padding)."""

    def _pop(self, count: int) -> SymbolArray:
        return np.asarray(_guarded(self._coder.decode, self._model, count), dtype=np.int32)

    def read_into(self, out: FloatArray) -> None:
        """Fill ``out`` (one-dimensional, any stride) with the stream's next ``out.size`` values."""
        g, n = self._group, out.size
        done = min(self._carry.size, n)
        out[:done] = self._carry[:done]
        self._carry = self._carry[done:]
        # A strided destination is written through a temporary of the popped values.
        most = CHUNK if out.strides[0] == out.itemsize else max(CHUNK // g, 1)
        while n - done > CHUNK:  # whole groups straight into place
            count = min((n - done) // g, most)
            block = out[done : done + count * g].reshape(count, g)
            # "clip" skips a bounds check the coder's output makes redundant.
            np.take(self._table, self._pop(count), axis=0, out=block, mode="clip")
            done += count * g
        if done < n:  # at most CHUNK values: one pop, the last group's rest carried
            popped = np.take(self._table, self._pop(-(-(n - done) // g)), axis=0, mode="clip")
            rest = popped.reshape(-1)
            out[done:] = rest[: n - done]
            self._carry = rest[n - done :]


def _guarded(call: Callable[..., _T], *args: Any) -> _T:
    """Call into the coder, turning whatever it raises into a :class:`CodecError`."""
    try:
        return call(*args)
    except (KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError):
        raise
    except BaseException as exc:  # constriction raises ValueError; a Rust panic is a BaseException
        raise CodecError(f"entropy decoder rejected the payload: {exc}") from exc


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
    decoder = SymbolDecoder(words)
    for frequencies, values, out in tables:
        decoder.table(frequencies, values, [out.reshape(-1)])
    decoder.finish()
