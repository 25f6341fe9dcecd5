"""The decoder against random, truncated, mutated and forged bitstreams.

Whatever the bytes, ``decode_update_flat`` either raises ``CodecError`` or
returns a finite vector of the model's size; it never asks the entropy coder
for more than two symbols per parameter (a core symbol and at most one tail
symbol, so its work is bounded by the model and the payload), and its memory
stays within the output, the payload and a constant (checked on the costliest
payloads found, on a model larger than the constant). Forged payloads (a layer table
drawn field by field, extreme steps, gains and ranks included, with words that
really code its symbols) reach the reconstruction, where random bytes and
mutations are mostly refused earlier.
"""

from __future__ import annotations

import contextlib
import tracemalloc
from typing import TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import phalanx.codec.coder as coder_module
from phalanx.codec import (
    MAGIC,
    VERSION,
    CodecConfig,
    CodecError,
    DeltaHistory,
    LayerLayout,
    Predictor,
    Quantizer,
    decode_update_flat,
    encode_update,
    layer_layout,
)
from phalanx.codec.bitstream import FactorTable, LayerRecord, read_bitstream
from phalanx.codec.decoder import DECODE_WORKSPACE
from phalanx.codec.escape import plan_escape
from phalanx.codec.lowrank import max_rank
from phalanx.codec.quantizers import MAX_SYMBOL
from tests.support.codec_builders import SPEC, correlated_rounds, gradient_like, history_with
from tests.support.forged_payloads import (
    COSTLIEST,
    LOW_RANK,
    MEMORY_SPEC,
    costliest_payloads,
    forge,
)

LAYOUT = layer_layout(SPEC)
CONFIG = CodecConfig(rd_sample_size=256)
HISTORY = history_with(LAYOUT, CONFIG, correlated_rounds(LAYOUT, 90, 3))
FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _payloads() -> list[bytes]:
    out = []
    for config in (
        CONFIG,
        CodecConfig(rd_sample_size=256, step_sizes=(), ternary=True),
        CodecConfig(rd_sample_size=256, step_sizes=(0.25,), ternary=False),
        CodecConfig(rd_sample_size=256, unbiased=True),
        CodecConfig(rd_sample_size=256, step_sizes=(0.25,), ternary=False, unbiased=True),
    ):
        for seed in (1, 2):
            update = gradient_like(LAYOUT, seed)
            update[LAYOUT.slice(1)] = 0.0  # a censored layer too
            encoded = encode_update(
                update,
                layers_spec=LAYOUT,
                history=HISTORY,
                config=config,
                seed_context=(1, 1, seed),
            )
            out.append(encoded.payload)
    # Low-rank layers: fc.weight nearly rank 2, as gradients are.
    rng = np.random.default_rng(3)
    for low_rank, prediction in ((2, 0.0), (3, 0.2)):
        update = gradient_like(LAYOUT, 3 + low_rank)
        fc = rng.normal(size=(10, 2)) @ rng.normal(size=(2, 200)) + 0.01 * rng.normal(
            size=(10, 200)
        )
        update[LAYOUT.slice(2)] = (1e-3 * fc).ravel()
        update[LAYOUT.slice(2)] += prediction * HISTORY.layer_prediction(Predictor.PREVIOUS, 2)
        config = CodecConfig(rd_sample_size=256, rd_lambda=0.1, low_rank=low_rank)
        encoded = encode_update(
            update, layers_spec=LAYOUT, history=HISTORY, config=config, seed_context=(1, 2, 0)
        )
        assert encoded.stats.layers[2].quantizer is Quantizer.LOWRANK
        out.append(encoded.payload)
    return out


PAYLOADS = _payloads()
ANY_CONFIG = CodecConfig(
    rd_sample_size=256, step_sizes=(0.25, 0.5, 1.0), ternary=True, low_rank=max_rank(10, 200)
)


class FakeEntropyDecoderSpy:
    """Wraps the real stream decoder and records how many symbols it was asked for."""

    def __init__(self) -> None:
        self.requested = 0
        self.real = coder_module._Stream

    def __call__(self, coder, frequencies, values, size):
        self.requested += size
        return self.real(coder, frequencies, values, size)


