"""Encode an update into a payload that the decoder turns back into it, bit for bit.

Per layer the encoder (1) censors the layer if a prediction already explains
it, else (2) picks the (predictor, quantizer) pair by rate-distortion cost,
(3) quantizes the full residual, (4) counts its symbols for the layer's
frequency table (:mod:`phalanx.codec.layer_coding`); then it entropy-codes all
layers into one ANS stream (:mod:`phalanx.codec.coder`) and writes the
bitstream. With ``low_rank`` on, a 2-D layer's residual is also factored
(:mod:`phalanx.codec.lowrank`) and sent as two quantized factors when that
costs less.

Encoder and decoder (:mod:`phalanx.codec.decoder`) compute the reconstruction
with the same ``float32`` operations in the same order from the same inputs
(symbols, step, gain, prediction), so the coordinator's decoded update equals
the worker's own reconstruction bit for bit, and honest workers that compute
the same update with the same history, config and seed context produce the
same payload bytes.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

from .bitstream import HISTORY_FINGERPRINT_BYTES, Header, write_bitstream
from .coder import encode_symbols
from .config import CodecConfig
from .entropy import entropy_bits
from .layer_coding import (
    CodedLayer,
    censored,
    code_low_rank,
    distortion_reference,
    quantize_layer,
    sum_of_squares,
)
from .layers import FloatArray, LayerLayout, LayerSpec, flatten_update, layer_layout, split_flat
from .predictors import DeltaHistory, Predictor, check_history
from .quantizers import add_prediction, rounding_draws
from .ratedistortion import Choice, candidates, choose, residual, sample_indices, sample_size
from .stats import CodecStats, LayerStats

SeedContext: TypeAlias = tuple[int, int, int]
"""``(run_seed, round, file)``: seeds the ternary quantizer's random stream."""


BROADCAST_FILE = (1 << 32) - 1
"""The ``file`` of a downlink broadcast's seed context."""


MAX_MAGNITUDE = 1.0e36
"""Largest magnitude of an update the encoder accepts; keeps every step and sum finite."""


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


def _check_seed_context(seed_context: Any) -> SeedContext:
    try:
        run_seed, round_, file = (int(v) for v in seed_context)
    except (TypeError, ValueError) as exc:
        raise ValueError("seed_context must be (run_seed, round, file)") from exc
    if min(run_seed, round_, file) < 0:
        raise ValueError(f"seed_context entries must be >= 0, got {tuple(seed_context)}")
    return run_seed, round_, file


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


def _search(
    update: FloatArray,
    predictions: dict[Predictor, FloatArray | None],
    config: CodecConfig,
    totals: tuple[float, int],
    out: FloatArray,
) -> Choice | CodedLayer:
    """Censor the layer (writing ``out``) or choose its (predictor, quantizer) pair."""
    size = update.size
    limit = config.censor_threshold**2
    index = sample_indices(size, sample_size(size, config.rd_sample_size))
    reference = distortion_reference(update, config, totals)
    while True:
        sample = update if index is None else update[index]
        energy = sum_of_squares(sample)
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
            missed = sum_of_squares(residual(update, predictions[predictor], gain))
            total = sum_of_squares(update)
            if missed <= limit * total:
                out.fill(0.0)
                add_prediction(out, predictions[predictor], gain)
                return censored(predictor, gain, size, missed / total if total else 0.0)
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
            return censored(predictor, gain, size, 1.0)
        index = None  # the sample missed everything nonzero: search the whole layer


def _encode_layer(
    update: FloatArray,
    layer: int,
    shape: tuple[int, ...],
    history: DeltaHistory,
    config: CodecConfig,
    seed_context: SeedContext,
    out: FloatArray,
    totals: tuple[float, int],
) -> CodedLayer:
    """Choose, quantize and reconstruct one layer; ``out`` receives the reconstruction."""
    if update.size == 0:
        return censored(Predictor.ZERO, np.float32(1.0), 0, 0.0)
    predictions = _predictions(history, config, layer)
    # Extreme predictions may overflow float32 while candidates are scored; such
    # candidates get an infinite cost, and quantize_layer refuses them.
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(2):
            found = _search(update, predictions, config, totals, out)
            if isinstance(found, CodedLayer):
                return found
            prediction = predictions[found.predictor]
            peak = history.peak(found.predictor, layer) if prediction is not None else 0.0
            if config.low_rank:
                low = code_low_rank(update, shape, prediction, peak, found, config, totals, out)
                if low is not None:
                    return low
            correlated = config.rounding == "correlated"
            draws = functools.partial(
                rounding_draws, seed_context, layer, update.size, correlated=correlated
            )
            coded = quantize_layer(
                update, prediction, peak, found, draws, out, config.unbiased, correlated
            )
            if coded is not None:
                return coded
            # Fall back to no prediction: always safe, because encode_update bounds
            # the update's magnitude.
            predictions = {Predictor.ZERO: None}
    raise AssertionError("the zero predictor cannot fail on a bounded update")


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
    check_history(history, layout, config)
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
        energy = sum_of_squares(flat)
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
