from __future__ import annotations

import numpy as np
import pytest

from phalanx.codec import (
    CodecConfig,
    CodecError,
    DeltaHistory,
    Predictor,
    Quantizer,
    decode_update,
    decode_update_flat,
    encode_update,
)
from phalanx.codec.layers import layer_layout
from phalanx.codec.ratedistortion import residual
from phalanx.codec.varints import encode_varint
from tests.support.codec_builders import SPEC, correlated_rounds, gradient_like, history_with

SEEDS = (11, 3, 5)


def _bits(array: np.ndarray) -> np.ndarray:
    return np.asarray(array, dtype=np.float32).view(np.uint32)


def _encode(update, layout, history, config, seeds=SEEDS):
    return encode_update(
        update, layers_spec=layout, history=history, config=config, seed_context=seeds
    )


def _decode(payload, layout, history, config):
    return decode_update_flat(payload, layers_spec=layout, history=history, config=config)


def _warm(layout, config, rounds=3):
    deltas = correlated_rounds(layout, 40, rounds + 1)
    return history_with(layout, config, deltas[:-1]), deltas[-1]


QUANTIZERS = {
    Quantizer.UNIFORM: {"step_sizes": (0.5,), "ternary": False},
    Quantizer.TERNARY: {"step_sizes": (), "ternary": True},
}


@pytest.mark.parametrize("predictor", list(Predictor))
@pytest.mark.parametrize("quantizer", list(QUANTIZERS))
def test_every_predictor_and_quantizer_round_trips_bit_for_bit(layout, predictor, quantizer):
    config = CodecConfig(
        predictors=(predictor,), censor_threshold=0.0, rd_sample_size=64, **QUANTIZERS[quantizer]
    )
    history, next_delta = _warm(layout, config)
    update = (0.8 * next_delta + 0.2 * gradient_like(layout, 77)).astype(np.float32)
    encoded = _encode(update, layout, history, config)
    for stats in encoded.stats.layers:
        assert (stats.predictor, stats.quantizer) == (predictor, quantizer)
    decoded = _decode(encoded.payload, layout, history, config)
    np.testing.assert_array_equal(_bits(decoded), _bits(encoded.flat))
    if quantizer is Quantizer.UNIFORM:
        # Mid-tread: every coordinate within half a step of the update.
        steps = np.repeat([s.step for s in encoded.stats.layers], layout.sizes)
        assert np.all(np.abs(decoded - update) <= 0.5 * steps * (1 + 1e-5) + 1e-12)


def test_decode_update_returns_layers_in_the_model_shapes(layout):
    config = CodecConfig()
    history = DeltaHistory.from_config(layout, config)
    encoded = _encode(gradient_like(layout, 1), layout, history, config)
    layers = decode_update(encoded.payload, layers_spec=layout, history=history, config=config)
    assert [layer.shape for layer in layers] == list(layout.shapes)
    for got, want in zip(layers, encoded.reconstruction, strict=True):
        np.testing.assert_array_equal(_bits(got), _bits(want))


def test_per_layer_input_and_flat_input_give_the_same_payload(layout):
    config = CodecConfig()
    history = DeltaHistory.from_config(layout, config)
    flat = gradient_like(layout, 2)
    layers = [flat[layout.slice(i)].reshape(s) for i, s in enumerate(layout.shapes)]
    assert (
        _encode(flat, layout, history, config).payload
        == _encode(layers, SPEC, history, config).payload
    )


@pytest.mark.parametrize("ternary_only", [False, True])
def test_two_honest_replicas_produce_byte_identical_payloads(layout, ternary_only):
    config = CodecConfig(step_sizes=() if ternary_only else (0.5, 1.0, 2.0), ternary=True)
    deltas = correlated_rounds(layout, 8, 4)
    # Two workers, each with its own history built from the same broadcasts.
    worker_a = history_with(layout, config, deltas[:3])
    worker_b = history_with(layout, config, [d.copy() for d in deltas[:3]])
    update = deltas[3]
    a = _encode(update, layout, worker_a, config)
    b = _encode(update.copy(), layout, worker_b, config)
    assert a.payload == b.payload
    np.testing.assert_array_equal(_bits(a.flat), _bits(b.flat))


