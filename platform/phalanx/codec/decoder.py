"""Decode a payload from anyone: untrusted input, checked before it costs anything.

Every field is checked against the expected model, this party's history and the
config before anything sized by the payload is allocated or any symbol decoded
(the layer table through :mod:`phalanx.codec.bitstream`, the reconstruction's
magnitude through :mod:`phalanx.codec.bounds`); whatever is wrong with a payload
raises :class:`~phalanx.codec.errors.CodecError`. The reconstruction repeats the
encoder's ``float32`` operations in the encoder's order, so it equals the
sender's own bit for bit (:mod:`phalanx.codec.encoder`).
"""

from __future__ import annotations

import math

import numpy as np

from .bitstream import (
    HISTORY_FINGERPRINT_BYTES,
    LayerEntry,
    LayerTable,
    TableEntry,
    read_layer_table,
)
from .bounds import low_rank_peak, reconstruction_peak, table_peak
from .coder import SymbolDecoder
from .config import CodecConfig
from .errors import CodecError
from .layers import FloatArray, LayerLayout, LayerSpec, layer_layout, split_flat
from .lowrank import BLOCK, FactorSlots
from .predictors import DeltaHistory, Predictor, check_history
from .quantizers import Quantizer, add_prediction


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
    check_history(history, layout, config)
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
