"""Encode an update into a payload and decode it back, bit-identically on both sides.

Per layer the encoder (1) censors the layer if a prediction already explains
it, else (2) picks the (predictor, quantizer) pair by rate-distortion cost,
(3) quantizes the full residual, (4) counts its symbols for the layer's
frequency table; then it entropy-codes all layers into one ANS stream
(:mod:`phalanx.codec.coder`) and writes the bitstream. With ``low_rank`` on,
a 2-D layer's residual is also factored (:mod:`phalanx.codec.lowrank`) and
sent as two quantized factors when that costs less.

Encoder and decoder compute the reconstruction with the same ``float32``
operations in the same order from the same inputs (symbols, step, gain,
prediction), so the coordinator's decoded update equals the worker's own
reconstruction bit for bit, and honest
workers that compute the same update with the same history, config and seed
context produce the same payload bytes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

from .bitstream import (
    FactorTable,
    Header,
    LayerEntry,
    LayerRecord,
    LayerTable,
    TableEntry,
    low_rank_record_size,
    read_layer_table,
    write_bitstream,
)
from .bounds import low_rank_peak, reconstruction_peak, table_peak
from .coder import Stream, SymbolDecoder, encode_symbols, table_streams
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
from .errors import CodecError
from .layers import FloatArray, LayerLayout, LayerSpec, flatten_update, layer_layout, split_flat
from .lowrank import (
    BLOCK,
    FactorSlots,
    code_factors,
    matrix_shape,
    max_rank,
    product_bound,
    reconstruct_into,
)
from .predictors import DeltaHistory, Predictor
from .quantizers import (
    MAX_SYMBOL,
    Quantizer,
    add_prediction,
    dequantize_into,
    quantize_stochastic,
    quantize_ternary,
    quantize_uniform,
    rounding_draws,
)
from .ratedistortion import (
    Choice,
    candidates,
    choose,
    residual,
    sample_indices,
    sample_size,
)

SeedContext: TypeAlias = tuple[int, int, int]
"""``(run_seed, round, file)``: seeds the ternary quantizer's random stream."""

BROADCAST_FILE = (1 << 32) - 1
"""The ``file`` of a downlink broadcast's seed context."""

HISTORY_FINGERPRINT_BYTES = 8

BOUND = 3.0e38
"""Largest magnitude the encoder lets a reconstruction reach, estimated in ``float64``.

``float32``'s largest value is about 3.4e38: the 13 % margin covers the
rounding of the ``float32`` operations the estimate leaves out, which grows
like ``(1 + 2**-24)**(k + 3)`` for a rank-``k`` layer, so the decoder's exact
bound (:mod:`phalanx.codec.bounds`) accepts every payload the encoder writes.
"""

MAX_MAGNITUDE = 1.0e36
"""Largest magnitude of an update the encoder accepts; keeps every step and sum finite."""


@dataclass(frozen=True)
class LayerStats:
    """What the encoder chose for one layer and what it cost.

    Parameters
    ----------
    name : str
    size : int
        Parameters in the layer.
    predictor : Predictor
    quantizer : Quantizer
    gain : float
        Prediction gain.
    step : float
        Uniform step or ternary scale (0 when censored).
    multiplier : float
        ``step`` in multiples of the sampled residual's RMS.
    alphabet : int
        Symbols in the layer's table (0 when censored; a low-rank layer's two
        factor tables together).
    estimated_rate : float
        Bits per parameter the search expected, side information included.
    estimated_distortion : float
        Relative distortion the search expected.
    entropy_bits : float
        Empirical entropy of the layer's actual symbols, times their count.
    coded_bits : int
        Bits the ANS coder spent on the layer's symbols.
    rank : int
        Components of a low-rank layer (0 for the other quantizers).
    """

    name: str
    size: int
    predictor: Predictor
    quantizer: Quantizer
    gain: float
    step: float
    multiplier: float
    alphabet: int
    estimated_rate: float
    estimated_distortion: float
    entropy_bits: float
    coded_bits: int
    rank: int = 0