def test_another_file_draws_other_ternary_symbols(layout):
    config = CodecConfig(step_sizes=(), ternary=True, censor_threshold=0.0)
    history = DeltaHistory.from_config(layout, config)
    update = gradient_like(layout, 5)
    first = _encode(update, layout, history, config, seeds=(1, 2, 3))
    other_file = _encode(update, layout, history, config, seeds=(1, 2, 4))
    assert first.payload != other_file.payload


def test_stats_count_every_byte_of_the_payload(layout):
    config = CodecConfig()
    history, update = _warm(layout, config)
    stats = _encode(update, layout, history, config).stats
    assert stats.total_bytes == stats.side_bytes + stats.coded_bytes
    assert stats.coded_bits <= 8 * stats.coded_bytes
    assert stats.coded_bits == sum(layer.coded_bits for layer in stats.layers)
    assert stats.input_bytes == 4 * layout.total
    assert stats.compression_ratio == pytest.approx(stats.input_bytes / stats.total_bytes)


def test_coded_bits_stay_close_to_the_empirical_entropy_of_the_symbols():
    spec = [("w", (200, 500))]
    config = CodecConfig(step_sizes=(1.0,), ternary=False)
    history = DeltaHistory.from_config(spec, config)
    update = np.random.default_rng(3).standard_normal(100_000).astype(np.float32)
    stats = encode_update(
        update, layers_spec=spec, history=history, config=config, seed_context=SEEDS
    ).stats
    assert stats.coder_overhead < 0.01


def test_an_empty_history_falls_back_to_the_zero_predictor(layout):
    config = CodecConfig(predictors=(Predictor.MEAN,), censor_threshold=0.0)
    history = DeltaHistory.from_config(layout, config)
    encoded = _encode(gradient_like(layout, 6), layout, history, config)
    assert {s.predictor for s in encoded.stats.layers} == {Predictor.ZERO}


def test_a_layer_its_prediction_explains_is_censored_to_a_flag(layout):
    config = CodecConfig(censor_threshold=0.05)
    delta = gradient_like(layout, 7)
    history = history_with(layout, config, [delta])
    update = delta.copy()
    update[layout.slice(2)] *= np.float32(-3.0)  # a gradient against -lr * g: the gain finds it
    update[layout.slice(3)] = gradient_like(layout, 8)[layout.slice(3)]  # unexplained
    encoded = _encode(update, layout, history, config)
    kinds = [s.quantizer for s in encoded.stats.layers]
    assert kinds[:3] == [Quantizer.CENSORED] * 3 and kinds[3] is not Quantizer.CENSORED
    assert encoded.stats.layers[2].gain == pytest.approx(-3.0)
    np.testing.assert_array_equal(encoded.flat[:2080], update[:2080])
    decoded = _decode(encoded.payload, layout, history, config)
    np.testing.assert_array_equal(_bits(decoded), _bits(encoded.flat))


def test_an_all_zero_update_costs_a_tag_byte_per_layer(layout):
    config = CodecConfig(censor_threshold=0.0)
    history = DeltaHistory.from_config(layout, config)
    encoded = _encode(np.zeros(layout.total, np.float32), layout, history, config)
    assert all(s.quantizer is Quantizer.CENSORED for s in encoded.stats.layers)
    # header 19 bytes, then per layer: shape bytes + one tag byte, then an empty word count.
    shape_bytes = sum(1 + sum(len(encode_varint(d)) for d in shape) for shape in layout.shapes)
    assert encoded.stats.total_bytes == 19 + shape_bytes + len(layout) + 1
    np.testing.assert_array_equal(_decode(encoded.payload, layout, history, config), 0.0)


def test_a_constant_layer_is_one_symbol_and_costs_no_coded_bits():
    spec = [("w", (1000,))]
    config = CodecConfig(step_sizes=(1.0,), ternary=False, censor_threshold=0.0)
    history = DeltaHistory.from_config(spec, config)
    encoded = encode_update(
        np.full(1000, 0.25, np.float32),
        layers_spec=spec,
        history=history,
        config=config,
        seed_context=SEEDS,
    )
    assert encoded.stats.layers[0].alphabet == 1 and encoded.stats.coded_bits == 0
    decoded = decode_update_flat(encoded.payload, layers_spec=spec, history=history, config=config)
    np.testing.assert_array_equal(decoded, 0.25)


