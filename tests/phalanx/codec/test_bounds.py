"""Exact float32 bounds on a layer's reconstruction, from its layer-table row."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.codec import (
    CodecConfig,
    CodecError,
    Predictor,
    Quantizer,
    decode_update_flat,
    layer_layout,
)
from phalanx.codec.bitstream import FactorTable, LayerRecord
from phalanx.codec.bounds import low_rank_peak, reconstruction_peak, table_peak
from phalanx.codec.lowrank import max_rank, reconstruct_into
from phalanx.codec.quantizers import MAX_SYMBOL, add_prediction
from tests.support.codec_builders import history_with
from tests.support.forged_payloads import forge

F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).smallest_subnormal)
_F32 = st.floats(min_value=F32_TINY, max_value=F32_MAX, width=32)
_EDGES = st.sampled_from([F32_MAX, 3.0e38, 1.8446743e19, 1.0, 1e-38, F32_TINY])
_STEPS = st.one_of(_EDGES, _F32)
_GAINS = st.one_of(st.just(1.0), st.just(0.0), _EDGES, _F32, _F32.map(lambda x: -x))


def _sign_table_values(step: float, sym_min: int, alphabet: int) -> np.ndarray:
    """Every symbol's value, computed as the decoder computes it."""
    values = np.arange(alphabet, dtype=np.float32) + np.float32(sym_min)
    with np.errstate(over="ignore"):
        return values * np.float32(step)


@settings(max_examples=300, deadline=None)
@given(
    _STEPS,
    st.integers(min_value=-MAX_SYMBOL, max_value=MAX_SYMBOL),
    st.integers(min_value=1, max_value=5),
    _GAINS,
    st.one_of(st.just(0.0), _EDGES, _F32),
)
def test_the_bound_is_what_the_decoder_computes_at_the_worst_coordinate(
    step, sym_min, alphabet, gain, prediction_peak
):
    alphabet = min(alphabet, MAX_SYMBOL - sym_min + 1)
    values = _sign_table_values(step, sym_min, alphabet)
    # Every symbol against the prediction's peak, of either sign: the largest is the bound.
    out = np.repeat(values, 2)
    prediction = np.tile(np.float32([prediction_peak, -prediction_peak]), alphabet)
    with np.errstate(over="ignore", invalid="ignore"):
        add_prediction(out, prediction, np.float32(gain))
    peak = reconstruction_peak(table_peak(step, sym_min, alphabet), gain, prediction_peak)
    if np.isfinite(peak):
        assert np.isfinite(out).all()
        assert np.abs(out).max() == peak  # reached, not only bounded
    else:
        assert not np.isfinite(out).all()


@settings(max_examples=200, deadline=None)
@given(_STEPS, _STEPS, st.integers(min_value=1, max_value=40), st.data())
def test_the_low_rank_bound_is_the_decoder_s_sum_of_the_largest_values(
    left_step, right_step, rank, data
):
    left_symbol = data.draw(st.integers(min_value=-MAX_SYMBOL, max_value=MAX_SYMBOL))
    right_symbol = data.draw(st.integers(min_value=-MAX_SYMBOL, max_value=MAX_SYMBOL))
    left = _sign_table_values(left_step, left_symbol, 1)
    right = _sign_table_values(right_step, right_symbol, 1)
    out = np.empty(6, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        reconstruct_into(np.tile(left, (rank, 2)), np.tile(right, (rank, 3)), out)
    peak = low_rank_peak(
        table_peak(left_step, left_symbol, 1), table_peak(right_step, right_symbol, 1), rank
    )
    if np.isfinite(peak):
        np.testing.assert_array_equal(np.abs(out), peak)
    else:
        assert not np.isfinite(out).all()


def test_an_infinite_factor_has_no_finite_bound_even_against_a_zero_factor():
    infinite = table_peak(3e38, 2, 1)
    assert infinite == np.inf
    assert low_rank_peak(infinite, np.float32(0.0), 1) == np.inf
    assert low_rank_peak(np.float32(0.0), infinite, 3) == np.inf


# --------------------------------------------------------------------------- in the decoder

LAYOUT = layer_layout([("w", (6, 10)), ("b", (6,))])
CONFIG = CodecConfig(low_rank=max_rank(6, 10))
HISTORY = history_with(
    LAYOUT, CONFIG, [np.linspace(-1.5e38, 1.5e38, LAYOUT.total, dtype=np.float32)]
)
ONE = np.ones(1, dtype=np.int64)


def _decode(records: list[LayerRecord]) -> np.ndarray:
    payload = forge(LAYOUT, HISTORY, records)
    return decode_update_flat(payload, layers_spec=LAYOUT, history=HISTORY, config=CONFIG)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from([Predictor.ZERO, Predictor.PREVIOUS]),
    _GAINS,
    _STEPS,
    st.integers(min_value=-MAX_SYMBOL, max_value=MAX_SYMBOL),
    _STEPS,
    st.integers(min_value=-MAX_SYMBOL, max_value=MAX_SYMBOL),
    st.integers(min_value=1, max_value=max_rank(6, 10)),
)
def test_a_payload_is_refused_exactly_when_its_one_symbol_layers_would_not_be_finite(
    predictor, gain, left_step, left_symbol, right_step, right_symbol, rank
):
    gain = 1.0 if predictor is Predictor.ZERO else gain
    records = [
        LayerRecord(
            predictor,
            Quantizer.LOWRANK,
            gain,
            rank=rank,
            factors=(
                FactorTable(left_step, left_symbol, ONE),
                FactorTable(right_step, right_symbol, ONE),
            ),
        ),
        LayerRecord(predictor, Quantizer.UNIFORM, gain, left_step, left_symbol, ONE),
    ]
    # One-symbol tables make every value of a layer its largest: the decoder's own
    # arithmetic then says whether the payload was safe.
    residuals = np.empty(LAYOUT.total, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        reconstruct_into(
            np.full((rank, 6), _sign_table_values(left_step, left_symbol, 1)[0]),
            np.full((rank, 10), _sign_table_values(right_step, right_symbol, 1)[0]),
            residuals[:60],
        )
        residuals[60:] = _sign_table_values(left_step, left_symbol, 1)[0]
        prediction = HISTORY.prediction(predictor)
        expected = residuals.copy()
        add_prediction(expected, prediction, np.float32(gain))
    if np.isfinite(expected).all():
        np.testing.assert_array_equal(_decode(records), expected)
    else:
        with pytest.raises(CodecError, match="beyond float32 range"):
            _decode(records)


def test_values_up_to_float32_s_largest_are_accepted_and_one_step_beyond_is_refused():
    top = FactorTable(F32_MAX, 1, ONE)
    records = [
        LayerRecord(
            Predictor.ZERO, Quantizer.LOWRANK, rank=1, factors=(top, FactorTable(1.0, 1, ONE))
        ),
        LayerRecord(Predictor.ZERO, Quantizer.UNIFORM, 1.0, F32_MAX, -1, ONE),
    ]
    assert np.abs(_decode(records)).min() == F32_MAX
    records[1] = LayerRecord(Predictor.ZERO, Quantizer.UNIFORM, 1.0, F32_MAX, -2, ONE)
    with pytest.raises(CodecError, match="'b' would reconstruct"):
        _decode(records)
