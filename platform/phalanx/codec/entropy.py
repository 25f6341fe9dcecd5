"""Entropy coding of the symbols with ``constriction``'s ANS coder.

Each coded layer has its own categorical model over the alphabet
``[sym_min, sym_min + A - 1]``, built from a compact integer frequency table
that travels in the layer table as side information.

Symbols are coded ``g`` at a time, as one symbol of the product alphabet
``A**g`` under the product model (``g`` is the largest integer with
``A**g <= min(4096, n)`` for a layer of ``n``, at most 8). The product of the
marginal model is still an i.i.d. model, so the rate is the same as coding
symbol by symbol, but the coder runs ``g`` times fewer steps and the decoder
turns each group into ``g`` dequantized values with one table lookup. The last
group of a layer is padded with the symbol for 0 (or the smallest symbol if 0
is out of range).

Encoder and decoder build each model from the same integers, hence the same
model: ``Categorical(product(freqs / sum(freqs)), perfect=False)``. How the
tables of an update share one ANS stack is :mod:`phalanx.codec.coder`'s part;
how a skewed table is split into two streams, :mod:`phalanx.codec.escape`'s.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import constriction
import numpy as np
import numpy.typing as npt

FloatArray: TypeAlias = npt.NDArray[np.float32]
IntArray: TypeAlias = npt.NDArray[np.int64]
SymbolArray: TypeAlias = npt.NDArray[np.int32]
WordArray: TypeAlias = npt.NDArray[np.uint32]

FREQUENCY_BITS = 16
"""Frequency tables of layers larger than ``2**16`` are rescaled to sum to about ``2**16``."""

MAX_ALPHABET = 1 << 16
"""Largest alphabet a layer may declare."""

GROUP_ALPHABET = 4096
"""Largest product alphabet ``A**g``."""

MAX_GROUP = 8
"""Most symbols coded as one."""


def group_size(alphabet: int, size: int) -> int:
    """Return ``g``, the largest group with ``alphabet**g <= min(4096, size)``, between 1 and 8.

    Bounding the product alphabet by the layer's size keeps every table the
    decoder builds within a small multiple of the layer.
    """
    limit = min(GROUP_ALPHABET, size)
    g = 1
    while g < MAX_GROUP and alphabet ** (g + 1) <= limit:
        g += 1
    return g


def pad_symbol(sym_min: int, alphabet: int) -> int:
    """Shifted symbol that pads the last group: the one for 0 if in range, else 0."""
    return -sym_min if 0 <= -sym_min < alphabet else 0


def group_symbols(symbols: FloatArray, sym_min: int, alphabet: int) -> SymbolArray:
    """Shift symbols to ``0 .. A - 1`` and pack them ``g`` at a time.

    Parameters
    ----------
    symbols : numpy.ndarray
        ``float32`` integers in ``sym_min .. sym_min + alphabet - 1``.
    sym_min : int
        Smallest symbol.
    alphabet : int
        ``A``, at least 2.

    Returns
    -------
    numpy.ndarray
        ``int32``, ``ceil(n / g)`` product-alphabet symbols, first symbol most
        significant, the last group padded with :func:`pad_symbol`. Computed in
        ``float32`` (exact: every value stays below ``2**24``) without an
        ``n``-sized integer copy.
    """
    n = symbols.size
    g = group_size(alphabet, n)
    if g == 1:
        shifted = symbols.astype(np.int32)
        if sym_min:
            np.subtract(shifted, np.int32(sym_min), out=shifted)
        return shifted
    if alphabet == 2 and g == 8:
        # Eight binary digits, most significant first, are a byte: packbits is Horner here.
        bits = np.packbits(symbols != np.float32(sym_min)).astype(np.int32)
        rest = n % 8
        if rest and pad_symbol(sym_min, alphabet):
            bits[-1] |= (1 << (8 - rest)) - 1
        return bits
    whole = n // g
    groups = -(-n // g)
    packed = np.empty(groups, dtype=np.float32)
    head = packed[:whole]
    digits = symbols[: whole * g].reshape(whole, g)
    head[...] = digits[:, 0]
    for k in range(1, g):
        np.multiply(head, np.float32(alphabet), out=head)
        np.add(head, digits[:, k], out=head)
    # Horner over the raw symbols, then one shift: sum_k sym_min * A**k.
    np.subtract(head, np.float32(sym_min * (alphabet**g - 1) // (alphabet - 1)), out=head)
    if groups > whole:
        tail = np.full(g, pad_symbol(sym_min, alphabet), dtype=np.int64)
        tail[: n - whole * g] = symbols[whole * g :].astype(np.int64) - sym_min
        packed[whole] = float(np.polyval(tail, alphabet))
    return packed.astype(np.int32)


def group_counts(packed: SymbolArray, alphabet: int, size: int, padding: int) -> IntArray:
    """Per-symbol counts of a layer, from its packed symbols, padding excluded.

    Parameters
    ----------
    packed : numpy.ndarray
        Output of :func:`group_symbols`.
    alphabet : int
        ``A``.
    size : int
        Symbols in the layer before padding.
    padding : int
        The padding symbol.

    Returns
    -------
    numpy.ndarray
        ``int64``, length ``alphabet``.
    """
    g = group_size(alphabet, size)
    histogram = np.bincount(packed, minlength=alphabet**g).astype(np.int64, copy=False)
    if g == 1:
        return histogram
    table = histogram.reshape((alphabet,) * g)
    counts = np.zeros(alphabet, dtype=np.int64)
    for axis in range(g):
        counts += table.sum(axis=tuple(a for a in range(g) if a != axis))
    counts[padding] -= packed.size * g - size
    return counts


def quantize_frequencies(counts: IntArray) -> IntArray:
    """Compute the frequency table sent as side information.

    Counts are sent as they are when they sum to at most ``2**16``; larger
    layers get ``floor(count * 2**16 / total)``, raised to 1 for every symbol
    that occurs, so every occurring symbol stays encodable. Integer arithmetic
    only, so every party gets the same table.

    Parameters
    ----------
    counts : numpy.ndarray
        Non-negative ``int64`` symbol counts.

    Returns
    -------
    numpy.ndarray
        ``int64`` frequencies, each at most ``2**16``.
    """
    total = int(counts.sum())
    if total <= (1 << FREQUENCY_BITS):
        return counts.copy()
    scaled = (counts << FREQUENCY_BITS) // total
    scaled[(counts > 0) & (scaled == 0)] = 1
    return scaled


def entropy_bits(counts: IntArray) -> float:
    """Empirical entropy of a histogram, in bits for all its symbols together.

    ``sum_k c_k * log2(n / c_k)``: the size an ideal coder with the exact
    empirical model would reach.
    """
    nonzero = counts[counts > 0].astype(np.float64)
    total = float(nonzero.sum())
    if total == 0.0:
        return 0.0
    return float(total * np.log2(total) - (nonzero * np.log2(nonzero)).sum())


def group_model(frequencies: IntArray, size: int) -> Any:
    """``constriction`` model of one packed symbol: the product of the marginal ``g`` times."""
    alphabet = len(frequencies)
    marginal = np.divide(frequencies, float(frequencies.sum()), dtype=np.float64)  # one array
    product = marginal
    for _ in range(group_size(alphabet, size) - 1):
        product = np.outer(product, marginal).ravel()
    return constriction.stream.model.Categorical(product, perfect=False)


def group_values(values: FloatArray, size: int) -> FloatArray:
    """Table from a packed symbol to its ``g`` dequantized values.

    Parameters
    ----------
    values : numpy.ndarray
        ``float32``, the dequantized value of each of the ``A`` symbols.
    size : int
        Symbols in the layer (fixes ``g``).

    Returns
    -------
    numpy.ndarray
        Shape ``(A**g, g)``; row ``x`` holds the values of the base-``A``
        digits of ``x``, most significant first.
    """
    alphabet = values.size
    g = group_size(alphabet, size)
    table = np.empty((alphabet**g, g), dtype=np.float32)
    digits = table.reshape((alphabet,) * g + (g,))
    for k in range(g):
        # Digit k varies along axis k of the (A, ..., A) view: broadcast, no temporaries.
        digits[..., k] = values.reshape((1,) * k + (alphabet,) + (1,) * (g - 1 - k))
    return table


def unpack_values(packed: SymbolArray, values: FloatArray, out: FloatArray) -> None:
    """Write the values of packed symbols into ``out``, one table lookup per group.

    Parameters
    ----------
    packed : numpy.ndarray
        ``ceil(n / g)`` product-alphabet symbols over ``A = values.size``, each
        below ``A**g`` (the coder emits no other).
    values : numpy.ndarray
        ``float32``, the value of each of the ``A`` symbols.
    out : numpy.ndarray
        ``float32``, ``n`` values; padding past ``n`` is dropped.
    """
    table = group_values(values, out.size)
    g = table.shape[1]
    whole = out.size // g
    # "clip" skips a bounds check the coder's output makes redundant.
    np.take(table, packed[:whole], axis=0, out=out[: whole * g].reshape(whole, g), mode="clip")
    rest = out.size - whole * g
    if rest:
        out[whole * g :] = table[packed[whole], :rest]