@dataclass(frozen=True)
class CodecStats:
    """Every byte of one payload, accounted for.

    Parameters
    ----------
    layers : tuple of LayerStats
    parameters : int
        Parameters in the model.
    total_bytes : int
        ``len(payload)``: header, layer table and coded symbols.
    side_bytes : int
        Header and layer table (shapes, choices, frequency tables, word count).
    coded_bytes : int
        The ANS words.
    entropy_bits : float
        Sum over layers of the symbols' empirical entropy.
    coded_bits : int
        Bits the ANS coder used (before padding to whole words).
    """

    layers: tuple[LayerStats, ...]
    parameters: int
    total_bytes: int
    side_bytes: int
    coded_bytes: int
    entropy_bits: float
    coded_bits: int

    @property
    def input_bytes(self) -> int:
        """Size of the update as raw ``float32``."""
        return 4 * self.parameters

    @property
    def compression_ratio(self) -> float:
        """``input_bytes / total_bytes``."""
        return self.input_bytes / self.total_bytes

    @property
    def bits_per_parameter(self) -> float:
        """``8 * total_bytes / parameters``."""
        return 8.0 * self.total_bytes / max(self.parameters, 1)

    @property
    def coder_overhead(self) -> float:
        """``coded_bits / entropy_bits - 1``: the coder's excess over the empirical entropy."""
        return self.coded_bits / self.entropy_bits - 1.0 if self.entropy_bits > 0 else 0.0

    @property
    def total_overhead(self) -> float:
        """``8 * total_bytes / entropy_bits - 1``: excess with every header byte counted."""
        return 8.0 * self.total_bytes / self.entropy_bits - 1.0 if self.entropy_bits > 0 else 0.0


@dataclass(frozen=True)
class EncodedUpdate:
    """A payload and the update the receiver will decode from it.

    Parameters
    ----------
    payload : bytes
        The bitstream to send.
    flat : numpy.ndarray
        The reconstruction as one read-only ``float32`` vector; the decoder
        returns exactly these bits.
    reconstruction : list of numpy.ndarray
        Per-layer views of ``flat``, in the model's shapes.
    stats : CodecStats
        Choices and byte counts.
    """

    payload: bytes
    flat: FloatArray
    reconstruction: list[FloatArray]
    stats: CodecStats


@dataclass(frozen=True)
class _Coded:
    record: LayerRecord
    streams: tuple[tuple[Stream, ...], ...]
    """Per coded table, its streams for the ANS coder."""
    counts: tuple[IntArray, ...]
    multiplier: float
    estimated_rate: float
    estimated_distortion: float


def _check_seed_context(seed_context: Any) -> SeedContext:
    try:
        run_seed, round_, file = (int(v) for v in seed_context)
    except (TypeError, ValueError) as exc:
        raise ValueError("seed_context must be (run_seed, round, file)") from exc
    if min(run_seed, round_, file) < 0:
        raise ValueError(f"seed_context entries must be >= 0, got {tuple(seed_context)}")
    return run_seed, round_, file


def _check_history(history: DeltaHistory, layout: LayerLayout, config: CodecConfig) -> None:
    if history.layout.fingerprint != layout.fingerprint:
        raise ValueError("history was built for a different model than layers_spec")
    if history.depth != config.history_length or history.momentum != config.momentum:
        raise ValueError(
            "history settings differ from the config: build it with "
            "DeltaHistory.from_config(layers_spec, config)"
        )


def _energy(values: FloatArray) -> float:
    # einsum's own loop in float64: no temporary, no BLAS (so no thread-count dependence).
    return float(np.einsum("i,i->", values, values, dtype=np.float64))