def _decode_checked(
    data: bytes, monkeypatch: pytest.MonkeyPatch, history: DeltaHistory = HISTORY
) -> None:
    spy = FakeEntropyDecoderSpy()
    monkeypatch.setattr(coder_module, "_Stream", spy)
    try:
        out = decode_update_flat(data, layers_spec=LAYOUT, history=history, config=ANY_CONFIG)
    except CodecError:
        pass
    else:
        assert out.shape == (LAYOUT.total,) and out.dtype == np.float32
        assert np.isfinite(out).all()
    finally:
        monkeypatch.undo()
    assert spy.requested <= 2 * LAYOUT.total


def test_the_fuzz_corpus_decodes_cleanly_and_has_split_and_whole_tables():
    split = whole = 0
    for payload in PAYLOADS:
        decode_update_flat(payload, layers_spec=LAYOUT, history=HISTORY, config=ANY_CONFIG)
        _, records, _ = read_bitstream(payload, LAYOUT)
        for record, size in zip(records, LAYOUT.sizes, strict=True):
            if record.quantizer in (Quantizer.UNIFORM, Quantizer.TERNARY) and record.alphabet > 1:
                if plan_escape(record.frequencies, size) is None:
                    whole += 1
                else:
                    split += 1
    assert split >= 3 and whole >= 10


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes_are_refused(data):
    with pytest.raises(CodecError):
        decode_update_flat(data, layers_spec=LAYOUT, history=HISTORY, config=ANY_CONFIG)


@FUZZ
@given(st.sampled_from([VERSION, VERSION - 1]), st.binary(max_size=400))
def test_random_bytes_behind_a_valid_magic_only_raise_codec_error(monkeypatch, version, data):
    _decode_checked(MAGIC + bytes([version, 0]) + LAYOUT.fingerprint + data, monkeypatch)


@FUZZ
@given(st.sampled_from(range(len(PAYLOADS))), st.data())
def test_every_truncation_is_refused(which, data):
    payload = PAYLOADS[which]
    cut = data.draw(st.integers(min_value=0, max_value=len(payload) - 1))
    with pytest.raises(CodecError):
        decode_update_flat(payload[:cut], layers_spec=LAYOUT, history=HISTORY, config=ANY_CONFIG)


_EDIT = st.tuples(
    st.sampled_from(["flip", "set", "insert", "delete"]),
    st.integers(min_value=0, max_value=10_000),
    st.integers(min_value=0, max_value=255),
)


@FUZZ
@given(st.sampled_from(range(len(PAYLOADS))), st.lists(_EDIT, min_size=1, max_size=4))
def test_mutated_payloads_only_raise_codec_error(monkeypatch, which, edits):
    data = bytearray(PAYLOADS[which])
    for kind, position, value in edits:
        at = position % (len(data) + 1)
        if kind == "insert":
            data.insert(at, value)
        elif data and at < len(data):
            if kind == "flip":
                data[at] ^= 1 << (value % 8)
            elif kind == "set":
                data[at] = value
            else:
                del data[at]
    _decode_checked(bytes(data), monkeypatch)


@FUZZ
@given(st.sampled_from(range(len(PAYLOADS))), st.integers(min_value=0, max_value=10_000))
def test_mutations_past_the_header_keep_the_fingerprints_and_still_only_raise_codec_error(
    monkeypatch, which, position
):
    # Header mutations are refused early; these reach the layer table and the coder.
    data = bytearray(PAYLOADS[which])
    at = 19 + position % (len(data) - 19)
    data[at] ^= 0xFF
    _decode_checked(bytes(data), monkeypatch)


def test_a_stream_with_a_wrong_history_is_refused_even_if_otherwise_valid():
    with pytest.raises(CodecError, match="another history"):
        decode_update_flat(
            PAYLOADS[0],
            layers_spec=LAYOUT,
            history=DeltaHistory.from_config(LAYOUT, ANY_CONFIG),
            config=ANY_CONFIG,
        )


