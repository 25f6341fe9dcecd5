"""Coding one layer once its (predictor, quantizer) pair is chosen.

The full residual is quantized (or, with ``low_rank``, factored), its symbols
counted and packed for the coder, and its reconstruction written exactly as the
decoder will compute it; a choice the decoder's bound would refuse is declined.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .bitstream import FactorTable, LayerRecord, low_rank_record_size
from .coder import Stream, table_streams
from .config import CodecConfig
from .entropy import (
    IntArray,
    SymbolArray,
    entropy_bits,
    group_counts,
    group_symbols,
    pad_symbol,
    quantize_frequencies,
)
from .layers import FloatArray
from .lowrank import code_factors, matrix_shape, max_rank, product_bound, reconstruct_into
from .predictors import Predictor
from .quantizers import (
    MAX_SYMBOL,
    Quantizer,
    add_prediction,
    dequantize_into,
    quantize_stochastic,
    quantize_ternary,
    quantize_uniform,
)
from .ratedistortion import Choice, residual

BOUND = 3.0e38
"""Largest magnitude the encoder lets a reconstruction reach, estimated in ``float64``.

``float32``'s largest value is about 3.4e38: the 13 % margin covers the
rounding of the ``float32`` operations the estimate leaves out, which grows
like ``(1 + 2**-24)**(k + 3)`` for a rank-``k`` layer, so the decoder's exact
bound (:mod:`phalanx.codec.bounds`) accepts every payload the encoder writes.
"""


@dataclass(frozen=True)
class CodedLayer:
    """One layer, coded: its bitstream record, its coder streams and what they cost."""

    record: LayerRecord
    streams: tuple[tuple[Stream, ...], ...]
    """Per coded table, its streams for the ANS coder."""
    counts: tuple[IntArray, ...]
    multiplier: float
    estimated_rate: float
    estimated_distortion: float


def sum_of_squares(values: FloatArray) -> float:
    """Return ``sum(values**2)``, accumulated in ``float64``."""
    # einsum's own loop in float64: no temporary, no BLAS (so no thread-count dependence).
    return float(np.einsum("i,i->", values, values, dtype=np.float64))


def censored(predictor: Predictor, gain: np.float32, size: int, distortion: float) -> CodedLayer:
    """Return a layer sent as its prediction alone (a tag byte, and the gain if any)."""
    tag_bits = 8.0 + (32.0 if predictor is not Predictor.ZERO and gain != 1.0 else 0.0)
    return CodedLayer(
        LayerRecord(predictor, Quantizer.CENSORED, float(gain)),
        (),
        (),
        0.0,
        tag_bits / max(size, 1),
        distortion,
    )


def reconstruction_bound(
    gain: float, prediction_peak: float, step: float, sym_min: int, sym_max: int
) -> float:
    """Largest magnitude ``symbol * step + gain * prediction`` can reach (triangle inequality)."""
    return abs(gain) * prediction_peak + step * max(abs(sym_min), abs(sym_max))


def distortion_reference(
    update: FloatArray, config: CodecConfig, totals: tuple[float, int]
) -> float:
    """Return the energy a layer's squared error is divided by in its term of ``J``."""
    # Under "layer" distortion the layer is scored as if the whole update had its mean
    # square, so its relative error weighs by its share of the parameters.
    if config.rd_distortion == "update":
        return totals[0]
    return sum_of_squares(update) * totals[1] / update.size


def quantize_layer(
    update: FloatArray,
    prediction: FloatArray | None,
    prediction_peak: float,
    choice: Choice,
    draws: Callable[[], FloatArray],
    out: FloatArray,
    unbiased: bool = False,
    mirrored: bool = False,
) -> CodedLayer | None:
    """Quantize the whole layer's residual and reconstruct it into ``out``.

    ``unbiased`` rounds the uniform quantizer stochastically and sets the
    ternary scale to the whole residual's peak (the search only saw a sample).
    ``draws`` gives the layer's rounding draws, called only if some rounding
    is stochastic; ``mirrored`` goes to :func:`quantize_ternary`.
    ``None`` when this prediction cannot be used safely: its residual overflows
    ``float32`` or the decoder's reconstruction bound would refuse it.
    """
    full = update if prediction is None else residual(update, prediction, choice.gain)
    low, high = (float(full.min()), float(full.max())) if full.size else (0.0, 0.0)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    step = choice.scale
    if choice.quantizer is Quantizer.UNIFORM:
        peak = max(-low, high)
        if peak / float(step) > MAX_SYMBOL - 1:
            step = np.float32(peak / (MAX_SYMBOL - 1))
            while peak / float(step) > MAX_SYMBOL - 1:
                step = np.nextafter(step, np.float32(np.inf))
        # x / step is monotone in x, so the extremes map to the extreme symbols
        # (stochastic rounding: at most one above floor(x / step)).
        low_ratio = np.divide(np.float32(low), step, dtype=np.float32)
        high_ratio = np.divide(np.float32(high), step, dtype=np.float32)
        if unbiased:
            sym_min, sym_max = int(np.floor(low_ratio)), int(np.ceil(high_ratio))
        else:
            sym_min, sym_max = int(np.rint(low_ratio)), int(np.rint(high_ratio))
        bound = reconstruction_bound(
            float(choice.gain), prediction_peak, float(step), sym_min, sym_max
        )
        if bound > BOUND:
            return None
        if unbiased:
            symbols = quantize_stochastic(full, step, draws())
            # The draws may miss an extreme symbol: code the alphabet actually used.
            sym_min, sym_max = int(symbols.min()), int(symbols.max())
        else:
            symbols = quantize_uniform(full, step, out=None if full is update else full)
        packed, counts = _pack(symbols, sym_min, sym_max - sym_min + 1)
    else:
        if unbiased:
            step = np.float32(max(-low, high))  # the whole layer's peak: nothing clipped
        if reconstruction_bound(float(choice.gain), prediction_peak, float(step), -1, 1) > BOUND:
            return None
        symbols = quantize_ternary(full, step, draws(), mirrored=mirrored)
        packed, counts = _pack(symbols, -1, 3)
        occupied = np.flatnonzero(counts)
        first, last = int(occupied[0]), int(occupied[-1])
        if (first, last) != (0, 2):
            # A sign (or zero) never occurs: code the narrower alphabet.
            packed, counts = _pack(symbols, first - 1, last - first + 1)
        sym_min = first - 1
    frequencies = quantize_frequencies(counts)
    streams = _streams((symbols, sym_min, frequencies, packed))
    dequantize_into(symbols, step, out)
    add_prediction(out, prediction, choice.gain, scratch=symbols)
    record = LayerRecord(
        choice.predictor, choice.quantizer, float(choice.gain), float(step), sym_min, frequencies
    )
    return CodedLayer(
        record,
        streams,
        (counts,),
        choice.multiplier * float(step) / float(choice.scale),
        choice.rate,
        choice.distortion,
    )


