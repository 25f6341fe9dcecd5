from __future__ import annotations

import numpy as np
import pytest

from phalanx.codec.quantizers import (
    add_prediction,
    dequantize_into,
    quantize_stochastic,
    quantize_ternary,
    quantize_uniform,
    rounding_draws,
)


def test_uniform_quantizer_error_is_at_most_half_a_step():
    rng = np.random.default_rng(0)
    residual = rng.standard_normal(10_000).astype(np.float32)
    step = np.float32(0.3)
    symbols = quantize_uniform(residual, step)
    out = np.empty_like(residual)
    dequantize_into(symbols, step, out)
    assert np.all(symbols == np.rint(symbols))
    assert float(np.abs(out - residual).max()) <= 0.5 * 0.3 * (1 + 1e-6)


def test_uniform_quantizer_is_mid_tread_small_values_become_a_positive_zero():
    residual = np.array([-0.2, 0.2, -0.6, 0.6], dtype=np.float32)
    symbols = quantize_uniform(residual, np.float32(1.0))
    np.testing.assert_array_equal(symbols, [0.0, 0.0, -1.0, 1.0])
    assert not np.signbit(symbols[0])


def test_ternary_symbols_are_signs_or_zero_and_unbiased_inside_the_scale():
    residual = np.full(200_000, 0.25, dtype=np.float32)
    residual[100_000:] = -0.75
    scale = np.float32(1.0)
    symbols = quantize_ternary(residual, scale, rounding_draws((1, 2, 3), 0, residual.size))
    assert set(np.unique(symbols)) <= {-1.0, 0.0, 1.0}
    assert not np.signbit(symbols[symbols == 0]).any()
    # Means within 5 standard errors of the truth (seeded, so deterministic).
    assert abs(symbols[:100_000].mean() - 0.25) < 5 * np.sqrt(0.25 * 0.75 / 100_000)
    assert abs(symbols[100_000:].mean() + 0.75) < 5 * np.sqrt(0.75 * 0.25 / 100_000)


def test_ternary_clips_beyond_the_scale_to_a_sure_sign():
    residual = np.array([3.0, -5.0, 1.0], dtype=np.float32)
    symbols = quantize_ternary(
        residual, np.float32(1.0), rounding_draws((0, 0, 0), 0, residual.size)
    )
    np.testing.assert_array_equal(symbols, [1.0, -1.0, 1.0])


def test_ternary_stream_depends_on_every_part_of_the_seed_context_and_the_layer():
    residual = np.full(4096, 0.5, dtype=np.float32)
    scale = np.float32(1.0)

    def draw(context, layer):
        return quantize_ternary(residual, scale, rounding_draws(context, layer, residual.size))

    reference = draw((1, 2, 3), 4)
    np.testing.assert_array_equal(draw((1, 2, 3), 4), reference)
    for context, layer in [((9, 2, 3), 4), ((1, 9, 3), 4), ((1, 2, 9), 4), ((1, 2, 3), 9)]:
        assert not np.array_equal(draw(context, layer), reference)


def test_add_prediction_with_unit_gain_equals_plain_addition():
    out = np.array([1.0, 2.0], dtype=np.float32)
    add_prediction(out, np.array([0.5, -0.5], dtype=np.float32), np.float32(1.0))
    np.testing.assert_array_equal(out, [1.5, 1.5])
    add_prediction(out, np.array([1.0, 1.0], dtype=np.float32), np.float32(-2.0))
    np.testing.assert_array_equal(out, [-0.5, -0.5])
    add_prediction(out, None, np.float32(3.0))
    np.testing.assert_array_equal(out, [-0.5, -0.5])


def test_stochastic_rounding_is_unbiased_within_one_step_and_never_a_negative_zero():
    values = np.array([0.25, -0.25, 1.7, -1.7, 0.0, 3.0, -0.01], dtype=np.float32)
    residual = np.tile(values, 100_000)
    step = np.float32(1.0)
    symbols = quantize_stochastic(residual, step, rounding_draws((4, 5, 6), 1, residual.size))
    assert np.all(symbols == np.rint(symbols))
    assert np.all(np.abs(symbols - residual) < 1.0)  # one of the two neighbouring multiples
    assert not np.signbit(symbols[symbols == 0]).any()
    means = symbols.reshape(-1, values.size).mean(axis=0)
    spread = np.sqrt(0.25 / 100_000)  # the largest standard error: f (1 - f) <= 1/4
    np.testing.assert_allclose(means, values, atol=5 * spread)
    # Exact multiples of the step are kept exactly.
    np.testing.assert_array_equal(
        symbols.reshape(-1, values.size)[:, [4, 5]], [[0.0, 3.0]] * 100_000
    )


