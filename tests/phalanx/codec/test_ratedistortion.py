from __future__ import annotations

import itertools

import numpy as np
import pytest

from phalanx.codec import (
    CodecConfig,
    DeltaHistory,
    Predictor,
    Quantizer,
    encode_update,
)
from phalanx.codec.quantizers import quantize_stochastic
from phalanx.codec.ratedistortion import fit_gain, sample_indices, score_ternary, score_uniform

SEEDS = (1, 2, 3)


def test_sample_indices_are_sorted_unique_and_spread_over_the_layer():
    index = sample_indices(100_003, 4096)
    assert index is not None
    assert np.all(np.diff(index) > 0)
    assert index[0] >= 0 and index[-1] < 100_003
    assert len(index) > 4000
    # Every sixteenth of the layer holds about a sixteenth of the sample.
    per_bin = np.bincount(index * 16 // 100_003, minlength=16)
    assert per_bin.min() > 0.9 * len(index) / 16
    # No stride aliasing with a 3x3 kernel: all nine kernel positions are sampled.
    assert set(np.unique(index % 9)) == set(range(9))


def test_small_layers_and_a_zero_sample_size_use_the_whole_layer():
    assert sample_indices(1000, 4096) is None
    assert sample_indices(10**6, 0) is None


def test_fit_gain_recovers_a_scaled_and_negated_prediction():
    prediction = np.random.default_rng(0).standard_normal(5000).astype(np.float32)
    assert fit_gain(-0.01 * prediction, prediction) == pytest.approx(-0.01, rel=1e-5)
    assert fit_gain(prediction, np.zeros(5000, np.float32)) == 1.0


def test_uniform_scores_match_a_direct_computation_for_every_row():
    rng = np.random.default_rng(1)
    values = np.stack([rng.standard_normal(3000), 0.01 * rng.standard_t(3, 3000)]).astype(
        np.float32
    )
    scores = score_uniform(values, [0.5, 2.0])
    for p, row in enumerate(values):
        rms = np.sqrt(np.mean(row.astype(np.float64) ** 2))
        for j, multiplier in enumerate([0.5, 2.0]):
            step = np.float32(rms * multiplier)
            assert scores.steps[p, j] == step
            symbols = np.rint(row / step)
            assert scores.distortion[p, j] == pytest.approx(
                np.sum((row - symbols * step) ** 2), rel=1e-5
            )
            _, counts = np.unique(symbols, return_counts=True)
            q = counts / counts.sum()
            assert scores.entropy[p, j] == pytest.approx(-(q * np.log2(q)).sum(), rel=1e-9)
            assert scores.alphabets[p, j] == symbols.max() - symbols.min() + 1


def test_an_all_zero_residual_row_is_unusable():
    values = np.zeros((2, 100), np.float32)
    values[1, 3] = 1.0
    scores = score_uniform(values, [1.0])
    assert scores.distortion[0, 0] == np.inf and np.isfinite(scores.distortion[1, 0])
    assert score_ternary(values).distortion[0] == np.inf


def test_ternary_expected_distortion_matches_the_average_of_many_draws():
    values = np.random.default_rng(2).standard_normal(2000).astype(np.float32)
    scores = score_ternary(values[None, :])
    scale = scores.scales[0]
    rng = np.random.default_rng(3)
    errors = []
    for _ in range(200):
        keep = rng.random(values.size) < np.minimum(np.abs(values) / scale, 1)
        errors.append(np.sum((values - np.sign(values) * keep * scale) ** 2))
    assert scores.distortion[0] == pytest.approx(np.mean(errors), rel=0.02)
    assert 0.0 < scores.entropy[0] <= np.log2(3)


def test_stochastic_uniform_scores_match_the_average_of_many_draws():
    rng = np.random.default_rng(5)
    values = np.stack([rng.standard_normal(3000), 0.01 * rng.standard_t(3, 3000)]).astype(
        np.float32
    )
    multipliers = [0.5, 4.0]
    scores = score_uniform(values, multipliers, stochastic=True)
    draws = np.random.default_rng(6)
    for p, row in enumerate(values):
        for j in range(len(multipliers)):
            step = scores.steps[p, j]
            errors, histogram = [], {}
            for _ in range(200):
                symbols = quantize_stochastic(row, step, draws.random(row.size, dtype=np.float32))
                errors.append(np.sum((row - symbols * step).astype(np.float64) ** 2))
                for symbol, n in zip(*np.unique(symbols, return_counts=True), strict=True):
                    histogram[symbol] = histogram.get(symbol, 0) + n
            assert scores.distortion[p, j] == pytest.approx(np.mean(errors), rel=0.02)
            counts = np.array(list(histogram.values()), dtype=np.float64)
            q = counts / counts.sum()
            assert scores.entropy[p, j] == pytest.approx(-(q * np.log2(q)).sum(), rel=0.01)
            low = np.floor(row / step).min()
            high = np.ceil(row / step).max()
            assert scores.alphabets[p, j] == high - low + 1


def test_stochastic_rounding_costs_more_squared_error_than_rounding_to_nearest():
    values = np.random.default_rng(7).standard_normal((1, 5000)).astype(np.float32)
    nearest = score_uniform(values, [1.0, 4.0])
    stochastic = score_uniform(values, [1.0, 4.0], stochastic=True)
    assert np.all(stochastic.distortion > nearest.distortion)


def test_unclipped_ternary_scale_is_the_peak_and_its_error_is_rounding_noise_alone():
    values = np.random.default_rng(8).standard_t(3, (1, 4000)).astype(np.float32)
    peak = np.abs(values).max()
    scores = score_ternary(values, clip=None)
    assert scores.scales[0] == peak
    magnitude = np.abs(values[0]).astype(np.float64)
    expected = np.sum(magnitude * float(peak) - magnitude**2)
    assert scores.distortion[0] == pytest.approx(expected, rel=1e-6)
    assert score_ternary(values).scales[0] < peak  # the default clips heavy tails


def _relative_cost(update, payload_bytes, reconstruction, rd_lambda):
    d = float(np.sum((update - reconstruction) ** 2) / np.sum(update.astype(np.float64) ** 2))
    return d + rd_lambda * 8.0 * payload_bytes / update.size


def test_the_chosen_pair_has_the_lowest_measured_cost_of_all_pairs():
    spec = [("w", (40_000,))]
    rng = np.random.default_rng(4)
    deltas = [rng.standard_t(5, 40_000).astype(np.float32) * 1e-2 for _ in range(3)]
    update = (0.6 * deltas[-1] + 0.4 * rng.standard_t(5, 40_000) * 1e-2).astype(np.float32)
    base = {"censor_threshold": 0.0, "rd_sample_size": 0, "rd_lambda": 0.05}

    def measured(config):
        history = DeltaHistory.from_config(spec, config)
        for delta in deltas:
            history.push(delta)
        encoded = encode_update(
            update, layers_spec=spec, history=history, config=config, seed_context=SEEDS
        )
        cost = _relative_cost(update, encoded.stats.total_bytes, encoded.flat, 0.05)
        return cost, encoded.stats.layers[0]

    full = CodecConfig(**base)
    costs = {}
    for predictor in Predictor:
        for step in full.step_sizes:
            config = CodecConfig(predictors=(predictor,), step_sizes=(step,), ternary=False, **base)
            costs[(predictor, Quantizer.UNIFORM, step)] = measured(config)[0]
        config = CodecConfig(predictors=(predictor,), step_sizes=(), ternary=True, **base)
        costs[(predictor, Quantizer.TERNARY, 0.0)] = measured(config)[0]
    chosen_cost, chosen = measured(full)
    best = min(costs, key=lambda key: costs[key])
    assert (chosen.predictor, chosen.quantizer, chosen.multiplier) == best
    assert chosen_cost <= min(costs.values()) * 1.01
    assert len({round(c, 6) for c in costs.values()}) > 10  # the pairs really differ


def test_predictor_is_chosen_by_cost_not_by_prediction_error():
    # PREVIOUS leaves a dense residual with less energy; MEAN leaves a sparse residual
    # with more energy that codes in far fewer bits. Picking by error alone takes PREVIOUS.
    n = 20_000
    rng = np.random.default_rng(5)
    update = rng.standard_normal(n).astype(np.float32)
    dense = (rng.standard_normal(n) * np.sqrt(0.01 / 1.5)).astype(np.float32)
    sparse = np.zeros(n, np.float32)
    spikes = rng.choice(n, n // 100, replace=False)
    sparse[spikes] = rng.choice([-1.0, 1.0], size=spikes.size)
    previous = update - dense
    mean = update - sparse
    spec = [("w", (n,))]
    config = CodecConfig(
        predictors=(Predictor.ZERO, Predictor.PREVIOUS, Predictor.MEAN),
        history_length=2,
        fit_gain=False,
        censor_threshold=0.0,
        rd_lambda=0.01,
    )
    history = DeltaHistory.from_config(spec, config)
    history.push(2 * mean - previous)
    history.push(previous)
    predicted_mean = history.prediction(Predictor.MEAN)
    predicted_previous = history.prediction(Predictor.PREVIOUS)
    assert predicted_mean is not None and predicted_previous is not None
    error_previous = float(np.sum((update - predicted_previous) ** 2))
    error_mean = float(np.sum((update - predicted_mean) ** 2))
    assert error_previous < error_mean  # by error alone, PREVIOUS would win
    encoded = encode_update(
        update, layers_spec=spec, history=history, config=config, seed_context=SEEDS
    )
    assert encoded.stats.layers[0].predictor is Predictor.MEAN
    forced = CodecConfig(
        predictors=(Predictor.PREVIOUS,),
        history_length=2,
        fit_gain=False,
        censor_threshold=0.0,
        rd_lambda=0.01,
    )
    by_error = encode_update(
        update, layers_spec=spec, history=history, config=forced, seed_context=SEEDS
    )
    assert _relative_cost(update, encoded.stats.total_bytes, encoded.flat, 0.01) < _relative_cost(
        update, by_error.stats.total_bytes, by_error.flat, 0.01
    )


def test_a_larger_lambda_never_buys_a_higher_rate():
    spec = [("a", (3000,)), ("b", (50_000,))]
    update = np.random.default_rng(6).standard_t(4, 53_000).astype(np.float32)
    rates = []
    for rd_lambda in (0.001, 0.01, 0.05, 0.1, 0.3, 1.0):
        config = CodecConfig(rd_lambda=rd_lambda, censor_threshold=0.0)
        history = DeltaHistory.from_config(spec, config)
        encoded = encode_update(
            update, layers_spec=spec, history=history, config=config, seed_context=SEEDS
        )
        rates.append([layer.estimated_rate for layer in encoded.stats.layers])
    for earlier, later in itertools.pairwise(rates):
        assert all(b <= a for a, b in zip(earlier, later, strict=True))
    assert rates[0][1] > 2 * rates[-1][1]


def test_estimated_rate_of_a_large_layer_matches_the_bits_actually_sent():
    spec = [("w", (200_000,))]
    config = CodecConfig(censor_threshold=0.0)
    history = DeltaHistory.from_config(spec, config)
    update = np.random.default_rng(7).standard_t(4, 200_000).astype(np.float32)
    stats = encode_update(
        update, layers_spec=spec, history=history, config=config, seed_context=SEEDS
    ).stats
    actual = 8.0 * stats.total_bytes / 200_000
    assert stats.layers[0].estimated_rate == pytest.approx(actual, rel=0.05)