def test_a_sparse_layer_the_sample_misses_still_round_trips():
    spec = [("w", (100_000,))]
    config = CodecConfig(rd_sample_size=256, censor_threshold=0.0)
    history = DeltaHistory.from_config(spec, config)
    update = np.zeros(100_000, np.float32)
    update[[1, 99_991]] = [3.0, -7.0]
    encoded = encode_update(
        update, layers_spec=spec, history=history, config=config, seed_context=SEEDS
    )
    decoded = decode_update_flat(encoded.payload, layers_spec=spec, history=history, config=config)
    np.testing.assert_array_equal(_bits(decoded), _bits(encoded.flat))
    assert np.count_nonzero(decoded) >= 1


def test_an_outlier_widens_the_step_instead_of_overflowing_the_alphabet():
    spec = [("w", (50_000,))]
    config = CodecConfig(step_sizes=(0.25,), ternary=False, censor_threshold=0.0, rd_sample_size=0)
    history = DeltaHistory.from_config(spec, config)
    update = np.random.default_rng(4).standard_normal(50_000).astype(np.float32) * 1e-3
    update[123] = 1e4
    encoded = encode_update(
        update, layers_spec=spec, history=history, config=config, seed_context=SEEDS
    )
    assert encoded.stats.layers[0].alphabet <= 1 << 16
    decoded = decode_update_flat(encoded.payload, layers_spec=spec, history=history, config=config)
    assert abs(float(decoded[123]) - 1e4) <= 0.5 * encoded.stats.layers[0].step * 1.001


def test_a_non_finite_update_is_refused_naming_the_layer(layout):
    config = CodecConfig()
    update = gradient_like(layout, 9)
    update[2085] = np.inf
    with pytest.raises(ValueError, match=r"fc\.bias"):
        _encode(update, layout, DeltaHistory.from_config(layout, config), config)


def test_a_decoder_whose_history_missed_a_broadcast_refuses_the_payload(layout):
    config = CodecConfig()
    deltas = correlated_rounds(layout, 12, 3)
    sender = history_with(layout, config, deltas[:2])
    behind = history_with(layout, config, deltas[:1])
    payload = _encode(deltas[2], layout, sender, config).payload
    with pytest.raises(CodecError, match="another history"):
        _decode(payload, layout, behind, config)


def test_a_payload_using_a_quantizer_the_config_disables_is_refused(layout):
    sender_config = CodecConfig(step_sizes=(), ternary=True, censor_threshold=0.0)
    history = DeltaHistory.from_config(layout, sender_config)
    payload = _encode(gradient_like(layout, 10), layout, history, sender_config).payload
    receiver_config = CodecConfig(step_sizes=(1.0,), ternary=False, censor_threshold=0.0)
    with pytest.raises(CodecError, match="ternary"):
        _decode(payload, layout, DeltaHistory.from_config(layout, receiver_config), receiver_config)


def test_a_history_with_other_settings_than_the_config_is_a_usage_error(layout):
    config = CodecConfig(history_length=3)
    with pytest.raises(ValueError, match="from_config"):
        _encode(gradient_like(layout, 1), layout, DeltaHistory(layout, depth=5), config)


def test_seed_context_entries_must_be_non_negative(layout):
    config = CodecConfig()
    with pytest.raises(ValueError, match="seed_context"):
        _encode(
            gradient_like(layout, 1),
            layout,
            DeltaHistory.from_config(layout, config),
            config,
            seeds=(1, -2, 3),
        )


def test_a_good_predictor_cuts_the_rate_at_equal_lambda(layout):
    config = CodecConfig(censor_threshold=0.0)
    deltas = correlated_rounds(layout, 21, 6, rho=0.98)
    cold = DeltaHistory.from_config(layout, config)
    warm = history_with(layout, config, deltas[:5])
    update = deltas[5]
    without = _encode(update, layout, cold, config).stats
    with_history = _encode(update, layout, warm, config).stats
    assert with_history.total_bytes < 0.8 * without.total_bytes
    assert any(s.predictor is not Predictor.ZERO for s in with_history.layers)


def test_values_too_small_for_a_float32_step_still_round_trip():
    spec = [("w", (5000,))]
    config = CodecConfig(censor_threshold=0.0)
    history = DeltaHistory.from_config(spec, config)
    update = np.random.default_rng(5).standard_normal(5000).astype(np.float32) * np.float32(1e-44)
    encoded = encode_update(
        update, layers_spec=spec, history=history, config=config, seed_context=SEEDS
    )
    decoded = decode_update_flat(encoded.payload, layers_spec=spec, history=history, config=config)
    np.testing.assert_array_equal(_bits(decoded), _bits(encoded.flat))
    assert np.isfinite(decoded).all()


