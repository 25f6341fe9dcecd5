"""The decoder against random, truncated and mutated bitstreams.

Whatever the bytes, ``decode_update_flat`` either raises ``CodecError`` or
returns a finite vector of the model's size; it never asks the entropy coder
for more than two symbols per parameter (a core symbol and at most one tail
symbol, so its work is bounded by the model and the payload), and its memory
stays within a small multiple of the model.
"""

from __future__ import annotations

import contextlib
import tracemalloc

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
    Predictor,
    Quantizer,
    decode_update_flat,
    encode_update,
    layer_layout,
)
from phalanx.codec.bitstream import read_bitstream
from phalanx.codec.escape import plan_escape
from phalanx.codec.lowrank import max_rank
from tests.unit.codec.codec_builders import SPEC, correlated_rounds, gradient_like, history_with

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


def _decode_checked(data: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = FakeEntropyDecoderSpy()
    monkeypatch.setattr(coder_module, "_Stream", spy)
    try:
        out = decode_update_flat(data, layers_spec=LAYOUT, history=HISTORY, config=ANY_CONFIG)
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
    from phalanx.codec.bitstream import encode_varint

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
