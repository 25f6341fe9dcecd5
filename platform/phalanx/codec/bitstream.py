"""The versioned bitstream: header, layer table, payload.

All integers are little-endian; ``varint`` is unsigned LEB128 (at most 5
bytes here), ``zigzag`` maps signed to unsigned (``0, -1, 1, -2 ...``), both
in :mod:`phalanx.codec.varints`::

    header   magic "PHXC" (4) | version u8 = 3 | flags u8 = 0
             | model fingerprint (4) | history fingerprint (8) | layer count varint
    layer    ndim u8 | dims varint x ndim
             | tag u8: bits 0-1 predictor, bits 2-3 quantizer, bit 4 gain present
             | gain f32                                   if bit 4
             | table                                      unless censored
             | rank varint | table | table                low-rank
    table    step f32 | sym_min zigzag | alphabet varint
             | frequencies varint x alphabet               if alphabet >= 2
    payload  word count varint | words u32 x count, ending exactly at the end

A censored layer is its tag byte (plus a gain if it has one); a low-rank layer
has one table for each of its two factors, left (``rank x rows``) then right
(``rank x columns``), in place of the layer's own. A table whose alphabet has
one symbol has no frequencies and no coded bits. The words are one ANS stream
holding, in layer order, every table with two or more symbols, each coded in
groups of ``g`` symbols (see :mod:`phalanx.codec.entropy`) as one stream, or as
a core and a tail stream when its frequencies make that faster to decode (see
:mod:`phalanx.codec.escape`; nothing in the table says which: both sides derive
it from the frequencies).

Version 3 codes skewed tables in two streams; versions 1 and 2 (one stream per
table, version 2 with the low-rank quantizer) are no longer read. Every party
of a run runs the same code (Flower ships the app to every node), so payloads
never cross versions.

The decoder checks every field against the expected model before it allocates
anything sized by the stream (a low-rank layer's factors are never larger than
the layer: see :func:`~phalanx.codec.lowrank.max_rank`), and raises
:class:`~phalanx.codec.errors.CodecError`. :func:`read_layer_table` leaves
the frequency tables and the words in the payload, so reading the layer table
costs memory independent of the payload's size; :func:`read_bitstream` reads
everything.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .entropy import MAX_ALPHABET, IntArray, WordArray
from .errors import CodecError
from .layers import LayerLayout
from .lowrank import matrix_shape, max_rank
from .predictors import Predictor
from .quantizers import MAX_SYMBOL, Quantizer
from .varints import (
    Reader,
    encode_varint,
    encode_varints,
    unzigzag,
    zigzag,
)

MAGIC = b"PHXC"
VERSION = 3
"""The version this module writes and reads."""
HISTORY_FINGERPRINT_BYTES = 8
"""Bytes of the delta history's fingerprint that a header carries."""
MAX_FREQUENCY = (1 << 32) - 1
_PARSE = 1 << 12
"""Varints parsed at a time (their temporaries take about 40 bytes each)."""

_TAG_PREDICTOR = 0b11
_TAG_QUANTIZER_SHIFT = 2
_TAG_GAIN = 1 << 4
_TAG_RESERVED = 0b1110_0000


@dataclass(frozen=True)
class FactorTable:
    """How one low-rank factor was quantized: its step and its symbols' frequency table.

    Parameters
    ----------
    step : float
        Positive; a symbol ``s`` stands for ``s * step``.
    sym_min : int
        Smallest symbol.
    frequencies : numpy.ndarray
        ``int64`` frequency table over ``sym_min .. sym_min + A - 1``.
    """

    step: float
    sym_min: int
    frequencies: IntArray

    @property
    def alphabet(self) -> int:
        """Number of symbols ``A``."""
        return len(self.frequencies)

    @property
    def sym_max(self) -> int:
        """Largest symbol."""
        return self.sym_min + self.alphabet - 1


@dataclass(frozen=True)
class LayerRecord:
    """One row of the layer table: what was chosen for a layer and its side information.

    Parameters
    ----------
    predictor : Predictor
        Prediction the residual is taken against.
    quantizer : Quantizer
        How the residual is sent (or ``CENSORED``).
    gain : float
        Multiplies the prediction; ``1.0`` is not written.
    step : float
        Quantizer step or ternary scale (unused when censored).
    sym_min : int
        Smallest symbol.
    frequencies : numpy.ndarray
        ``int64`` frequency table over ``sym_min .. sym_min + A - 1``;
        empty when censored or low-rank.
    rank : int
        Components of a low-rank layer (0 otherwise).
    factors : tuple of FactorTable
        A low-rank layer's left and right factor tables (empty otherwise).
    """

    predictor: Predictor
    quantizer: Quantizer
    gain: float = 1.0
    step: float = 0.0
    sym_min: int = 0
    frequencies: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rank: int = 0
    factors: tuple[FactorTable, ...] = ()

    @property
    def alphabet(self) -> int:
        """Number of symbols ``A`` (0 when censored or low-rank)."""
        return len(self.frequencies)


