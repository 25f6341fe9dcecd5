"""Hostile payloads built field by field: a chosen layer table, then real ANS words for it.

A forged payload passes every structural check (magic, fingerprints, shapes,
symbol ranges, word count), and its words decode exactly, so what the decoder
does with the values it declares is what gets tested, not the coder refusing
random words. Imported as ``tests.support.forged_payloads``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from phalanx.codec import DeltaHistory, LayerLayout, Predictor, Quantizer
from phalanx.codec.bitstream import FactorTable, Header, LayerRecord, write_bitstream
from phalanx.codec.coder import encode_symbols, table_streams
from phalanx.codec.entropy import group_symbols
from phalanx.codec.lowrank import max_rank

Tables = Sequence[tuple[FactorTable | LayerRecord, int]]


def coded_tables(record: LayerRecord, shape: tuple[int, ...]) -> list[tuple[FactorTable, int]]:
    """The tables of a layer-table row that carry symbols, each with its symbol count."""
    size = int(np.prod(shape, dtype=np.int64))
    if record.quantizer is Quantizer.CENSORED:
        return []
    if record.quantizer is Quantizer.LOWRANK:
        rows, cols = shape
        left, right = record.factors
        return [(left, record.rank * rows), (right, record.rank * cols)]
    return [(FactorTable(record.step, record.sym_min, record.frequencies), size)]


def drawn_symbols(table: FactorTable, size: int, seed: int) -> np.ndarray:
    """``size`` float32 symbols drawn from the table's own frequencies."""
    rng = np.random.default_rng(seed)
    p = table.frequencies.astype(np.float64)
    draws = rng.choice(len(p), size=size, p=p / p.sum())
    return (draws + table.sym_min).astype(np.float32)


def forge(
    layout: LayerLayout,
    history: DeltaHistory,
    records: Sequence[LayerRecord],
    symbols: Sequence[np.ndarray] | None = None,
    seed: int = 0,
) -> bytes:
    """Write ``records`` with ANS words that code symbols for every table of two or more symbols.

    Parameters
    ----------
    layout : LayerLayout
    history : DeltaHistory
        Its fingerprint goes in the header.
    records : sequence of LayerRecord
        One per layer; frequencies need not be honest, only positive where used.
    symbols : sequence of numpy.ndarray, optional
        The symbols of each coded table in stream order; drawn from each
        table's frequencies when not given.
    seed : int
        Seeds the drawn symbols.
    """
    tables = [
        table
        for record, shape in zip(records, layout.shapes, strict=True)
        for table in coded_tables(record, shape)
        if table[0].alphabet >= 2
    ]
    if symbols is None:
        symbols = [drawn_symbols(t, n, seed + i) for i, (t, n) in enumerate(tables)]
    streams = []
    for (table, size), values in zip(tables, symbols, strict=True):
        assert values.size == size
        packed = group_symbols(values, table.sym_min, table.alphabet)
        streams.append(table_streams(values, table.sym_min, table.frequencies, packed))
    words, _ = encode_symbols(streams)
    header = Header(layout.fingerprint, history.fingerprint[:8])
    return write_bitstream(header, records, layout, words)[0]


# --------------------------------------------------------------------------- the costliest payloads

MEMORY_SPEC = [
    ("fc.weight", (16384, 64)),
    ("fc.bias", (64,)),
    ("proj.weight", (256, 256)),
    *[(f"norm{i}.weight", (16,)) for i in range(32)],
]
"""A large matrix (4 MiB of float32), a square one and many small layers (many tables).

Low-rank at their largest ranks (63 and 128), the two matrices' factors fill
them, and the square one's corner is the largest a rank of 128 can have, while
rebuilding them costs little.
"""

FC, PROJ, FIRST_SMALL = 0, 2, 3
LOW_RANK = 128
"""The config's rank, the square matrix's largest."""

