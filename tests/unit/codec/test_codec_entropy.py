from __future__ import annotations

import numpy as np
import pytest

from phalanx.codec import CodecError
from phalanx.codec.entropy import (
    decode_symbols,
    encode_symbols,
    entropy_bits,
    group_counts,
    group_size,
    group_symbols,
    group_values,
    pad_symbol,
    quantize_frequencies,
)


def _symbols(seed: int, n: int, low: int, alphabet: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    weights = rng.random(alphabet) ** 3 + 1e-3
    draws = rng.choice(alphabet, size=n, p=weights / weights.sum())
    draws[0], draws[-1] = 0, alphabet - 1
    return (draws + low).astype(np.float32)


def test_group_size_keeps_the_product_alphabet_within_4096_and_the_layer():
    alphabets = (2, 3, 4, 5, 11, 16, 17, 64, 65, 1000)
    assert [group_size(a, 10**6) for a in alphabets] == [8, 7, 6, 5, 3, 3, 2, 2, 1, 1]
    assert [group_size(a, 100) for a in (2, 3, 10, 11)] == [6, 4, 2, 1]


def test_group_values_lists_the_digits_most_significant_first():
    table = group_values(np.array([-1.0, 0.0, 2.0], np.float32), 27)
    assert table.shape == (27, 3)
    np.testing.assert_array_equal(table[0], [-1, -1, -1])
    np.testing.assert_array_equal(table[5], [-1, 0, 2])  # 5 = 0*9 + 1*3 + 2
    np.testing.assert_array_equal(table[26], [2, 2, 2])


@pytest.mark.parametrize(("low", "alphabet", "n"), [(-1, 3, 1001), (-5, 11, 998), (3, 40, 77)])
def test_grouped_counts_equal_the_plain_histogram(low, alphabet, n):
    symbols = _symbols(1, n, low, alphabet)
    packed = group_symbols(symbols, low, alphabet)
    assert packed.size == -(-n // group_size(alphabet, n))
    counts = group_counts(packed, alphabet, n, pad_symbol(low, alphabet))
    np.testing.assert_array_equal(
        counts, np.bincount((symbols - low).astype(int), minlength=alphabet)
    )


@pytest.mark.parametrize(
    ("low", "alphabet", "n"),
    [(-1, 3, 1001), (-5, 11, 998), (-20, 41, 500), (-30, 64, 300), (0, 2, 9)],
)
def test_symbols_survive_coding_and_unpacking(low, alphabet, n):
    symbols = _symbols(2, n, low, alphabet)
    packed = group_symbols(symbols, low, alphabet)
    counts = group_counts(packed, alphabet, n, pad_symbol(low, alphabet))
    frequencies = quantize_frequencies(counts)
    words, bits = encode_symbols([(packed, frequencies, n)])
    (decoded,) = decode_symbols(words, [(frequencies, n)])
    table = group_values(np.arange(low, low + alphabet, dtype=np.float32), n)
    values = table[decoded].ravel()[:n]
    np.testing.assert_array_equal(values, symbols)
    assert bits[0] <= 32 * len(words)


def test_several_layers_share_one_stream_and_decode_in_order():
    streams, tables, originals = [], [], []
    for seed, (low, alphabet, n) in enumerate([(-1, 3, 300), (-4, 9, 500), (-30, 61, 200)]):
        symbols = _symbols(seed, n, low, alphabet)
        packed = group_symbols(symbols, low, alphabet)
        frequencies = quantize_frequencies(
            group_counts(packed, alphabet, n, pad_symbol(low, alphabet))
        )
        streams.append((packed, frequencies, n))
        tables.append((frequencies, n))
        originals.append(packed)
    words, bits = encode_symbols(streams)
    decoded = decode_symbols(words, tables)
    for got, want in zip(decoded, originals, strict=True):
        np.testing.assert_array_equal(got, want)
    assert sum(bits) <= 32 * len(words) and all(b > 0 for b in bits)


def test_coded_size_is_within_one_percent_of_the_empirical_entropy():
    symbols = _symbols(3, 200_000, -6, 13)
    packed = group_symbols(symbols, -6, 13)
    counts = group_counts(packed, 13, symbols.size, pad_symbol(-6, 13))
    _, bits = encode_symbols([(packed, quantize_frequencies(counts), symbols.size)])
    assert bits[0] <= 1.01 * entropy_bits(counts)


def test_large_counts_are_rescaled_without_losing_a_rare_symbol():
    counts = np.array([1, 10_000_000, 3, 0, 500_000], dtype=np.int64)
    frequencies = quantize_frequencies(counts)
    assert frequencies.sum() <= (1 << 16) + len(counts)
    np.testing.assert_array_equal(frequencies > 0, counts > 0)
    small = np.array([4, 0, 7], dtype=np.int64)
    np.testing.assert_array_equal(quantize_frequencies(small), small)


def test_entropy_bits_of_a_fair_coin_is_one_bit_per_symbol():
    assert entropy_bits(np.array([500, 500], dtype=np.int64)) == pytest.approx(1000.0)
    assert entropy_bits(np.array([7, 0], dtype=np.int64)) == 0.0


def test_words_left_over_after_the_last_layer_are_refused():
    symbols = _symbols(4, 500, -2, 5)
    packed = group_symbols(symbols, -2, 5)
    frequencies = quantize_frequencies(group_counts(packed, 5, 500, pad_symbol(-2, 5)))
    words, _ = encode_symbols([(packed, frequencies, 500)])
    with pytest.raises(CodecError, match="does not end"):
        decode_symbols(words, [(frequencies, 100)])


def test_words_ending_in_zero_are_refused_as_a_codec_error():
    with pytest.raises(CodecError, match="entropy decoder"):
        decode_symbols(np.array([5, 0], dtype=np.uint32), [(np.array([1, 1]), 4)])