def _streams(
    *tables: tuple[FloatArray, int, IntArray, SymbolArray | None],
) -> tuple[tuple[Stream, ...], ...]:
    """Collect the coder's streams of a layer's tables; a one-symbol table has none."""
    return tuple(table_streams(s, low, f, p) for s, low, f, p in tables if p is not None)


def code_low_rank(
    update: FloatArray,
    shape: tuple[int, ...],
    prediction: FloatArray | None,
    prediction_peak: float,
    choice: Choice,
    config: CodecConfig,
    totals: tuple[float, int],
    out: FloatArray,
) -> CodedLayer | None:
    """Send a 2-D layer's residual as two quantized factors, if that beats ``choice`` on ``J``.

    Factors the residual against ``choice``'s prediction and gain at
    ``config.low_rank`` (or the layer's largest rank) and scores the result
    exactly on the whole layer, with the same normalisation as
    :func:`~phalanx.codec.ratedistortion.choose`. Writes the reconstruction
    into ``out`` only when it wins. ``None``: not a matrix, nothing to factor,
    beyond the decoder's bound, or more costly.
    """
    matrix = matrix_shape(shape)
    if matrix is None:
        return None
    rows, cols = matrix
    full = update if prediction is None else residual(update, prediction, choice.gain)
    factors = code_factors(
        full.reshape(rows, cols), min(config.low_rank, max_rank(rows, cols)), config.low_rank_step
    )
    if factors is None:
        return None
    left, right = factors
    rank = left.symbols.shape[0]
    tables, coder_tables, counts = [], [], []
    for factor in factors:
        symbols = factor.symbols.ravel()
        low, high = int(symbols.min()), int(symbols.max())
        p, c = _pack(symbols, low, high - low + 1)
        tables.append(FactorTable(float(factor.step), low, quantize_frequencies(c)))
        coder_tables.append((symbols, low, tables[-1].frequencies, p))
        counts.append(c)
    # The decoder's own check, from the same tables.
    bound = product_bound(_table_peak(tables[0]), _table_peak(tables[1]), rank)
    if bound + abs(float(choice.gain)) * prediction_peak > BOUND:
        return None
    candidate = np.empty_like(update)
    reconstruct_into(left.values, right.values, candidate)
    add_prediction(candidate, prediction, choice.gain)
    error = np.subtract(update, candidate, dtype=np.float32)
    sse = sum_of_squares(error)
    has_gain = choice.predictor is not Predictor.ZERO and choice.gain != np.float32(1.0)
    bits = math.fsum(entropy_bits(c) for c in counts) + 8.0 * low_rank_record_size(
        rank, has_gain, tables
    )
    cost = sse / distortion_reference(update, config, totals) + config.rd_lambda * bits / totals[1]
    if not cost < choice.cost:
        return None
    out[:] = candidate
    record = LayerRecord(
        choice.predictor,
        Quantizer.LOWRANK,
        float(choice.gain),
        rank=rank,
        factors=tuple(tables),
    )
    energy = sum_of_squares(update)
    return CodedLayer(
        record,
        _streams(*coder_tables),
        tuple(counts),
        config.low_rank_step,
        bits / update.size,
        sse / energy if energy > 0 else 0.0,
    )


def _pack(symbols: FloatArray, sym_min: int, alphabet: int) -> tuple[SymbolArray | None, IntArray]:
    """Pack a layer's symbols for the coder and count each symbol.

    Returns ``(None, [n])`` for a one-symbol alphabet, which costs no bits.
    """
    if alphabet == 1:
        return None, np.array([symbols.size], dtype=np.int64)
    packed = group_symbols(symbols, sym_min, alphabet)
    return packed, group_counts(packed, alphabet, symbols.size, pad_symbol(sym_min, alphabet))


def _table_peak(table: FactorTable) -> float:
    """Largest magnitude a factor table's symbols stand for."""
    return table.step * max(abs(table.sym_min), abs(table.sym_max))