def _forged(alphabet: int, words: int) -> bytes:
    """A header-valid stream whose large layer declares a huge alphabet and word count."""
    from phalanx.codec.varints import encode_varint

    body = bytearray(MAGIC + bytes([VERSION, 0]) + LAYOUT.fingerprint + HISTORY.fingerprint[:8])
    body += encode_varint(len(LAYOUT))
    for shape in LAYOUT.shapes:
        body += bytes([len(shape)]) + b"".join(encode_varint(d) for d in shape)
        body += bytes([0x04]) + np.float32(1.0).tobytes() + encode_varint(0)
        body += encode_varint(alphabet) + b"\x01" * 16
    return bytes(body + encode_varint(words) + b"\x01\x00\x00\x00" * 4)


@pytest.mark.parametrize(("alphabet", "words"), [(65_536, 4), (2, 1 << 30), (1 << 20, 1 << 34)])
def test_declared_sizes_beyond_the_bytes_present_are_refused_without_allocating_them(
    alphabet, words
):
    data = _forged(alphabet, words)
    tracemalloc.start()
    try:
        with pytest.raises(CodecError):
            decode_update_flat(data, layers_spec=LAYOUT, history=HISTORY, config=ANY_CONFIG)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 + 8 * len(data)


@pytest.fixture(scope="module")
def costliest() -> tuple[LayerLayout, DeltaHistory, CodecConfig, dict[str, bytes]]:
    layout = layer_layout(MEMORY_SPEC)
    config = CodecConfig(low_rank=LOW_RANK)
    history = history_with(layout, config, [gradient_like(layout, 5)])
    payloads = costliest_payloads(layout, history)
    payloads["honest"] = encode_update(
        gradient_like(layout, 6),
        layers_spec=layout,
        history=history,
        config=config,
        seed_context=(1, 1, 1),
    ).payload
    return layout, history, config, payloads


@pytest.mark.parametrize("name", [*COSTLIEST, "honest"])
def test_decoding_allocates_at_most_the_model_the_payload_and_a_constant(costliest, name):
    layout, history, config, payloads = costliest
    payload = payloads[name]
    tracemalloc.start()
    try:
        out = decode_update_flat(payload, layers_spec=layout, history=history, config=config)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.isfinite(out).all()
    # The output, the payload, the decoder's workspace and a low-rank layer's corner.
    assert peak <= 4 * layout.total + len(payload) + DECODE_WORKSPACE + 4 * LOW_RANK**2


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(range(len(PAYLOADS))), st.integers(min_value=0, max_value=10_000))
def test_decoding_a_mutated_stream_allocates_no_more_than_a_few_models(which, position):
    data = bytearray(PAYLOADS[which])
    data[19 + position % (len(data) - 19)] ^= 0x5A
    tracemalloc.start()
    try:
        with contextlib.suppress(CodecError):
            decode_update_flat(bytes(data), layers_spec=LAYOUT, history=HISTORY, config=ANY_CONFIG)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 4 * LAYOUT.total + 64 * 1024 + 8 * len(data)


# --------------------------------------------------------------------------- forged layer tables

T = TypeVar("T")
F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).smallest_subnormal)
_MAGNITUDES = [F32_MAX, 3.0e38, 1.7e38, 1e38, 1e30, 1e19, 1.0, 1e-3, 1e-30, 1e-38, F32_TINY]


