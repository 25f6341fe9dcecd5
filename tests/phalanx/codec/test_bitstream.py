from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.codec import VERSION, CodecError, Predictor, Quantizer, varints
from phalanx.codec.bitstream import (
    MAGIC,
    Header,
    LayerRecord,
    read_bitstream,
    read_layer_table,
    write_bitstream,
)
from phalanx.codec.varints import Reader, encode_varint, encode_varints, unzigzag, zigzag


@settings(deadline=None)
@given(st.integers(min_value=0, max_value=(1 << 35) - 1))
def test_varint_round_trips(value):
    reader = Reader(encode_varint(value))
    assert reader.varint("x") == value
    assert reader.remaining == 0


@settings(deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=(1 << 35) - 1), max_size=50))
def test_vectorised_varints_match_the_scalar_encoding(values):
    encoded = encode_varints(np.array(values, dtype=np.int64))
    assert encoded == b"".join(encode_varint(v) for v in values)
    np.testing.assert_array_equal(Reader(encoded).varints(len(values), "x"), values)


@settings(deadline=None)
@given(st.integers(min_value=-(1 << 33), max_value=1 << 33))
def test_zigzag_round_trips_and_keeps_small_magnitudes_small(value):
    assert unzigzag(zigzag(value)) == value
    assert zigzag(value) <= 2 * abs(value)


@settings(deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=(1 << 35) - 1), min_size=1, max_size=60),
    st.sampled_from([varints._SCAN, 1, 3, 16]),
)
def test_skipping_varints_ends_where_reading_them_does(values, scan):
    encoded = encode_varints(np.array(values, dtype=np.int64)) + b"\x80\x01"
    read, skipped = Reader(encoded), Reader(encoded)
    read.varints(len(values), "x")
    original = varints._SCAN
    varints._SCAN = scan  # windows smaller than a varint, and than the run
    try:
        skipped.skip_varints(len(values), "x")
    finally:
        varints._SCAN = original
    assert skipped.pos == read.pos


def test_skipping_more_varints_than_the_bytes_hold_is_truncated():
    with pytest.raises(CodecError, match="truncated"):
        Reader(b"\x01\x02\x83").skip_varints(3, "x")
    with pytest.raises(CodecError, match="truncated"):
        Reader(b"\x01").skip_varints(2, "x")


def test_overlong_varints_are_refused():
    with pytest.raises(CodecError, match="shortest form"):
        Reader(b"\x81\x00").varint("x")
    with pytest.raises(CodecError, match="longer than"):
        Reader(b"\xff" * 6 + b"\x01").varint("x")
    with pytest.raises(CodecError, match="shortest form"):
        Reader(b"\x01\x80\x00").varints(2, "x")


def _records():
    return [
        LayerRecord(Predictor.MEAN, Quantizer.CENSORED, gain=-2.5),
        LayerRecord(Predictor.ZERO, Quantizer.CENSORED),
        LayerRecord(
            Predictor.MOMENTUM,
            Quantizer.UNIFORM,
            gain=0.75,
            step=0.125,
            sym_min=-3,
            frequencies=np.array([1, 0, 40, 300, 2, 0, 9], dtype=np.int64),
        ),
        LayerRecord(
            Predictor.PREVIOUS,
            Quantizer.TERNARY,
            step=0.5,
            sym_min=-1,
            frequencies=np.array([3, 4, 3], dtype=np.int64),
        ),
    ]


def _payload(layout, words=(7, 9)):
    header = Header(layout.fingerprint, b"12345678")
    return write_bitstream(header, _records(), layout, np.array(words, dtype=np.uint32))


def test_layer_table_round_trips_with_the_payload_words(layout):
    payload, side = _payload(layout)
    assert payload.startswith(MAGIC)
    assert len(payload) == side + 8
    header, records, words = read_bitstream(payload, layout)
    assert header.history_fingerprint == b"12345678"
    np.testing.assert_array_equal(words, [7, 9])
    for got, want in zip(records, _records(), strict=True):
        assert (got.predictor, got.quantizer) == (want.predictor, want.quantizer)
        assert got.gain == pytest.approx(want.gain)
        if want.quantizer is not Quantizer.CENSORED:
            assert (got.step, got.sym_min) == (want.step, want.sym_min)
            np.testing.assert_array_equal(got.frequencies, want.frequencies)


