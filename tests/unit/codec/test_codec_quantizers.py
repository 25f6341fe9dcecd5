from __future__ import annotations

import numpy as np

from phalanx.codec.quantizers import (
    add_prediction,
    dequantize_into,
    quantize_stochastic,
    quantize_ternary,
    quantize_uniform,
    ternary_rng,
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
    symbols = quantize_ternary(residual, scale, ternary_rng((1, 2, 3), 0))
    assert set(np.unique(symbols)) <= {-1.0, 0.0, 1.0}
    assert not np.signbit(symbols[symbols == 0]).any()
    # Means within 5 standard errors of the truth (seeded, so deterministic).
    assert abs(symbols[:100_000].mean() - 0.25) < 5 * np.sqrt(0.25 * 0.75 / 100_000)
    assert abs(symbols[100_000:].mean() + 0.75) < 5 * np.sqrt(0.75 * 0.25 / 100_000)


def test_ternary_clips_beyond_the_scale_to_a_sure_sign():
    residual = np.array([3.0, -5.0, 1.0], dtype=np.float32)
    symbols = quantize_ternary(residual, np.float32(1.0), ternary_rng((0, 0, 0), 0))
    np.testing.assert_array_equal(symbols, [1.0, -1.0, 1.0])


def test_ternary_stream_depends_on_every_part_of_the_seed_context_and_the_layer():
    residual = np.full(4096, 0.5, dtype=np.float32)
    scale = np.float32(1.0)

    def draw(context, layer):
        return quantize_ternary(residual, scale, ternary_rng(context, layer))

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
    symbols = quantize_stochastic(residual, step, ternary_rng((4, 5, 6), 1))
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
        return quantize_stochastic(residual, step, ternary_rng(context, layer))

    np.testing.assert_array_equal(draw((1, 2, 3), 0), draw((1, 2, 3), 0))
    assert not np.array_equal(draw((1, 2, 3), 0), draw((1, 2, 4), 0))
    assert not np.array_equal(draw((1, 2, 3), 0), draw((1, 2, 3), 1))