def _censored(predictor: Predictor, gain: np.float32, size: int, distortion: float) -> _Coded:
    tag_bits = 8.0 + (32.0 if predictor is not Predictor.ZERO and gain != 1.0 else 0.0)
    return _Coded(
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


def _predictions(
    history: DeltaHistory, config: CodecConfig, layer: int
) -> dict[Predictor, FloatArray | None]:
    """Collect the layer's candidate predictions (the zero predictor while nothing else is)."""
    predictions: dict[Predictor, FloatArray | None] = {}
    if Predictor.ZERO in config.predictors:
        predictions[Predictor.ZERO] = None
    for predictor in config.predictors:
        if predictor is not Predictor.ZERO:
            prediction = history.layer_prediction(predictor, layer)
            if prediction is not None:
                predictions[predictor] = prediction
    return predictions or {Predictor.ZERO: None}


def _reference(update: FloatArray, config: CodecConfig, totals: tuple[float, int]) -> float:
    """Return the energy a layer's squared error is divided by in its term of ``J``."""
    # Under "layer" distortion the layer is scored as if the whole update had its mean
    # square, so its relative error weighs by its share of the parameters.
    if config.rd_distortion == "update":
        return totals[0]
    return _energy(update) * totals[1] / update.size


def _search(
    update: FloatArray,
    predictions: dict[Predictor, FloatArray | None],
    config: CodecConfig,
    totals: tuple[float, int],
    out: FloatArray,
) -> Choice | _Coded:
    """Censor the layer (writing ``out``) or choose its (predictor, quantizer) pair."""
    size = update.size
    limit = config.censor_threshold**2
    index = sample_indices(size, sample_size(size, config.rd_sample_size))
    reference = _reference(update, config, totals)
    while True:
        sample = update if index is None else update[index]
        energy = _energy(sample)
        found = candidates(
            sample,
            [(p, q if q is None or index is None else q[index]) for p, q in predictions.items()],
            fit_gains=config.fit_gain,
        )
        energies = found.energies()
        best = int(np.argmin(np.where(np.isfinite(energies), energies, np.inf)))
        predictor, gain = found.predictors[best], found.gains[best]
        # Censoring: the best prediction explains the layer to within the threshold
        # (checked on the sample, confirmed on the whole layer).
        if energies[best] <= limit * energy:
            missed = _energy(residual(update, predictions[predictor], gain))
            total = _energy(update)
            if missed <= limit * total:
                out.fill(0.0)
                add_prediction(out, predictions[predictor], gain)
                return _censored(predictor, gain, size, missed / total if total else 0.0)
        if energy > 0.0:
            choice = choose(
                found,
                layer_size=size,
                sample_energy=energy,
                update_energy=reference,
                parameters=totals[1],
                step_sizes=config.step_sizes,
                ternary=config.ternary,
                rd_lambda=config.rd_lambda,
                unbiased=config.unbiased,
            )
            if choice is not None:
                return choice
        if index is None:
            # Nothing to quantize at float32 resolution (residuals all zero or so tiny
            # that no step is representable): send the best prediction alone.
            out.fill(0.0)
            add_prediction(out, predictions[predictor], gain)
            return _censored(predictor, gain, size, 1.0)
        index = None  # the sample missed everything nonzero: search the whole layer


def _quantize(
    update: FloatArray,
    prediction: FloatArray | None,
    prediction_peak: float,
    choice: Choice,
    draws: Callable[[], FloatArray],
    out: FloatArray,
    unbiased: bool = False,
    mirrored: bool = False,
) -> _Coded | None:
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
    return _Coded(
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


def _low_rank(
    update: FloatArray,
    shape: tuple[int, ...],
    prediction: FloatArray | None,
    prediction_peak: float,
    choice: Choice,
    config: CodecConfig,
    totals: tuple[float, int],
    out: FloatArray,
) -> _Coded | None:
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
    sse = _energy(error)
    has_gain = choice.predictor is not Predictor.ZERO and choice.gain != np.float32(1.0)
    bits = math.fsum(entropy_bits(c) for c in counts) + 8.0 * low_rank_record_size(
        rank, has_gain, tables
    )
    cost = sse / _reference(update, config, totals) + config.rd_lambda * bits / totals[1]
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
    energy = _energy(update)
    return _Coded(
        record,
        _streams(*coder_tables),
        tuple(counts),
        config.low_rank_step,
        bits / update.size,
        sse / energy if energy > 0 else 0.0,
    )


def _encode_layer(
    update: FloatArray,
    layer: int,
    shape: tuple[int, ...],
    history: DeltaHistory,
    config: CodecConfig,
    seed_context: SeedContext,
    out: FloatArray,
    totals: tuple[float, int],
) -> _Coded:
    """Choose, quantize and reconstruct one layer; ``out`` receives the reconstruction."""
    if update.size == 0:
        return _censored(Predictor.ZERO, np.float32(1.0), 0, 0.0)
    predictions = _predictions(history, config, layer)
    # Extreme predictions may overflow float32 while candidates are scored; such
    # candidates get an infinite cost, and _quantize refuses them.
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(2):
            found = _search(update, predictions, config, totals, out)
            if isinstance(found, _Coded):
                return found
            prediction = predictions[found.predictor]
            peak = history.peak(found.predictor, layer) if prediction is not None else 0.0
            if config.low_rank:
                low = _low_rank(update, shape, prediction, peak, found, config, totals, out)
                if low is not None:
                    return low
            correlated = config.rounding == "correlated"
            draws = functools.partial(
                rounding_draws, seed_context, layer, update.size, correlated=correlated
            )
            coded = _quantize(
                update, prediction, peak, found, draws, out, config.unbiased, correlated
            )
            if coded is not None:
                return coded
            # Fall back to no prediction: always safe, because encode_update bounds
            # the update's magnitude.
            predictions = {Predictor.ZERO: None}
    raise AssertionError("the zero predictor cannot fail on a bounded update")


def _pack(symbols: FloatArray, sym_min: int, alphabet: int) -> tuple[SymbolArray | None, IntArray]:
    """Pack a layer's symbols for the coder and count each symbol.

    Returns ``(None, [n])`` for a one-symbol alphabet, which costs no bits.
    """
    if alphabet == 1:
        return None, np.array([symbols.size], dtype=np.int64)
    packed = group_symbols(symbols, sym_min, alphabet)
    return packed, group_counts(packed, alphabet, symbols.size, pad_symbol(sym_min, alphabet))


def encode_update(
    update: Any,
    *,
    layers_spec: LayerSpec | LayerLayout,
    history: DeltaHistory,
    config: CodecConfig,
    seed_context: SeedContext,
) -> EncodedUpdate:
    """Compress an update against the shared history.

    Parameters
    ----------
    update : array_like or sequence of array_like
        Flat ``float32`` vector, or one array (or CPU tensor) per layer.
        Must be finite.
    layers_spec : sequence of (str, sequence of int), or LayerLayout
        The model's layers.
    history : DeltaHistory
        The global-delta history, as every party holds it this round.
    config : CodecConfig
        Encoder settings; the decoder needs an equal one.
    seed_context : tuple of int
        ``(run_seed, round, file)``, seeds ternary rounding; use
        :data:`BROADCAST_FILE` as ``file`` for a downlink broadcast.

    Returns
    -------
    EncodedUpdate
        The payload, the reconstruction the receiver will decode, and stats.

    Raises
    ------
    ValueError
        For a non-finite update, a mismatched history or a bad seed context.
    """
    layout = layer_layout(layers_spec)
    _check_history(history, layout, config)
    seeds = _check_seed_context(seed_context)
    flat = flatten_update(update, layout)
    low, high = (float(flat.min()), float(flat.max())) if flat.size else (0.0, 0.0)
    if not (math.isfinite(low) and math.isfinite(high)):  # min and max propagate NaN
        bad = next(
            name
            for i, name in enumerate(layout.names)
            if not np.isfinite(flat[layout.slice(i)]).all()
        )
        raise ValueError(f"update is not finite (layer {bad!r}); refusing to encode")
    if max(-low, high) > MAX_MAGNITUDE:
        raise ValueError(f"update magnitude exceeds what the codec represents ({MAX_MAGNITUDE:g})")

    reconstruction = np.empty(layout.total, dtype=np.float32)
    # float32 accumulation is plenty to normalise lambda; float64 if squares overflow.
    energy = float(np.einsum("i,i->", flat, flat))
    if not (math.isfinite(energy) and energy > 0.0):  # overflow or underflow in float32
        energy = _energy(flat)
    totals = (energy, layout.total)
    coded = [
        _encode_layer(
            flat[layout.slice(i)],
            i,
            layout.shapes[i],
            history,
            config,
            seeds,
            reconstruction[layout.slice(i)],
            totals,
        )
        for i in range(len(layout))
    ]
    words, stream_bits = encode_symbols([s for c in coded for s in c.streams])
    header = Header(layout.fingerprint, history.fingerprint[:HISTORY_FINGERPRINT_BYTES])
    payload, side_bytes = write_bitstream(header, [c.record for c in coded], layout, words)

    bits_iter = iter(stream_bits)
    layer_stats = tuple(
        LayerStats(
            name=name,
            size=size,
            predictor=c.record.predictor,
            quantizer=c.record.quantizer,
            gain=c.record.gain,
            step=c.record.factors[0].step if c.record.factors else c.record.step,
            multiplier=c.multiplier,
            alphabet=c.record.alphabet + sum(t.alphabet for t in c.record.factors),
            estimated_rate=c.estimated_rate,
            estimated_distortion=c.estimated_distortion,
            entropy_bits=math.fsum(entropy_bits(n) for n in c.counts),
            coded_bits=sum(next(bits_iter) for _ in c.streams),
            rank=c.record.rank,
        )
        for name, size, c in zip(layout.names, layout.sizes, coded, strict=True)
    )
    stats = CodecStats(
        layers=layer_stats,
        parameters=layout.total,
        total_bytes=len(payload),
        side_bytes=side_bytes,
        coded_bytes=4 * len(words),
        entropy_bits=math.fsum(s.entropy_bits for s in layer_stats),
        coded_bits=sum(stream_bits),
    )
    reconstruction.flags.writeable = False
    return EncodedUpdate(payload, reconstruction, split_flat(reconstruction, layout), stats)


def _allowed(record: LayerEntry, config: CodecConfig, name: str) -> None:
    if record.predictor is not Predictor.ZERO and record.predictor not in config.predictors:
        raise CodecError(f"layer {name!r} uses predictor {record.predictor.name}, not enabled")
    if record.quantizer is Quantizer.UNIFORM and not config.step_sizes:
        raise CodecError(f"layer {name!r} uses the uniform quantizer, not enabled")
    if record.quantizer is Quantizer.TERNARY and not config.ternary:
        raise CodecError(f"layer {name!r} uses the ternary quantizer, not enabled")
    if record.gain != 1.0 and not config.fit_gain:
        raise CodecError(f"layer {name!r} has a prediction gain, but fit_gain is off")
    if record.quantizer is Quantizer.LOWRANK and record.rank > config.low_rank:
        raise CodecError(
            f"layer {name!r} is low-rank at rank {record.rank}; the config allows "
            + (f"at most {config.low_rank}" if config.low_rank else "none (low_rank = 0)")
        )


def decode_update_flat(
    payload: bytes,
    *,
    layers_spec: LayerSpec | LayerLayout,
    history: DeltaHistory,
    config: CodecConfig,
) -> FloatArray:
    """Decode a payload into one flat ``float32`` vector.

    Parameters
    ----------
    payload : bytes
        From :func:`encode_update`, or from anyone.
    layers_spec : sequence of (str, sequence of int), or LayerLayout
        The model the payload must describe.
    history : DeltaHistory
        This party's history; must match the encoder's (checked).
    config : CodecConfig
        Equal to the encoder's.

    Returns
    -------
    numpy.ndarray
        Shape ``(total,)``, finite, bit-identical to the encoder's
        :attr:`EncodedUpdate.flat`.

    Raises
    ------
    CodecError
        For anything wrong with the payload, and, before any symbol is
        decoded or the output allocated, for a layer whose reconstruction
        could leave ``float32``'s range (an exact bound from its layer-table
        row and this history's predictions: :mod:`phalanx.codec.bounds`).
    ValueError
        If ``history`` was built for another model or with other settings
        than ``config`` (a caller's mistake, not the payload's).

    Notes
    -----
    Memory, whatever the payload declares: the output (``4 * total`` bytes),
    one copy of the words (the coder's; a misaligned view is copied for it
    first, before the output exists), and at most :data:`DECODE_WORKSPACE`
    bytes, plus ``4 * rank**2`` for a low-rank layer's corner
    (:class:`~phalanx.codec.lowrank.FactorSlots`).
    """
    layout = layer_layout(layers_spec)
    _check_history(history, layout, config)
    table = read_layer_table(payload, layout)
    if table.header.history_fingerprint != history.fingerprint[:HISTORY_FINGERPRINT_BYTES]:
        raise CodecError(
            "payload was encoded against another history (a missed or extra broadcast?)"
        )
    for layer, (name, entry) in enumerate(zip(layout.names, table.layers, strict=True)):
        _allowed(entry, config, name)
        if not math.isfinite(_peak(entry, history.peak(entry.predictor, layer))):
            raise CodecError(f"layer {name!r} would reconstruct to values beyond float32 range")

    decoder = SymbolDecoder(table.words)
    out = np.empty(layout.total, dtype=np.float32)
    for layer, (name, shape, entry) in enumerate(
        zip(layout.names, layout.shapes, table.layers, strict=True)
    ):
        target = out[layout.slice(layer)]
        if entry.quantizer is Quantizer.CENSORED:
            target.fill(0.0)
        elif entry.quantizer is Quantizer.LOWRANK:
            rows, cols = shape
            slots = FactorSlots(target, rows, cols, entry.rank)
            left, right = entry.tables
            _decode_table(decoder, table, left, f"{name} (left factor)", slots.left())
            _decode_table(decoder, table, right, f"{name} (right factor)", [slots.right])
            slots.rebuild()
        else:
            _decode_table(decoder, table, entry.tables[0], name, [target])
        _add_prediction(target, history.layer_prediction(entry.predictor, layer), entry.gain)
    decoder.finish()
    return out


DECODE_WORKSPACE = 3 << 20
"""Bytes the decoder allocates at most beyond its output and the words (and a low-rank corner).

At worst one table of the largest alphabet
(:data:`~phalanx.codec.entropy.MAX_ALPHABET`) is live, split: its frequencies,
values, split halves and model, about 36 bytes per symbol (2.3 MiB); the
window and block buffers (:data:`~phalanx.codec.coder.WINDOW`,
:data:`~phalanx.codec.lowrank.BLOCK`) add under 1 MiB, not all at that
moment. The costliest payloads found reach 2.2 MiB (the codec's tests check
the bound on each).
"""


def _add_prediction(target: FloatArray, prediction: FloatArray | None, gain: float) -> None:
    """Add ``gain * prediction`` as the encoder does, a block at a time when a gain needs one."""
    factor = np.float32(gain)
    if prediction is None or factor == np.float32(1.0):
        add_prediction(target, prediction, factor)  # nothing, or one addition in place
        return
    scratch = np.empty(min(BLOCK, target.size), dtype=np.float32)
    for first in range(0, target.size, BLOCK):
        part = target[first : first + BLOCK]
        add_prediction(part, prediction[first : first + BLOCK], factor, scratch[: part.size])


def _peak(entry: LayerEntry, prediction_peak: float) -> float:
    """Bound the magnitude of the layer's reconstruction, exactly (:mod:`.bounds`)."""
    peaks = [table_peak(t.step, t.sym_min, t.alphabet) for t in entry.tables]
    if entry.quantizer is Quantizer.LOWRANK:
        residual = low_rank_peak(peaks[0], peaks[1], entry.rank)
    else:
        residual = peaks[0] if peaks else 0.0
    return reconstruction_peak(residual, entry.gain, prediction_peak)


def _table_peak(table: FactorTable) -> float:
    """Largest magnitude a factor table's symbols stand for."""
    return table.step * max(abs(table.sym_min), abs(table.sym_max))


def _decode_table(
    decoder: SymbolDecoder,
    table: LayerTable,
    entry: TableEntry,
    name: str,
    destination: list[FloatArray],
) -> None:
    """Decode one table's values into ``destination`` (one-symbol tables take no bits)."""
    values = np.arange(entry.alphabet, dtype=np.float32)
    np.add(values, np.float32(entry.sym_min), out=values)
    np.multiply(values, np.float32(entry.step), out=values)
    if entry.alphabet == 1:
        for part in destination:
            part.fill(values[0])
    else:
        decoder.table(table.frequencies(entry, name), values, destination)


def decode_update(
    payload: bytes,
    *,
    layers_spec: LayerSpec | LayerLayout,
    history: DeltaHistory,
    config: CodecConfig,
) -> list[FloatArray]:
    """Decode a payload into per-layer arrays (views of one flat vector).

    Same parameters, guarantees and errors as :func:`decode_update_flat`.
    """
    layout = layer_layout(layers_spec)
    flat = decode_update_flat(payload, layers_spec=layout, history=history, config=config)
    return split_flat(flat, layout)