def test_the_layer_table_leaves_the_frequencies_and_words_in_the_payload(layout):
    payload, _ = _payload(layout)
    table = read_layer_table(payload, layout)
    assert np.shares_memory(table.words, np.frombuffer(payload, dtype=np.uint8))
    np.testing.assert_array_equal(table.words, [7, 9])
    uniform = table.layers[2].tables[0]
    assert (uniform.step, uniform.sym_min, uniform.alphabet) == (0.125, -3, 7)
    assert payload[uniform.offset : uniform.offset + 3] == bytes([1, 0, 40])
    np.testing.assert_array_equal(
        table.frequencies(uniform, "fc.weight"), _records()[2].frequencies
    )
    assert table.layers[0].tables == () and table.layers[0].gain == -2.5


def test_an_all_zero_frequency_table_is_refused_when_it_is_read(layout):
    records = _records()
    records[3] = LayerRecord(
        Predictor.ZERO, Quantizer.TERNARY, step=1.0, sym_min=-1, frequencies=np.zeros(3, np.int64)
    )
    payload, _ = write_bitstream(
        Header(layout.fingerprint, b"x" * 8), records, layout, np.zeros(0, np.uint32)
    )
    table = read_layer_table(payload, layout)
    with pytest.raises(CodecError, match="invalid frequency table"):
        table.frequencies(table.layers[3].tables[0], "fc.bias")
    with pytest.raises(CodecError, match="invalid frequency table"):
        read_bitstream(payload, layout)


def test_a_censored_zero_layer_costs_one_tag_byte_after_its_shape(layout):
    payload, _ = _payload(layout)
    # conv.bias (ndim 1, dim 8) is layer 1: censored, zero predictor, no gain.
    assert bytes([1, 8, 0]) in payload


@pytest.mark.parametrize(
    ("offset", "value", "message"),
    [
        (0, 0x51, "magic"),
        (4, 3, "version"),
        (5, 1, "flags"),
        (6, 0x00, "another model"),
        (18, 5, "layers"),
        (19, 3, "dimensions"),
        (20, 9, "shape"),
    ],
)
def test_header_and_shape_fields_are_checked_against_the_model(layout, offset, value, message):
    payload = bytearray(_payload(layout)[0])
    payload[offset] = value if payload[offset] != value else value + 1
    with pytest.raises(CodecError, match=message):
        read_bitstream(bytes(payload), layout)


@pytest.mark.parametrize("version", [1, 2])
def test_payloads_are_written_as_version_3_and_earlier_versions_are_refused(layout, version):
    payload = bytearray(_payload(layout)[0])
    assert payload[4] == VERSION == 3
    payload[4] = version
    with pytest.raises(CodecError, match=f"version {version} is not supported"):
        read_bitstream(bytes(payload), layout)


def test_a_payload_longer_than_its_declared_words_is_refused(layout):
    payload, _ = _payload(layout)
    with pytest.raises(CodecError, match="declares"):
        read_bitstream(payload + b"\x00\x00\x00\x00", layout)


def test_an_alphabet_larger_than_the_bytes_left_is_refused_before_reading_it(layout):
    records = _records()
    records[2] = LayerRecord(
        Predictor.ZERO,
        Quantizer.UNIFORM,
        step=1.0,
        sym_min=0,
        frequencies=np.ones(7, dtype=np.int64),
    )
    header = Header(layout.fingerprint, b"x" * 8)
    payload, _ = write_bitstream(header, records, layout, np.zeros(0, np.uint32))
    # fc.weight's row: tag (uniform, zero predictor), step 1.0, zigzag(0), alphabet 7.
    row = bytes([0x04, 0x00, 0x00, 0x80, 0x3F, 0x00, 0x07])
    start = payload.index(row)
    forged = payload[: start + 6] + encode_varint(30_000) + payload[start + 7 : start + 9]
    with pytest.raises(CodecError, match="truncated"):
        read_bitstream(forged, layout)


def test_ternary_symbols_outside_minus_one_to_one_are_refused(layout):
    records = _records()
    records[3] = LayerRecord(
        Predictor.ZERO, Quantizer.TERNARY, step=1.0, sym_min=-2, frequencies=np.ones(3, np.int64)
    )
    payload, _ = write_bitstream(
        Header(layout.fingerprint, b"x" * 8), records, layout, np.zeros(0, np.uint32)
    )
    with pytest.raises(CodecError, match="outside"):
        read_bitstream(payload, layout)


def test_non_bytes_input_is_a_codec_error(layout):
    with pytest.raises(CodecError, match="bytes"):
        read_bitstream("PHXC", layout)  # type: ignore[arg-type]
