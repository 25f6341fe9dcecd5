from __future__ import annotations

import numpy as np
import pytest

from phalanx.codec.entropy import (
    entropy_bits,
    group_counts,
    group_size,
    group_symbols,
    group_values,
    pad_symbol,
    quantize_frequencies,
    unpack_values,
)
from tests.support.codec_builders import skewed_symbols as _symbols


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
    [(-1, 3, 1001), (-5, 11, 998), (-20, 41, 500), (-30, 64, 300), (0, 2, 9), (0, 2, 12)],
)
def test_unpacking_gives_back_every_value_and_drops_the_padding(low, alphabet, n):
    symbols = _symbols(2, n, low, alphabet)
    packed = group_symbols(symbols, low, alphabet)
    values = np.arange(low, low + alphabet, dtype=np.float32) * np.float32(0.5)
    out = np.full(n + 3, np.nan, dtype=np.float32)
    unpack_values(packed, values, out[:n])
    np.testing.assert_array_equal(out[:n], symbols * np.float32(0.5))
    assert np.isnan(out[n:]).all()


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


@pytest.mark.parametrize("low", [-1, 0, 3])
@pytest.mark.parametrize("n", [256, 257, 1003, 4096])
def test_binary_symbols_pack_eight_to_a_group_as_horner_would(low, n):
    symbols = (np.random.default_rng(n).integers(0, 2, n) + low).astype(np.float32)
    assert group_size(2, n) == 8
    padded = np.full(-(-n // 8) * 8, pad_symbol(low, 2), dtype=np.int64)
    padded[:n] = symbols - low
    horner = padded.reshape(-1, 8) @ (2 ** np.arange(7, -1, -1))
    np.testing.assert_array_equal(group_symbols(symbols, low, 2), horner)