def _mostly(edges: st.SearchStrategy[T], anything: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """Draw from ``edges`` three times in four: where overflows hide, and what costs no bits."""
    return st.integers(min_value=0, max_value=3).flatmap(lambda k: anything if k == 3 else edges)


_STEPS = _mostly(
    st.sampled_from(_MAGNITUDES), st.floats(min_value=F32_TINY, max_value=F32_MAX, width=32)
)
_GAINS = st.one_of(
    st.just(1.0),
    st.sampled_from([0.0] + _MAGNITUDES + [-m for m in _MAGNITUDES]),
    st.floats(width=32, allow_nan=False, allow_infinity=False),
)
_PEAK = 1.5e38
HUGE_HISTORY = history_with(
    LAYOUT,
    ANY_CONFIG,
    [
        (d.astype(np.float64) * (_PEAK / float(np.abs(d).max()))).astype(np.float32)
        for d in correlated_rounds(LAYOUT, 7, 2)
    ],
)
"""Predictions whose peaks are within a factor of two of float32's largest value."""


@st.composite
def _table(draw: st.DrawFn, bound: int) -> FactorTable:
    step = draw(_STEPS)
    alphabet = draw(_mostly(st.just(1), st.integers(min_value=2, max_value=3)))
    highest = bound - alphabet + 1
    sym_min = draw(
        _mostly(
            st.sampled_from([-bound, highest, 0, -1]),
            st.integers(min_value=-bound, max_value=highest),
        )
    )
    frequencies = draw(
        st.lists(st.integers(min_value=1, max_value=50), min_size=alphabet, max_size=alphabet)
    )
    return FactorTable(step, sym_min, np.array(frequencies, dtype=np.int64))


@st.composite
def _records(draw: st.DrawFn) -> list[LayerRecord]:
    # One layer forged, the others plain, so that a layer the decoder refuses does not
    # hide what it would have done with another.
    forged = draw(_mostly(st.just(LAYOUT.names.index("fc.weight")), st.integers(0, 3)))
    records = []
    for layer, shape in enumerate(LAYOUT.shapes):
        if layer != forged:
            records.append(LayerRecord(Predictor.ZERO, Quantizer.CENSORED))
            continue
        quantizers = [Quantizer.CENSORED, Quantizer.UNIFORM, Quantizer.TERNARY]
        if len(shape) == 2:
            quantizers = [*quantizers, *[Quantizer.LOWRANK] * 3]  # the riskiest, half the time
        quantizer = draw(st.sampled_from(quantizers))
        predictor = draw(st.sampled_from(list(Predictor)))
        gain = 1.0 if predictor is Predictor.ZERO else draw(_GAINS)
        if quantizer is Quantizer.CENSORED:
            records.append(LayerRecord(predictor, quantizer, gain))
        elif quantizer is Quantizer.LOWRANK:
            rank = draw(st.integers(min_value=1, max_value=max_rank(*shape)))
            factors = (draw(_table(MAX_SYMBOL)), draw(_table(MAX_SYMBOL)))
            records.append(LayerRecord(predictor, quantizer, gain, rank=rank, factors=factors))
        else:
            table = draw(_table(1 if quantizer is Quantizer.TERNARY else MAX_SYMBOL))
            records.append(
                LayerRecord(
                    predictor, quantizer, gain, table.step, table.sym_min, table.frequencies
                )
            )
    return records


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_records(), st.sampled_from([HISTORY, HUGE_HISTORY]), st.integers(0, 1 << 16))
def test_forged_layer_tables_decode_to_finite_values_or_raise_codec_error(
    monkeypatch, records, history, seed
):
    _decode_checked(forge(LAYOUT, history, records, seed=seed), monkeypatch, history)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ((3e38, 2), (1.0, 0)),  # left's values overflow to inf, times right's zeros: NaN
        ((3e38, 2), (F32_TINY, 1)),  # inf times the smallest subnormal: inf
    ],
)
def test_the_41_byte_low_rank_payload_with_an_overflowing_factor_is_refused(left, right):
    layout = layer_layout([("w", (2, 2))])
    config = CodecConfig(low_rank=1)
    history = history_with(layout, config, [np.ones(4, dtype=np.float32)])
    one = np.ones(1, dtype=np.int64)
    record = LayerRecord(
        Predictor.PREVIOUS,
        Quantizer.LOWRANK,
        0.5,
        rank=1,
        factors=(FactorTable(*left, one), FactorTable(*right, one)),
    )
    payload = forge(layout, history, [record])
    # header 19, shape 3, tag 1, gain 4, rank 1, two tables of 6, word count 1
    assert len(payload) == 41
    with pytest.raises(CodecError, match="float32"):
        decode_update_flat(payload, layers_spec=layout, history=history, config=config)
