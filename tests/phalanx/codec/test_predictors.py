from __future__ import annotations

import numpy as np
import pytest

from phalanx.codec import CodecConfig, DeltaHistory, Predictor
from phalanx.codec.predictors import mean_of_deltas, momentum_step
from tests.support.codec_builders import gradient_like, history_with


def test_mean_of_deltas_sums_in_order_then_divides():
    a = np.array([1.0, 2.0], dtype=np.float32)
    b = np.array([3.0, -2.0], dtype=np.float32)
    c = np.array([2.0, 3.0], dtype=np.float32)
    np.testing.assert_array_equal(mean_of_deltas([a, b, c]), np.array([2.0, 1.0], np.float32))


def test_momentum_step_has_no_bias_correction():
    delta = np.array([1.0, -2.0], dtype=np.float32)
    first = momentum_step(np.zeros(2, np.float32), delta, 0.9)
    np.testing.assert_allclose(first, [0.1, -0.2], rtol=1e-6)
    second = momentum_step(first, delta, 0.9)
    np.testing.assert_allclose(second, [0.19, -0.38], rtol=1e-6)


def test_an_empty_history_predicts_nothing(layout):
    history = DeltaHistory(layout)
    for predictor in Predictor:
        assert history.prediction(predictor) is None
        assert history.layer_prediction(predictor, 0) is None


def test_predictions_follow_the_last_k_pushed_deltas(layout):
    config = CodecConfig(history_length=2, momentum=0.5)
    deltas = [gradient_like(layout, seed) for seed in range(3)]
    history = history_with(layout, config, deltas)
    np.testing.assert_array_equal(history.prediction(Predictor.PREVIOUS), deltas[2])
    np.testing.assert_array_equal(history.prediction(Predictor.MEAN), mean_of_deltas(deltas[1:]))
    moment = np.zeros(layout.total, np.float32)
    for delta in deltas:
        moment = momentum_step(moment, delta, 0.5)
    np.testing.assert_array_equal(history.prediction(Predictor.MOMENTUM), moment)
    assert history.rounds == 3


def test_layer_prediction_is_the_layers_slice_and_peak_its_largest_magnitude(layout):
    history = history_with(layout, CodecConfig(), [gradient_like(layout, 1)])
    flat = history.prediction(Predictor.PREVIOUS)
    assert flat is not None
    layer = history.layer_prediction(Predictor.PREVIOUS, 2)
    assert layer is not None
    np.testing.assert_array_equal(layer, flat[layout.slice(2)])
    assert history.peak(Predictor.PREVIOUS, 2) == float(np.abs(layer).max())


def test_an_all_zero_layer_prediction_counts_as_no_prediction(layout):
    delta = gradient_like(layout, 2)
    delta[layout.slice(1)] = 0.0
    history = history_with(layout, CodecConfig(), [delta])
    assert history.layer_prediction(Predictor.PREVIOUS, 1) is None
    assert history.layer_prediction(Predictor.PREVIOUS, 0) is not None


def test_two_parties_pushing_the_same_deltas_share_a_fingerprint(layout):
    deltas = [gradient_like(layout, seed) for seed in range(2)]
    one = history_with(layout, CodecConfig(), deltas)
    two = history_with(layout, CodecConfig(), [d.copy() for d in deltas])
    assert one.fingerprint == two.fingerprint


def test_a_different_delta_or_setting_changes_the_fingerprint(layout):
    deltas = [gradient_like(layout, seed) for seed in range(2)]
    base = history_with(layout, CodecConfig(), deltas)
    changed = deltas[1].copy()
    changed[5] = np.nextafter(changed[5], np.float32(1))
    assert history_with(layout, CodecConfig(), [deltas[0], changed]).fingerprint != base.fingerprint
    other_k = history_with(layout, CodecConfig(history_length=4), deltas)
    assert other_k.fingerprint != base.fingerprint


def test_pushing_a_non_finite_delta_is_refused(layout):
    delta = gradient_like(layout, 3)
    delta[7] = np.nan
    with pytest.raises(ValueError, match="finite"):
        DeltaHistory(layout).push(delta)


def test_history_state_restores_identical_predictions_and_fingerprint(layout):
    config = CodecConfig(history_length=2)
    original = history_with(layout, config, [gradient_like(layout, s) for s in range(3)])
    restored = DeltaHistory.from_config(layout, config)
    restored.restore(original.state())
    assert restored.fingerprint == original.fingerprint
    assert restored.rounds == original.rounds
    for predictor in (Predictor.PREVIOUS, Predictor.MEAN, Predictor.MOMENTUM):
        np.testing.assert_array_equal(
            restored.prediction(predictor), original.prediction(predictor)
        )
    nxt = gradient_like(layout, 9)
    original.push(nxt)
    restored.push(nxt)
    assert restored.fingerprint == original.fingerprint


def test_predictions_are_read_only(layout):
    history = history_with(layout, CodecConfig(), [gradient_like(layout, 4)])
    prediction = history.prediction(Predictor.MEAN)
    assert prediction is not None
    with pytest.raises(ValueError):
        prediction[0] = 1.0