def test_a_prediction_that_would_overflow_falls_back_to_no_prediction():
    spec = [("w", (5000,))]
    config = CodecConfig(predictors=(Predictor.PREVIOUS,), fit_gain=False, censor_threshold=0.0)
    rng = np.random.default_rng(6)
    delta = np.where(rng.random(5000) < 0.5, 3.4e38, -3.4e38).astype(np.float32)
    history = history_with(layer_layout(spec), config, [delta])
    update = (rng.standard_normal(5000) * 1e30).astype(np.float32)
    encoded = encode_update(
        update, layers_spec=spec, history=history, config=config, seed_context=SEEDS
    )
    assert encoded.stats.layers[0].predictor is Predictor.ZERO
    decoded = decode_update_flat(encoded.payload, layers_spec=spec, history=history, config=config)
    np.testing.assert_array_equal(_bits(decoded), _bits(encoded.flat))
    assert np.isfinite(decoded).all()


def test_an_update_beyond_the_representable_magnitude_is_refused(layout):
    config = CodecConfig()
    update = gradient_like(layout, 1)
    update[0] = 1e37
    with pytest.raises(ValueError, match="magnitude"):
        _encode(update, layout, DeltaHistory.from_config(layout, config), config)


def test_a_payload_with_gains_is_refused_when_the_config_fits_none(layout):
    sender = CodecConfig()
    history, update = _warm(layout, sender)
    payload = _encode(-0.5 * update, layout, history, sender).payload
    receiver = CodecConfig(fit_gain=False)
    with pytest.raises(CodecError, match="gain"):
        _decode(payload, layout, history, receiver)


@pytest.mark.parametrize("quantizer", list(QUANTIZERS))
def test_unbiased_payloads_round_trip_bit_for_bit_with_either_decoder_config(layout, quantizer):
    config = CodecConfig(
        censor_threshold=0.0, rd_sample_size=64, unbiased=True, **QUANTIZERS[quantizer]
    )
    history, next_delta = _warm(layout, config)
    update = (0.8 * next_delta + 0.2 * gradient_like(layout, 78)).astype(np.float32)
    encoded = _encode(update, layout, history, config)
    assert {s.quantizer for s in encoded.stats.layers} == {quantizer}
    for decoder_config in (config, CodecConfig(**{**vars(config), "unbiased": False})):
        decoded = _decode(encoded.payload, layout, history, decoder_config)
        np.testing.assert_array_equal(_bits(decoded), _bits(encoded.flat))
    # Stochastic rounding: within one step (not half) of the update.
    steps = np.repeat([s.step for s in encoded.stats.layers], layout.sizes)
    assert np.all(np.abs(decoded - update) <= steps * (1 + 1e-5) + 1e-12)
    if quantizer is Quantizer.TERNARY:
        # The ternary scale is each layer's residual peak: nothing is clipped.
        for i, stats in enumerate(encoded.stats.layers):
            prediction = history.layer_prediction(stats.predictor, i)
            part = update[layout.slice(i)]
            left = (
                residual(part, prediction, np.float32(stats.gain))
                if prediction is not None
                else part
            )
            assert stats.step == np.abs(left).max()


def test_unbiased_honest_replicas_agree_byte_for_byte_and_other_files_draw_otherwise(layout):
    config = CodecConfig(unbiased=True)
    deltas = correlated_rounds(layout, 9, 4)
    worker_a = history_with(layout, config, deltas[:3])
    worker_b = history_with(layout, config, [d.copy() for d in deltas[:3]])
    update = (0.5 * deltas[3] + 0.5 * gradient_like(layout, 12)).astype(np.float32)
    a = _encode(update, layout, worker_a, config)
    b = _encode(update.copy(), layout, worker_b, config)
    assert a.payload == b.payload
    assert _encode(update, layout, worker_a, config, seeds=(11, 3, 6)).payload != a.payload