@dataclass(frozen=True)
class Header:
    """Fixed fields at the start of every payload."""

    model_fingerprint: bytes
    history_fingerprint: bytes


@dataclass(frozen=True)
class TableEntry:
    """A table as the layer table declares it; its frequencies stay in the payload.

    Parameters
    ----------
    step : float
        Finite and positive; a symbol ``s`` stands for ``s * step``.
    sym_min : int
        Smallest symbol (the symbols are within the quantizer's range).
    alphabet : int
        Number of symbols, ``1 .. MAX_ALPHABET``.
    offset : int
        Where its ``alphabet`` frequency varints start in the payload (none
        when ``alphabet`` is 1).
    """

    step: float
    sym_min: int
    alphabet: int
    offset: int


@dataclass(frozen=True)
class LayerEntry:
    """One row of the layer table, checked against the model, frequencies not read.

    Parameters
    ----------
    predictor : Predictor
    quantizer : Quantizer
    gain : float
        Finite.
    rank : int
        Components of a low-rank layer, within the layer's largest (0 otherwise).
    tables : tuple of TableEntry
        None when censored, the layer's own, or a low-rank layer's left and
        right factor tables.
    """

    predictor: Predictor
    quantizer: Quantizer
    gain: float
    rank: int
    tables: tuple[TableEntry, ...]


@dataclass(frozen=True)
class LayerTable:
    """A payload whose header and layer table have been read and checked.

    Parameters
    ----------
    header : Header
    layers : tuple of LayerEntry
        One per layer.
    words : numpy.ndarray
        The ANS words, little-endian ``uint32``: a view of the payload, not a copy.
    data : bytes
        The payload.
    """

    header: Header
    layers: tuple[LayerEntry, ...]
    words: WordArray
    data: bytes

    def frequencies(self, table: TableEntry, name: str) -> IntArray:
        """Read and check a table's frequencies (``int64``, ``[1]`` for a one-symbol table).

        Raises
        ------
        CodecError
            For a malformed varint, a frequency above :data:`MAX_FREQUENCY`
            or an all-zero table.
        """
        if table.alphabet == 1:
            return np.ones(1, dtype=np.int64)
        reader = Reader(self.data)
        reader.pos = table.offset
        what = f"{name}: frequencies"
        if table.alphabet <= _PARSE:
            frequencies = reader.varints(table.alphabet, what)
        else:
            frequencies = np.empty(table.alphabet, dtype=np.int64)
            for start in range(0, table.alphabet, _PARSE):
                chunk = frequencies[start : start + _PARSE]
                chunk[:] = reader.varints(chunk.size, what)
        if int(frequencies.max()) > MAX_FREQUENCY or int(frequencies.sum()) == 0:
            raise CodecError(f"layer {name!r}: invalid frequency table")
        return frequencies


# ---------------------------------------------------------------------------
# writing


def write_bitstream(
    header: Header, records: Sequence[LayerRecord], layout: LayerLayout, words: WordArray
) -> tuple[bytes, int]:
    """Serialise a payload.

    Parameters
    ----------
    header : Header
        Fingerprints.
    records : sequence of LayerRecord
        One per layer, in layer order.
    layout : LayerLayout
        Supplies each layer's shape.
    words : numpy.ndarray
        The ANS words.

    Returns
    -------
    payload : bytes
        The complete bitstream.
    side_bytes : int
        Bytes before the first ANS word: header, layer table, word count.
    """
    parts = [
        MAGIC,
        bytes([VERSION, 0]),
        header.model_fingerprint,
        header.history_fingerprint,
        encode_varint(len(records)),
    ]
    for record, shape in zip(records, layout.shapes, strict=True):
        parts.append(bytes([len(shape)]))
        parts.extend(encode_varint(d) for d in shape)
        has_gain = record.predictor is not Predictor.ZERO and record.gain != 1.0
        tag = int(record.predictor) | (int(record.quantizer) << _TAG_QUANTIZER_SHIFT)
        parts.append(bytes([tag | (_TAG_GAIN if has_gain else 0)]))
        if has_gain:
            parts.append(struct.pack("<f", record.gain))
        if record.quantizer is Quantizer.LOWRANK:
            parts.append(encode_varint(record.rank))
            for table in record.factors:
                parts.extend(_table_parts(table.step, table.sym_min, table.frequencies))
        elif record.quantizer is not Quantizer.CENSORED:
            parts.extend(_table_parts(record.step, record.sym_min, record.frequencies))
    parts.append(encode_varint(len(words)))
    side = b"".join(parts)
    return side + words.astype("<u4").tobytes(), len(side)


