"""Escape coding: a table's symbols as a narrow core stream plus a tail stream.

``constriction`` decodes a categorical symbol by a binary search over the
model's cumulative table, so decoding costs about ``log2`` of the (product)
alphabet per symbol, however skewed the distribution. Quantized updates are
very skewed: most symbols sit in a few values around zero. Such a table is
coded in two streams:

- the **core** stream, one symbol per coordinate over an escape symbol and a
  window of ``w`` consecutive symbols (``w + 1`` a power of two, at most
  2048), with the escape's frequency (the sum of the others') and the
  window's; its last group is padded with escapes, which the decoder drops;
- the **tail** stream, one symbol per escape, over the symbols outside the
  window, with their own frequencies.

``P(s) = P(escape) * P(s | escape)`` outside the window, so the two streams
code the same model as one stream would, at the same rate, but the decoder
searches ``log2(w + 1)`` levels per coordinate and the full alphabet only per
escape. Whether and how to split is a pure function of the frequency table
(:func:`plan_escape`), in integer arithmetic, so encoder and decoder agree on
every platform without sending anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from .entropy import FloatArray, IntArray, group_size

T = TypeVar("T", bound=np.generic)

GROUP_COST = 3
"""Fixed cost of one coded group, in binary-search steps (about 9 ns against 3)."""

ESCAPE_COST_PER_SYMBOL = 1
"""What splitting costs per coordinate (finding and filling the escapes)."""

ESCAPE_COST = 4096
"""What splitting costs per table (a second model and stream); keeps small tables whole."""

MAX_CORE = 2047
"""Widest core window: ``2**11 - 1`` symbols plus the escape."""


@dataclass(frozen=True)
class Escape:
    """How a table is split.

    Parameters
    ----------
    start : int
        First core symbol, as an index into the table (``0 .. A - 1``).
    width : int
        Core symbols, ``2**k - 1``; the core stream's alphabet is ``width + 1``,
        the escape first.
    """

    start: int
    width: int


def stream_cost(alphabet: int, size: int) -> int:
    """Estimated decoding cost of ``size`` symbols over ``alphabet``, in search steps.

    Groups of ``g`` symbols (:func:`~phalanx.codec.entropy.group_size`), each a
    binary search over ``alphabet**g`` entries plus a fixed cost. Zero for a
    one-symbol alphabet or no symbols.
    """
    if alphabet < 2 or size <= 0:
        return 0
    g = group_size(alphabet, size)
    return -(-size // g) * (GROUP_COST + int(alphabet**g - 1).bit_length())


def plan_escape(frequencies: IntArray, size: int) -> Escape | None:
    """Choose the core window that makes a table cheapest to decode, or ``None`` to keep it whole.

    For each width ``2**k - 1`` below the alphabet, the window is the one
    holding the most frequency (the first, on a tie); the expected escapes are
    ``size * (frequency outside) // (total frequency)``. A split is taken when
    its cost, with :data:`ESCAPE_COST_PER_SYMBOL` and :data:`ESCAPE_COST`,
    is below the whole table's. Windows that leave no frequency outside are
    not splits, and the tail always has two symbols or more: with one, the
    core stream would cost as much as the whole table.

    Parameters
    ----------
    frequencies : numpy.ndarray
        The table's integer frequencies (non-negative, positive sum).
    size : int
        Symbols in the table.

    Returns
    -------
    Escape or None
    """
    alphabet = len(frequencies)
    best_cost = stream_cost(alphabet, size)
    if alphabet < 3 or best_cost <= size * ESCAPE_COST_PER_SYMBOL + ESCAPE_COST:
        return None  # no split can pay for itself
    # Two arrays of the alphabet's size however many widths are tried: the decoder plans
    # a payload's tables, and their alphabets may be the largest there is.
    cumulative = np.zeros(alphabet + 1, dtype=np.int64)
    np.cumsum(frequencies, dtype=np.int64, out=cumulative[1:])
    total = int(cumulative[-1])
    buffer = np.empty(alphabet, dtype=np.int64)
    best = None
    width = 1
    while width < alphabet and width <= MAX_CORE:
        mass = np.subtract(
            cumulative[width:], cumulative[:-width], out=buffer[: alphabet + 1 - width]
        )
        start = int(np.argmax(mass))
        outside = total - int(mass[start])
        if outside > 0:
            cost = (
                stream_cost(width + 1, size)
                + stream_cost(alphabet - width, size * outside // total)
                + size * ESCAPE_COST_PER_SYMBOL
                + ESCAPE_COST
            )
            if cost < best_cost:
                best, best_cost = Escape(start, width), cost
        width = 2 * width + 1
    return best


def split_table(entries: npt.NDArray[T], escape: Escape) -> tuple[npt.NDArray[T], npt.NDArray[T]]:
    """Split a per-symbol table (frequencies or values): the window's entries, the rest in order."""
    end = escape.start + escape.width
    return entries[escape.start : end], np.concatenate((entries[: escape.start], entries[end:]))


def split_frequencies(frequencies: IntArray, escape: Escape) -> tuple[IntArray, IntArray]:
    """Split a frequency table: the core stream's (the escape's, then the window's), the tail's."""
    window, tail = split_table(frequencies.astype(np.int64, copy=False), escape)
    return np.concatenate(([tail.sum()], window)), tail


def split_symbols(
    symbols: FloatArray, sym_min: int, escape: Escape
) -> tuple[FloatArray, FloatArray]:
    """Split a table's symbols into core digits and tail symbols.

    Parameters
    ----------
    symbols : numpy.ndarray
        ``float32`` integers in ``sym_min .. sym_min + A - 1``.
    sym_min : int
        The table's smallest symbol.
    escape : Escape

    Returns
    -------
    core : numpy.ndarray
        ``float32``, one digit per symbol: ``1 .. width`` inside the window,
        ``0`` (the escape) outside.
    tail : numpy.ndarray
        ``float32``, the symbols outside the window in their order, as indices
        into the tail table (``0 .. A - width - 1``).
    """
    # Branch-free throughout: which symbols escape is as good as random, and
    # masked copies and boolean indexing mispredict on nearly every element.
    if escape.width == 1:  # the usual case, in two passes fewer
        centre = np.float32(sym_min + escape.start)
        outside = np.flatnonzero(symbols != centre)
        tail = symbols.take(outside)
        np.subtract(tail, np.float32(sym_min), out=tail)
        tail -= tail >= escape.start
        return (symbols == centre).astype(np.float32), tail
    width = np.float32(escape.width)
    core = np.subtract(symbols, np.float32(sym_min + escape.start - 1), dtype=np.float32)
    outside = np.flatnonzero((core < 1) | (core > width))
    tail = symbols.take(outside)
    np.subtract(tail, np.float32(sym_min), out=tail)
    tail -= width * (tail >= escape.start)
    np.clip(core, 0, width + 1, out=core)
    np.multiply(core, core <= width, out=core)
    return core, tail