COSTLIEST = (
    "low-rank, one-symbol factors",
    "low-rank, coded factors, gain",
    "every coordinate escapes",
    "largest alphabet, split",
    "low-rank, largest alphabets, split",
    "many largest tables",
    "predictions with a gain",
)
"""The names :func:`costliest_payloads` gives its payloads."""

_ONE = np.ones(1, dtype=np.int64)


def _censored(layout: LayerLayout) -> list[LayerRecord]:
    return [LayerRecord(Predictor.ZERO, Quantizer.CENSORED) for _ in layout.shapes]


def _uniform(
    step: float,
    sym_min: int,
    frequencies: np.ndarray,
    predictor: Predictor = Predictor.ZERO,
    gain: float = 1.0,
) -> LayerRecord:
    return LayerRecord(predictor, Quantizer.UNIFORM, gain, step, sym_min, frequencies)


def _low_rank(
    layout: LayerLayout,
    left: FactorTable,
    right: FactorTable,
    predictor: Predictor = Predictor.ZERO,
    gain: float = 1.0,
) -> list[LayerRecord]:
    """Both matrices low-rank at their largest ranks, every other layer censored."""
    records = _censored(layout)
    for layer in (FC, PROJ):
        rank = max_rank(*layout.shapes[layer])
        records[layer] = LayerRecord(
            predictor, Quantizer.LOWRANK, gain, rank=rank, factors=(left, right)
        )
    return records


def costliest_payloads(layout: LayerLayout, history: DeltaHistory) -> dict[str, bytes]:
    """Payloads that make the decoder allocate the most, for a :data:`MEMORY_SPEC` model.

    ``history`` must hold at least one delta, for the predictions with a gain.
    """
    out: dict[str, bytes] = {}
    # The largest factors, from a payload of a few dozen bytes.
    out["low-rank, one-symbol factors"] = forge(
        layout,
        history,
        _low_rank(layout, FactorTable(1e-3, 1, _ONE), FactorTable(1e-3, -1, _ONE)),
    )
    left = FactorTable(1e-3, -1, np.array([1, 60, 3], dtype=np.int64))
    right = FactorTable(1e-2, -2, np.array([1, 1, 90, 1, 1], dtype=np.int64))
    out["low-rank, coded factors, gain"] = forge(
        layout, history, _low_rank(layout, left, right, Predictor.MEAN, 0.5)
    )

    # Every coordinate of the large layer escapes the core window.
    frequencies = np.ones(65, dtype=np.int64)
    frequencies[32] = 60_000
    records = _censored(layout)
    records[FC] = _uniform(1e-3, -32, frequencies)
    size = layout.sizes[FC]
    tail = np.random.default_rng(1).integers(0, 32, size=size).astype(np.float32) - 32
    out["every coordinate escapes"] = forge(layout, history, records, [tail])

    # The largest alphabet, split: its tail stream's model is nearly as large.
    largest = np.ones(65535, dtype=np.int64)
    largest[32767] = 1 << 16
    records = _censored(layout)
    records[FC] = _uniform(1e-3, -32767, largest)
    out["largest alphabet, split"] = forge(layout, history, records)
    table = FactorTable(1e-3, -32767, largest)
    out["low-rank, largest alphabets, split"] = forge(
        layout, history, _low_rank(layout, table, table)
    )

    # A table of the largest alphabet on every small layer.
    records = _censored(layout)
    for layer in range(FIRST_SMALL, len(layout)):
        records[layer] = _uniform(1e-3, -32767, np.ones(65535, dtype=np.int64))
    out["many largest tables"] = forge(layout, history, records)

    # One-symbol tables everywhere, each with a prediction scaled by a gain.
    records = [_uniform(1e-3, 3, _ONE, Predictor.PREVIOUS, 0.75) for _ in layout.shapes]
    out["predictions with a gain"] = forge(layout, history, records)
    assert tuple(out) == COSTLIEST
    return out
