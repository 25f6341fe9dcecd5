"""Low-rank coding: the factorization, its quantized factors, and the codec's low-rank layers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from phalanx.codec import (
    CodecConfig,
    CodecError,
    DeltaHistory,
    ErrorFeedback,
    Quantizer,
    decode_update_flat,
    encode_update,
    lowrank,
)
from phalanx.codec.bitstream import (
    FactorTable,
    Header,
    LayerRecord,
    read_bitstream,
    write_bitstream,
)
from phalanx.codec.lowrank import (
    FactorSlots,
    code_factors,
    matrix_shape,
    max_rank,
    quantize_factor,
    reconstruct_into,
    top_factors,
)
from phalanx.codec.predictors import Predictor
from phalanx.codec.quantizers import MAX_SYMBOL
from tests.support.codec_builders import gradient_like

FC = 2  # fc.weight (10, 200) in codec_builders.SPEC
CONFIG = CodecConfig(rd_lambda=0.1, low_rank=2, rd_sample_size=256)


def low_rank_matrix(rows: int, cols: int, rank: int, seed: int, noise: float = 0.0) -> np.ndarray:
    """A rank-``rank`` matrix with decaying singular values, plus optional full-rank noise."""
    rng = np.random.default_rng(seed)
    left = rng.normal(size=(rows, rank)) * (2.0 ** -np.arange(rank))
    matrix = left @ rng.normal(size=(rank, cols)) + noise * rng.normal(size=(rows, cols))
    return matrix.astype(np.float32)


def gradient_with_low_rank_fc(layout, seed: int) -> np.ndarray:
    """A gradient-like update whose fully connected weight is nearly rank 2, as gradients are."""
    update = gradient_like(layout, seed)
    update[layout.slice(FC)] = 1e-3 * low_rank_matrix(10, 200, 2, seed, noise=0.01).ravel()
    return update


# --------------------------------------------------------------------------- shapes and ranks


@pytest.mark.parametrize(
    ("rows", "cols", "expected"),
    [(128, 3136, 122), (10, 200, 9), (10, 128, 9), (2, 2, 1), (1, 50, 0), (3, 1, 0), (0, 5, 0)],
)
def test_max_rank_keeps_the_factors_within_the_matrix(rows, cols, expected):
    rank = max_rank(rows, cols)
    assert rank == expected
    assert rank * (rows + cols) <= rows * cols
    assert (rank + 1) * (rows + cols) > rows * cols or rank == min(rows, cols)


@pytest.mark.parametrize(
    ("shape", "expected"),
    [((10, 200), (10, 200)), ((200,), None), ((8, 1, 3, 3), None), ((1, 200), None)],
)
def test_only_two_dimensional_layers_with_a_useful_rank_are_matrices(shape, expected):
    assert matrix_shape(shape) == expected


# --------------------------------------------------------------------------- factorization


@pytest.mark.parametrize(("rows", "cols"), [(12, 40), (40, 12)])
def test_top_factors_recover_a_low_rank_matrix_strongest_direction_first(rows, cols):
    matrix = low_rank_matrix(rows, cols, 3, seed=1)
    left, right = top_factors(matrix, 3)
    assert left.shape == (3, rows) and right.shape == (3, cols)
    np.testing.assert_allclose(left.T @ right, matrix, rtol=0, atol=1e-5 * np.abs(matrix).max())
    energies = (left**2).sum(axis=1) * (right**2).sum(axis=1)
    assert np.all(np.diff(energies) < 0)


def test_top_factors_match_the_truncated_svd_in_error():
    matrix = low_rank_matrix(30, 50, 6, seed=2, noise=0.05)
    left, right = top_factors(matrix, 3)
    singular = np.linalg.svd(matrix.astype(np.float64), compute_uv=False)
    error = np.linalg.norm(matrix - left.T @ right) ** 2
    assert error == pytest.approx((singular[3:] ** 2).sum(), rel=1e-6)


def test_a_zero_matrix_has_no_factors():
    assert top_factors(np.zeros((4, 9), np.float32), 2)[0].shape == (0, 4)
    assert code_factors(np.zeros((4, 9), np.float32), 2, 0.25) is None


@pytest.mark.parametrize("scale", [1e-30, 1.0, 1e30])
def test_a_nearly_rank_one_matrix_at_any_scale_gives_finite_factors_or_none(scale):
    matrix = low_rank_matrix(16, 64, 1, seed=15) + 1e-9 * low_rank_matrix(16, 64, 16, seed=16)
    scaled = (scale * matrix.astype(np.float64)).astype(np.float32)
    coded = code_factors(scaled, 4, 0.25)
    if coded is not None:
        for factor in coded:
            assert np.isfinite(factor.values).all()
            assert np.abs(factor.symbols).max() <= MAX_SYMBOL - 1
        rebuilt = coded[0].values.astype(np.float64).T @ coded[1].values.astype(np.float64)
        target = scaled.astype(np.float64)
        assert np.linalg.norm(rebuilt - target) <= 0.1 * np.linalg.norm(target)


def test_a_rank_below_one_is_refused():
    with pytest.raises(ValueError, match="rank"):
        top_factors(np.ones((3, 3), np.float32), 0)


@pytest.mark.parametrize("multiplier", [0.25, 1e-6])
def test_factors_round_to_the_nearest_step_within_the_symbol_range(multiplier):
    factor = np.ones((2, 100))
    factor[0, 0] = 1e9
    coded = quantize_factor(factor, multiplier)
    assert np.abs(coded.symbols).max() <= MAX_SYMBOL - 1  # the step grew to fit a tiny multiplier
    np.testing.assert_array_equal(coded.values, coded.symbols * coded.step)
    assert np.abs(coded.values - factor).max() <= 0.5 * coded.step * (1 + 1e-6)


def test_refitting_the_right_factor_to_the_rounded_left_lowers_the_error():
    matrix = low_rank_matrix(20, 300, 4, seed=3, noise=0.02)
    left, right = top_factors(matrix, 4)
    plain_left, plain_right = quantize_factor(left, 1.0), quantize_factor(right, 1.0)
    plain = np.linalg.norm(matrix - plain_left.values.T @ plain_right.values)
    coded = code_factors(matrix, 4, 1.0)
    assert coded is not None
    refit = np.linalg.norm(matrix - coded[0].values.T @ coded[1].values)
    assert refit < plain


def test_finer_steps_give_smaller_errors():
    matrix = low_rank_matrix(20, 300, 4, seed=4)
    errors = []
    for step in (1.0, 0.25, 0.05):
        coded = code_factors(matrix, 4, step)
        assert coded is not None
        errors.append(np.linalg.norm(matrix - coded[0].values.T @ coded[1].values))
    assert errors[0] > errors[1] > errors[2]


# --------------------------------------------------------------------------- reconstruction


def test_reconstruction_adds_the_rounded_products_in_component_order():
    rng = np.random.default_rng(5)
    left = rng.normal(size=(3, 4)).astype(np.float32)
    right = rng.normal(size=(3, 5)).astype(np.float32)
    out = np.empty(20, dtype=np.float32)
    reconstruct_into(left, right, out)
    for i in range(4):
        for j in range(5):
            expected = np.float32(left[0, i] * right[0, j])
            for k in (1, 2):
                expected = np.float32(expected + np.float32(left[k, i] * right[k, j]))
            assert out[i * 5 + j].tobytes() == expected.tobytes()


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(1, 30), st.integers(1, 30), st.integers(0, 2**32 - 1))
def test_reconstruction_is_the_product_of_the_factors(rank, rows, cols, seed):
    rng = np.random.default_rng(seed)
    left = rng.normal(size=(rank, rows)).astype(np.float32)
    right = rng.normal(size=(rank, cols)).astype(np.float32)
    out = np.empty((rows, cols), dtype=np.float32)
    reconstruct_into(left, right, out)
    exact = left.astype(np.float64).T @ right.astype(np.float64)
    scale = np.abs(left).max() * np.abs(right).max() * rank
    np.testing.assert_allclose(out, exact, rtol=0, atol=4 * rank * 6e-8 * scale)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 40), st.integers(2, 40), st.data(), st.sampled_from([lowrank.BLOCK, 1, 7, 64])
)
def test_factors_kept_inside_the_layer_rebuild_it_bit_for_bit(rows, cols, data, block):
    assume(max_rank(rows, cols) >= 1)
    rank = data.draw(st.integers(1, max_rank(rows, cols)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    # Magnitudes over many binades, so every rounding of the sums shows.
    left = (rng.normal(size=(rank, rows)) * 2.0 ** rng.integers(-20, 20, (rank, 1))).astype(
        np.float32
    )
    right = rng.normal(size=(rank, cols)).astype(np.float32)
    expected = np.empty(rows * cols, dtype=np.float32)
    reconstruct_into(left, right, expected)

    layer = np.full(rows * cols, np.nan, dtype=np.float32)
    slots = FactorSlots(layer, rows, cols, rank)
    values = iter(left.ravel())
    for part in slots.left():
        part[:] = [next(values) for _ in range(part.size)]
    slots.right[:] = right.ravel()
    original = lowrank.BLOCK
    lowrank.BLOCK = block  # small blocks: every row and column block boundary
    try:
        slots.rebuild()
    finally:
        lowrank.BLOCK = original
    assert layer.tobytes() == expected.tobytes()
    assert slots.corner.shape == (rank, rank)


def test_factor_slots_refuse_a_rank_that_does_not_fit_the_layer():
    with pytest.raises(ValueError, match="does not fit"):
        FactorSlots(np.empty(20, dtype=np.float32), 4, 5, max_rank(4, 5) + 1)


# --------------------------------------------------------------------------- in the codec


def _encode(update, layout, config=CONFIG, file=0):
    history = DeltaHistory.from_config(layout, config)
    return encode_update(
        update, layers_spec=layout, history=history, config=config, seed_context=(3, 1, file)
    )


def test_a_nearly_low_rank_layer_is_sent_as_factors_and_decodes_bit_for_bit(layout):
    update = gradient_with_low_rank_fc(layout, 6)
    encoded = _encode(update, layout)
    stats = encoded.stats.layers[FC]
    assert stats.quantizer is Quantizer.LOWRANK and 1 <= stats.rank <= CONFIG.low_rank
    assert stats.estimated_distortion < 0.05
    history = DeltaHistory.from_config(layout, CONFIG)
    decoded = decode_update_flat(
        encoded.payload, layers_spec=layout, history=history, config=CONFIG
    )
    assert decoded.tobytes() == encoded.flat.tobytes()
    fc = layout.slice(FC)
    assert np.linalg.norm(decoded[fc] - update[fc]) < 0.2 * np.linalg.norm(update[fc])


def test_factors_cost_far_fewer_bits_than_the_layer_sent_plainly(layout):
    update = gradient_with_low_rank_fc(layout, 7)
    low = _encode(update, layout).stats.layers[FC]
    plain = _encode(update, layout, CodecConfig(rd_lambda=0.1, rd_sample_size=256))
    assert plain.stats.layers[FC].quantizer is not Quantizer.LOWRANK
    assert low.entropy_bits < 0.5 * plain.stats.layers[FC].entropy_bits


def test_replicas_of_a_file_send_identical_low_rank_payloads(layout):
    update = gradient_with_low_rank_fc(layout, 8)
    assert _encode(update, layout).payload == _encode(update.copy(), layout).payload


def test_a_full_rank_layer_keeps_the_other_quantizers(layout):
    update = gradient_like(layout, 10)  # i.i.d. entries: no direction dominates
    assert _encode(update, layout).stats.layers[FC].quantizer is not Quantizer.LOWRANK


def test_the_rank_never_exceeds_the_config_or_the_layer(layout):
    update = gradient_like(layout, 11)
    update[layout.slice(FC)] = 1e-3 * low_rank_matrix(10, 200, 9, 11).ravel()
    config = CodecConfig(rd_lambda=0.01, low_rank=50, rd_sample_size=256)
    stats = _encode(update, layout, config).stats.layers[FC]
    assert stats.quantizer is Quantizer.LOWRANK and stats.rank == max_rank(10, 200)


def test_a_decoder_whose_config_allows_a_lower_rank_refuses_the_payload(layout):
    encoded = _encode(gradient_with_low_rank_fc(layout, 12), layout)
    rank = encoded.stats.layers[FC].rank
    for allowed, message in ((0, "none"), (rank - 1, f"at most {rank - 1}")):
        config = CodecConfig(rd_lambda=0.1, low_rank=allowed, rd_sample_size=256)
        with pytest.raises(CodecError, match=message):
            decode_update_flat(
                encoded.payload,
                layers_spec=layout,
                history=DeltaHistory.from_config(layout, config),
                config=config,
            )


# --------------------------------------------------------------------------- the bitstream


def _table(step: float = 0.5) -> FactorTable:
    return FactorTable(step, -1, np.array([1, 2, 1], dtype=np.int64))


def _records(layout, low_rank: LayerRecord) -> list[LayerRecord]:
    records = [LayerRecord(Predictor.ZERO, Quantizer.CENSORED) for _ in layout.shapes]
    records[FC] = low_rank
    return records


def _written(layout, records, config: CodecConfig = CONFIG) -> bytes:
    history = DeltaHistory.from_config(layout, config)
    header = Header(layout.fingerprint, history.fingerprint[:8])
    return write_bitstream(header, records, layout, np.zeros(0, dtype=np.uint32))[0]


def test_a_low_rank_record_round_trips_through_the_layer_table(layout):
    record = LayerRecord(
        Predictor.MEAN, Quantizer.LOWRANK, 0.5, rank=3, factors=(_table(0.5), _table(2.0))
    )
    _, records, _ = read_bitstream(_written(layout, _records(layout, record)), layout)
    read = records[FC]
    assert (read.predictor, read.quantizer, read.gain, read.rank) == (
        Predictor.MEAN,
        Quantizer.LOWRANK,
        0.5,
        3,
    )
    assert [(t.step, t.sym_min, t.frequencies.tolist()) for t in read.factors] == [
        (0.5, -1, [1, 2, 1]),
        (2.0, -1, [1, 2, 1]),
    ]


@pytest.mark.parametrize("rank", [0, 10, 1 << 20])
def test_a_rank_outside_the_layer_s_range_is_refused_before_any_allocation(layout, rank):
    record = LayerRecord(Predictor.ZERO, Quantizer.LOWRANK, rank=rank, factors=(_table(), _table()))
    with pytest.raises(CodecError, match="rank"):
        read_bitstream(_written(layout, _records(layout, record)), layout)


def test_a_low_rank_record_on_a_layer_that_is_no_matrix_is_refused(layout):
    records = [LayerRecord(Predictor.ZERO, Quantizer.CENSORED) for _ in layout.shapes]
    records[0] = LayerRecord(
        Predictor.ZERO, Quantizer.LOWRANK, rank=1, factors=(_table(), _table())
    )
    with pytest.raises(CodecError, match="2-D layers only"):
        read_bitstream(_written(layout, records), layout)


def test_factors_whose_product_overflows_float32_are_refused(layout):
    huge = FactorTable(1e30, 1, np.ones(1, dtype=np.int64))
    record = LayerRecord(Predictor.ZERO, Quantizer.LOWRANK, rank=1, factors=(huge, huge))
    config = CodecConfig(low_rank=4)
    with pytest.raises(CodecError, match="beyond float32"):
        decode_update_flat(
            _written(layout, _records(layout, record), config),
            layers_spec=layout,
            history=DeltaHistory.from_config(layout, config),
            config=config,
        )


# --------------------------------------------------------------------------- error feedback


def test_error_feedback_carries_the_truncation_and_not_the_stochastic_rounding(layout):
    config = CodecConfig(
        rd_lambda=0.1, low_rank=2, unbiased=True, error_feedback=True, rd_sample_size=256
    )
    history = DeltaHistory.from_config(layout, config)
    feedback = ErrorFeedback(layout)
    update = gradient_with_low_rank_fc(layout, 13)
    encoded = feedback.encode(update, history=history, config=config, seed_context=(0, 1, 0))
    for layer, stats in enumerate(encoded.stats.layers):
        carried = feedback.memory[layout.slice(layer)]
        if stats.quantizer is Quantizer.LOWRANK:
            expected = update[layout.slice(layer)] - encoded.flat[layout.slice(layer)]
            np.testing.assert_array_equal(carried, expected)
            assert carried.any()
        elif stats.quantizer in (Quantizer.UNIFORM, Quantizer.TERNARY):
            assert not carried.any()
    assert encoded.stats.layers[FC].quantizer is Quantizer.LOWRANK


def test_error_feedback_pays_back_what_the_low_rank_truncation_left_out(layout):
    config = CodecConfig(rd_lambda=0.1, low_rank=2, error_feedback=True, rd_sample_size=256)
    history = DeltaHistory.from_config(layout, config)
    feedback = ErrorFeedback(layout)
    fc = layout.slice(FC)
    # Three fixed directions, the third always too weak for a rank-2 truncation.
    steady = 1e-3 * low_rank_matrix(10, 200, 3, seed=14).ravel()
    owed_with, owed_without = np.zeros(2000), np.zeros(2000)
    for round_ in range(10):
        update = gradient_like(layout, 100 + round_)
        update[fc] = steady + 1e-5 * gradient_like(layout, 200 + round_)[fc]
        with_feedback = feedback.encode(
            update, history=history, config=config, seed_context=(0, round_, 0)
        )
        plain = encode_update(
            update, layers_spec=layout, history=history, config=config, seed_context=(0, round_, 0)
        )
        assert with_feedback.stats.layers[FC].quantizer is Quantizer.LOWRANK
        owed_with += update[fc] - with_feedback.flat[fc]
        owed_without += update[fc] - plain.flat[fc]
    np.testing.assert_allclose(owed_with, feedback.memory[fc], rtol=0, atol=1e-8)
    # Without feedback the third direction is owed ten times over; with it, it gets sent.
    assert np.linalg.norm(owed_with) < 0.2 * np.linalg.norm(owed_without)


# --------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("low_rank", -1, "low_rank"), ("low_rank_step", 0.0, "low_rank_step")],
)
def test_impossible_low_rank_settings_are_refused(field, value, message):
    with pytest.raises(ValueError, match=message):
        CodecConfig(**{field: value})