def test_stochastic_rounding_depends_only_on_the_seed_context_and_the_layer():
    residual = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
    step = np.float32(0.7)

    def draw(context, layer):
        return quantize_stochastic(residual, step, rounding_draws(context, layer, residual.size))

    np.testing.assert_array_equal(draw((1, 2, 3), 0), draw((1, 2, 3), 0))
    assert not np.array_equal(draw((1, 2, 3), 0), draw((1, 2, 4), 0))
    assert not np.array_equal(draw((1, 2, 3), 0), draw((1, 2, 3), 1))


def test_independent_draws_are_the_per_file_stream():
    from phalanx.codec.quantizers import ternary_rng

    expected = ternary_rng((1, 2, 3), 4).random(1000, dtype=np.float32)
    np.testing.assert_array_equal(rounding_draws((1, 2, 3), 4, 1000), expected)


def test_correlated_draws_are_uniform_24_bit_and_depend_on_every_part_of_the_context():
    draws = rounding_draws((1, 2, 3), 4, 200_000, correlated=True)
    assert draws.dtype == np.float32
    assert draws.min() >= 0.0 and draws.max() < 1.0
    np.testing.assert_array_equal(draws * 2**24, np.rint(draws * 2**24))
    counts, _ = np.histogram(draws, bins=10, range=(0.0, 1.0))
    assert np.all(np.abs(counts - 20_000) < 5 * np.sqrt(20_000))
    np.testing.assert_array_equal(rounding_draws((1, 2, 3), 4, 1000, correlated=True), draws[:1000])
    for context, layer in [((9, 2, 3), 4), ((1, 9, 3), 4), ((1, 2, 9), 4), ((1, 2, 3), 9)]:
        other = rounding_draws(context, layer, 1000, correlated=True)
        assert not np.array_equal(other, draws[:1000])


def test_correlated_draws_of_one_coordinate_spread_evenly_over_a_round_of_files():
    files = 35
    draws = np.stack([rounding_draws((7, 1, f), 0, 5000, correlated=True) for f in range(files)])
    ordered = np.sort(draws, axis=0)
    gaps = np.diff(np.vstack([ordered, ordered[:1] + 1.0]), axis=0)  # circular gaps
    assert gaps.max() < 2.0 / files
    independent = np.sort(np.stack([rounding_draws((7, 1, f), 0, 5000) for f in range(files)]), 0)
    assert np.diff(independent, axis=0).max() > 3.0 / files


def test_correlated_rounding_errors_cancel_in_the_mean_of_a_round():
    files = 35
    rng = np.random.default_rng(5)
    # Every file holds the same value of each coordinate, plus a little noise of its own.
    values = rng.uniform(-3.0, 3.0, 4000).astype(np.float32)
    residuals = [
        values + rng.normal(0.0, 0.05, values.size).astype(np.float32) for _ in range(files)
    ]
    truth = np.mean(residuals, axis=0)
    step = np.float32(1.0)

    def mean_error(correlated: bool) -> float:
        symbols = [
            quantize_stochastic(
                r, step, rounding_draws((3, 9, f), 2, r.size, correlated=correlated)
            )
            for f, r in enumerate(residuals)
        ]
        return float(np.mean((np.mean(symbols, axis=0) - truth) ** 2))

    assert mean_error(True) < 0.3 * mean_error(False)


@pytest.mark.parametrize("mirrored", [False, True])
def test_ternary_is_unbiased_mirrored_or_not(mirrored):
    residual = np.tile(np.array([0.25, -0.25, -0.75], dtype=np.float32), 100_000)
    draws = rounding_draws((1, 2, 3), 0, residual.size)
    symbols = quantize_ternary(residual, np.float32(1.0), draws, mirrored=mirrored)
    means = symbols.reshape(-1, 3).mean(axis=0)
    np.testing.assert_allclose(means, [0.25, -0.25, -0.75], atol=5 * np.sqrt(0.25 / 100_000))


def test_mirrored_ternary_cancels_more_of_a_round_whose_files_disagree_in_sign():
    # Mirrored, a draw u rounds r / scale like floor(r / scale + 1 - u): one
    # dithered lattice for both signs, so correlated draws cancel across files
    # whose values straddle zero; unmirrored, the signs round independently.
    files, size = 35, 20_000
    rng = np.random.default_rng(1)
    mean = rng.uniform(-0.3, 0.3, size)
    values = [
        np.clip(mean + rng.normal(0.0, 0.3, size), -1, 1).astype(np.float32) for _ in range(files)
    ]
    truth = np.mean(values, axis=0)

    def mean_error(mirrored: bool) -> float:
        symbols = [
            quantize_ternary(
                v,
                np.float32(1.0),
                rounding_draws((1, 2, f), 0, size, correlated=True),
                mirrored=mirrored,
            )
            for f, v in enumerate(values)
        ]
        return float(np.mean((np.mean(symbols, axis=0) - truth) ** 2))

    assert mean_error(True) < 0.8 * mean_error(False)