def test_unbiased_reconstructions_average_to_the_update_where_rounding_to_nearest_does_not(
    layout,
):
    # A large step: rounding to nearest sends most residuals as the prediction alone.
    base = {"step_sizes": (4.0,), "ternary": False, "censor_threshold": 0.0, "rd_sample_size": 0}
    history, next_delta = _warm(layout, CodecConfig(**base))
    update = (0.5 * next_delta + 0.5 * gradient_like(layout, 79)).astype(np.float64)
    nearest = _encode(update, layout, history, CodecConfig(**base)).flat.astype(np.float64)
    unbiased = CodecConfig(**base, unbiased=True)
    draws = 300
    mean = (
        sum(
            _encode(update, layout, history, unbiased, seeds=(11, 3, file)).flat.astype(np.float64)
            for file in range(draws)
        )
        / draws
    )
    bias_nearest = np.sum((nearest - update) ** 2)
    bias_unbiased = np.sum((mean - update) ** 2)
    assert bias_nearest > 0.1 * np.sum(update**2)
    assert bias_unbiased < 0.05 * bias_nearest


def _relative_errors(update: np.ndarray, decoded: np.ndarray, layout) -> list[float]:
    errors = []
    for start, size in zip(np.cumsum([0, *layout.sizes[:-1]]), layout.sizes, strict=True):
        part = update[start : start + size].astype(np.float64)
        error = decoded[start : start + size].astype(np.float64) - part
        errors.append(float(np.sum(error**2) / np.sum(part**2)))
    return errors


def test_layer_distortion_codes_a_layer_of_small_gradients_as_finely_as_the_others(layout):
    # fc.weight (2,000 of 2,090 parameters) carries gradients 1,000 times smaller than
    # the rest: measured against the whole update it is noise, measured against
    # itself (as Adam on the server sees it) it is most of the model.
    update = gradient_like(layout, 5)
    fc = slice(sum(layout.sizes[:2]), sum(layout.sizes[:3]))
    update[fc] *= 1e-3
    base = {"step_sizes": (0.25, 1.0, 4.0), "censor_threshold": 0.0, "rd_lambda": 0.3}
    cold = DeltaHistory.from_config(layout, CodecConfig(**base))
    by_update = _relative_errors(
        update, _encode(update, layout, cold, CodecConfig(**base)).flat, layout
    )
    layer = CodecConfig(**base, rd_distortion="layer")
    encoded = _encode(update, layout, cold, layer)
    by_layer = _relative_errors(update, encoded.flat, layout)
    assert by_update[2] > 0.5  # the small layer is sent as little more than noise
    assert by_layer[2] < 0.2 * by_update[2]
    assert by_layer[2] < 2.0 * min(by_layer[0], by_layer[3])
    assert np.array_equal(_decode(encoded.payload, layout, cold, layer), encoded.flat)


def test_an_unknown_distortion_measure_is_refused():
    with pytest.raises(ValueError, match="rd_distortion"):
        CodecConfig(rd_distortion="adam")  # type: ignore[arg-type]


def test_correlated_rounding_keeps_replicas_identical_and_cancels_error_across_files(layout):
    base = {"step_sizes": (4.0,), "censor_threshold": 0.0, "unbiased": True}
    history, next_delta = _warm(layout, CodecConfig(**base))
    # A round of files: one shared gradient plus each file's own sampling noise.
    shared = (0.5 * next_delta + 0.5 * gradient_like(layout, 80)).astype(np.float32)
    files = [(shared + 0.3 * gradient_like(layout, 100 + f)).astype(np.float32) for f in range(35)]
    truth = np.mean(files, axis=0, dtype=np.float64)

    def aggregate_error(config: CodecConfig) -> float:
        decoded = []
        for f, update in enumerate(files):
            encoded = _encode(update, layout, history, config, seeds=(11, 3, f))
            # The decoder does not read the rounding: the default config decodes it.
            plain = _decode(encoded.payload, layout, history, CodecConfig(**base))
            np.testing.assert_array_equal(_bits(plain), _bits(encoded.flat))
            decoded.append(plain)
        return float(np.sum((np.mean(decoded, axis=0, dtype=np.float64) - truth) ** 2))

    correlated = CodecConfig(**base, rounding="correlated")
    replica = _encode(files[4].copy(), layout, history, correlated, seeds=(11, 3, 4))
    assert (
        replica.payload == _encode(files[4], layout, history, correlated, seeds=(11, 3, 4)).payload
    )
    assert aggregate_error(correlated) < 0.7 * aggregate_error(CodecConfig(**base))


def test_an_unknown_rounding_is_refused():
    with pytest.raises(ValueError, match="rounding"):
        CodecConfig(rounding="shared")  # type: ignore[arg-type]