def _table_parts(step: float, sym_min: int, frequencies: IntArray) -> list[bytes]:
    parts = [
        struct.pack("<f", step),
        encode_varint(zigzag(sym_min)),
        encode_varint(len(frequencies)),
    ]
    if len(frequencies) >= 2:
        parts.append(encode_varints(frequencies))
    return parts


def low_rank_record_size(rank: int, has_gain: bool, tables: Sequence[FactorTable]) -> int:
    """Bytes a low-rank layer-table row takes, less its shape."""
    return (
        1
        + (4 if has_gain else 0)
        + len(encode_varint(rank))
        + sum(len(b"".join(_table_parts(t.step, t.sym_min, t.frequencies))) for t in tables)
    )


def record_size(
    quantizer: Quantizer, has_gain: bool, alphabet: int, frequency_bytes: float
) -> float:
    """Bytes a layer-table row takes, less its shape; the encoder's side-information estimate."""
    size = 1.0 + (4.0 if has_gain else 0.0)
    if quantizer is not Quantizer.CENSORED:
        size += 4.0 + 3.0 + (frequency_bytes if alphabet >= 2 else 0.0)
    return size


# ---------------------------------------------------------------------------
# reading


def _read_table(reader: Reader, size: int, bound: int, name: str) -> TableEntry:
    """Read a step, a symbol range within ``-bound .. bound`` and a table for ``size`` symbols."""
    step = reader.f32(f"{name}: step")
    if not (np.isfinite(step) and step > 0.0):
        raise CodecError(f"layer {name!r}: step must be finite and positive, got {step}")
    sym_min = unzigzag(reader.varint(f"{name}: sym_min"))
    alphabet = reader.varint(f"{name}: alphabet")
    if not 1 <= alphabet <= MAX_ALPHABET:
        raise CodecError(f"layer {name!r}: alphabet {alphabet} outside 1..{MAX_ALPHABET}")
    sym_max = sym_min + alphabet - 1
    if sym_min < -bound or sym_max > bound:
        raise CodecError(f"layer {name!r}: symbols {sym_min}..{sym_max} outside -{bound}..{bound}")
    if size == 0 and alphabet != 1:
        raise CodecError(f"layer {name!r} is empty but declares {alphabet} symbols")
    entry = TableEntry(step, sym_min, alphabet, reader.pos)
    if alphabet >= 2:
        reader.skip_varints(alphabet, f"{name}: frequencies")
    return entry


def _read_low_rank(
    reader: Reader, shape: tuple[int, ...], name: str
) -> tuple[int, tuple[TableEntry, TableEntry]]:
    matrix = matrix_shape(shape)
    if matrix is None:
        raise CodecError(f"layer {name!r} of shape {shape} cannot be low-rank (2-D layers only)")
    rows, cols = matrix
    rank = reader.varint(f"{name}: rank")
    if not 1 <= rank <= max_rank(rows, cols):
        raise CodecError(
            f"layer {name!r}: rank {rank} outside 1..{max_rank(rows, cols)} for shape {shape}"
        )
    left = _read_table(reader, rank * rows, MAX_SYMBOL, f"{name} (left factor)")
    right = _read_table(reader, rank * cols, MAX_SYMBOL, f"{name} (right factor)")
    return rank, (left, right)


