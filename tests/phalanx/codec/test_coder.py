from __future__ import annotations

import contextlib
import itertools
import tracemalloc

import numpy as np
import pytest

import phalanx.codec.coder as coder_module
from phalanx.codec import CodecError
from phalanx.codec.coder import SymbolDecoder, decode_symbols, encode_symbols, table_streams
from phalanx.codec.entropy import (
    entropy_bits,
    group_counts,
    group_symbols,
    pad_symbol,
    quantize_frequencies,
)
from phalanx.codec.escape import plan_escape
from tests.support.codec_builders import peaked_symbols, skewed_symbols


def _table(symbols: np.ndarray, low: int | None = None):
    """What the codec hands the coder for one table: symbols, sym_min, frequencies, packed."""
    low = int(symbols.min()) if low is None else low
    alphabet = int(symbols.max()) - low + 1
    packed = group_symbols(symbols, low, alphabet)
    counts = group_counts(packed, alphabet, symbols.size, pad_symbol(low, alphabet))
    return symbols, low, quantize_frequencies(counts), packed, counts


def _round_trip(tables: list[tuple]) -> tuple[list[np.ndarray], np.ndarray, list[int]]:
    words, bits = encode_symbols([table_streams(s, low, f, p) for s, low, f, p, _ in tables])
    outs = [np.full(s.size, np.nan, dtype=np.float32) for s, *_ in tables]
    decode_symbols(
        words,
        [
            (f, np.arange(low, low + len(f), dtype=np.float32), out)
            for (_, low, f, _, _), out in zip(tables, outs, strict=True)
        ],
    )
    return outs, words, bits


@pytest.mark.parametrize(
    ("low", "alphabet", "n"),
    [(-1, 3, 1001), (-5, 11, 998), (-20, 41, 500), (-30, 64, 300), (0, 2, 9)],
)
def test_a_whole_table_survives_coding(low, alphabet, n):
    table = _table(skewed_symbols(2, n, low, alphabet), low)
    assert len(table_streams(*table[:4])) == 1
    (out,), words, bits = _round_trip([table])
    np.testing.assert_array_equal(out, table[0])
    assert bits[0] <= 32 * len(words)


@pytest.mark.parametrize(("n", "scale"), [(200_000, 0.3), (200_000, 1.5), (50_001, 4.0)])
def test_a_skewed_table_is_split_in_two_streams_and_survives_coding(n, scale):
    table = _table(peaked_symbols(1, n, scale))
    escape = plan_escape(table[2], n)
    assert escape is not None
    core, tail = table_streams(*table[:4])
    assert core[2] == n
    assert tail[2] == np.count_nonzero(
        (table[0] < table[1] + escape.start) | (table[0] >= table[1] + escape.start + escape.width)
    )
    (out,), _, _ = _round_trip([table])
    np.testing.assert_array_equal(out, table[0])


def test_split_and_whole_tables_share_one_stream_and_decode_in_order():
    tables = [
        _table(skewed_symbols(0, 300, -1, 3), -1),
        _table(peaked_symbols(1, 120_000, 0.4)),
        _table(skewed_symbols(2, 500, -4, 9), -4),
        _table(peaked_symbols(3, 90_000, 2.0)),
    ]
    assert [len(table_streams(*t[:4])) for t in tables] == [1, 2, 1, 2]
    outs, words, bits = _round_trip(tables)
    for out, table in zip(outs, tables, strict=True):
        np.testing.assert_array_equal(out, table[0])
    assert sum(bits) <= 32 * len(words) and all(b > 0 for b in bits)


@pytest.mark.parametrize(("n", "scale"), [(200_000, 0.2), (200_000, 1.0), (200_000, 8.0)])
def test_coded_size_is_within_one_percent_of_the_empirical_entropy(n, scale):
    table = _table(peaked_symbols(4, n, scale))
    _, _, bits = _round_trip([table])
    assert bits[0] <= 1.01 * entropy_bits(table[4]) + 64