def _read_entry(reader: Reader, shape: tuple[int, ...], size: int, name: str) -> LayerEntry:
    ndim = reader.u8(f"{name}: ndim")
    if ndim != len(shape):
        raise CodecError(
            f"layer {name!r} has {ndim} dimensions in the stream, expected {len(shape)}"
        )
    dims = tuple(reader.varint(f"{name}: shape") for _ in range(ndim))
    if dims != shape:
        raise CodecError(f"layer {name!r} has shape {dims} in the stream, expected {shape}")
    tag = reader.u8(f"{name}: tag")
    if tag & _TAG_RESERVED:
        raise CodecError(f"layer {name!r}: reserved tag bits set ({tag:#04x})")
    predictor = Predictor(tag & _TAG_PREDICTOR)
    quantizer = Quantizer((tag >> _TAG_QUANTIZER_SHIFT) & 0b11)  # two bits, four quantizers
    gain = 1.0
    if tag & _TAG_GAIN:
        if predictor is Predictor.ZERO:
            raise CodecError(f"layer {name!r}: a gain on the zero predictor")
        gain = reader.f32(f"{name}: gain")
        if not np.isfinite(gain):
            raise CodecError(f"layer {name!r}: gain is not finite")
    if quantizer is Quantizer.CENSORED:
        return LayerEntry(predictor, quantizer, gain, 0, ())
    if quantizer is Quantizer.LOWRANK:
        rank, factors = _read_low_rank(reader, shape, name)
        return LayerEntry(predictor, quantizer, gain, rank, factors)
    bound = 1 if quantizer is Quantizer.TERNARY else MAX_SYMBOL
    return LayerEntry(predictor, quantizer, gain, 0, (_read_table(reader, size, bound, name),))


def read_layer_table(data: bytes, layout: LayerLayout) -> LayerTable:
    """Parse and check a payload's header and layer table against the expected model.

    Every field is checked but the frequency tables, which
    :meth:`LayerTable.frequencies` reads when they are needed; the words are
    not copied. Memory used is independent of the payload's size (unless it
    is not ``bytes``, when it is copied once).

    Parameters
    ----------
    data : bytes
        The payload.
    layout : LayerLayout
        The model the payload must describe.

    Returns
    -------
    LayerTable

    Raises
    ------
    CodecError
        On any deviation from the format or from ``layout``.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError(f"payload must be bytes, got {type(data).__name__}")
    reader = Reader(bytes(data))
    if reader.take(4, "magic") != MAGIC:
        raise CodecError("not a Phalanx codec payload (bad magic)")
    version = reader.u8("version")
    if version != VERSION:
        raise CodecError(
            f"bitstream version {version} is not supported (this decoder reads {VERSION})"
        )
    if reader.u8("flags") != 0:
        raise CodecError("unknown flags set")
    header = Header(reader.take(4, "model fingerprint"), reader.take(8, "history fingerprint"))
    if header.model_fingerprint != layout.fingerprint:
        raise CodecError("payload is for another model (layer names or shapes differ)")
    count = reader.varint("layer count")
    if count != len(layout):
        raise CodecError(f"payload has {count} layers, the model has {len(layout)}")
    layers = tuple(
        _read_entry(reader, shape, size, name)
        for name, shape, size in zip(layout.names, layout.shapes, layout.sizes, strict=True)
    )
    num_words = reader.varint("word count")
    if num_words * 4 != reader.remaining:
        raise CodecError(
            f"payload declares {num_words} words ({num_words * 4} bytes), {reader.remaining} follow"
        )
    words = np.frombuffer(reader.data, dtype="<u4", count=num_words, offset=reader.pos)
    return LayerTable(header, layers, words, reader.data)


def read_bitstream(data: bytes, layout: LayerLayout) -> tuple[Header, list[LayerRecord], WordArray]:
    """Parse and check a whole payload against the expected model.

    Parameters
    ----------
    data : bytes
        The payload.
    layout : LayerLayout
        The model the payload must describe.

    Returns
    -------
    header : Header
    records : list of LayerRecord
        One per layer.
    words : numpy.ndarray
        The ANS words (native-order ``uint32``).

    Raises
    ------
    CodecError
        On any deviation from the format or from ``layout``.
    """
    table = read_layer_table(data, layout)
    records = []
    for name, entry in zip(layout.names, table.layers, strict=True):
        tables = [(t, table.frequencies(t, name)) for t in entry.tables]
        if entry.quantizer is Quantizer.LOWRANK:
            factors = tuple(FactorTable(t.step, t.sym_min, f) for t, f in tables)
            records.append(
                LayerRecord(
                    entry.predictor, entry.quantizer, entry.gain, rank=entry.rank, factors=factors
                )
            )
        elif tables:
            ((t, frequencies),) = tables
            records.append(
                LayerRecord(
                    entry.predictor, entry.quantizer, entry.gain, t.step, t.sym_min, frequencies
                )
            )
        else:
            records.append(LayerRecord(entry.predictor, entry.quantizer, entry.gain))
    return table.header, records, table.words.astype(np.uint32)