@pytest.mark.parametrize(("chunk", "window"), [(coder_module.CHUNK, coder_module.WINDOW), (5, 12)])
def test_tables_decode_across_strided_parts_a_chunk_at_a_time(monkeypatch, chunk, window):
    # Small chunks and windows put group, chunk and part boundaries everywhere.
    monkeypatch.setattr(coder_module, "CHUNK", chunk)
    monkeypatch.setattr(coder_module, "WINDOW", window)
    tables = [
        _table(skewed_symbols(0, 301, -1, 3), -1),
        _table(peaked_symbols(1, 60_001, 0.4)),
        _table(skewed_symbols(2, 97, -4, 9), -4),
    ]
    assert [len(table_streams(*t[:4])) for t in tables] == [1, 2, 1]
    words, _ = encode_symbols([table_streams(s, low, f, p) for s, low, f, p, _ in tables])
    decoder = SymbolDecoder(words)
    for symbols, low, frequencies, _, _ in tables:
        # Every third value of a buffer, cut in parts of uneven lengths.
        buffer = np.full(3 * symbols.size, np.inf, dtype=np.float32)
        strided = buffer[::3]
        cuts = [0, 1, 8, symbols.size // 3, symbols.size]
        parts = [strided[a:b] for a, b in itertools.pairwise(cuts)]
        decoder.table(frequencies, np.arange(low, low + len(frequencies), dtype=np.float32), parts)
        np.testing.assert_array_equal(strided, symbols)
        assert np.isinf(np.delete(buffer, np.s_[::3])).all()
    decoder.finish()


def test_words_left_over_after_the_last_table_are_refused():
    symbols, low, frequencies, packed, _ = _table(skewed_symbols(4, 500, -2, 5), -2)
    words, _ = encode_symbols([table_streams(symbols, low, frequencies, packed)])
    values = np.arange(-2, 3, dtype=np.float32)
    with pytest.raises(CodecError, match="does not end"):
        decode_symbols(words, [(frequencies, values, np.empty(100, dtype=np.float32))])


def test_words_ending_in_zero_are_refused_as_a_codec_error():
    with pytest.raises(CodecError, match="entropy decoder"):
        decode_symbols(
            np.array([5, 0], dtype=np.uint32),
            [(np.array([1, 1]), np.zeros(2, np.float32), np.empty(4, np.float32))],
        )


def test_garbage_words_for_a_split_table_fill_every_value_or_raise_a_codec_error():
    frequencies = quantize_frequencies(np.array([5, 40, 10_000, 35, 3], dtype=np.int64) * 20)
    assert plan_escape(frequencies, 300_000) is not None
    values = np.arange(-2, 3, dtype=np.float32)
    rng = np.random.default_rng(0)
    for _ in range(20):
        words = rng.integers(1, 2**32, size=int(rng.integers(1, 400)), dtype=np.uint32)
        out = np.full(300_000, np.nan, dtype=np.float32)
        try:
            decode_symbols(words, [(frequencies, values, out)])
        except CodecError:
            continue
        assert np.isin(out, values).all()


def test_decoding_a_split_table_allocates_less_than_twice_its_values():
    # About one coordinate in ten escapes; whatever the words, temporaries stay small.
    _, low, frequencies, _, _ = _table(peaked_symbols(0, 200_000, 1.5))
    size = 1_000_000
    escape = plan_escape(frequencies, size)
    assert escape is not None
    assert frequencies[escape.start : escape.start + escape.width].sum() < 0.95 * frequencies.sum()
    values = np.arange(low, low + len(frequencies), dtype=np.float32)
    words = np.random.default_rng(1).integers(1, 2**32, size=200_000, dtype=np.uint32)
    out = np.empty(size, dtype=np.float32)
    tracemalloc.start()
    try:
        with contextlib.suppress(CodecError):
            decode_symbols(words, [(frequencies, values, out)])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.isnan(out).sum() == 0
    assert peak < 2 * out.nbytes
