"""Round trips of the baseline compressors in benchmarks/lib/compression_baselines.py."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.lib import compression_baselines as baselines
from phalanx.replies import ReplyRejectedError

LAYERS = [("conv.weight", (8, 1, 3, 3)), ("conv.bias", (8,)), ("fc.weight", (10, 300))]
DIM = 8 * 9 + 8 + 3000


def gradient_like(seed: int, dim: int = DIM) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_t(4, dim) * 1e-2).astype(np.float32)


def all_compressors(dim: int = DIM) -> list[Any]:
    return [
        baselines.Zstd(dim),
        baselines.QSGD(dim, levels=1),
        baselines.QSGD(dim, levels=16, bucket=64),
        baselines.TopK(dim, fraction=0.01),
        baselines.ScaledSign(baselines.layer_sizes(LAYERS)),
    ]


def test_zstd_round_trip_is_bit_exact() -> None:
    update = gradient_like(0)
    compressor = baselines.Zstd(DIM)
    decoded = compressor.decode(compressor.encode(update, seed=0))
    assert decoded.dtype == np.float32
    assert decoded.tobytes() == update.tobytes()


def test_qsgd_decodes_to_levels_of_each_bucket_norm() -> None:
    update = gradient_like(1)
    compressor = baselines.QSGD(DIM, levels=4, bucket=128)
    decoded = compressor.decode(compressor.encode(update, seed=3))
    padded = np.zeros(-(-DIM // 128) * 128, dtype=np.float32)
    padded[:DIM] = update
    norms = np.linalg.norm(padded.reshape(-1, 128), axis=1)
    step = np.repeat(norms / 4, 128)[:DIM]
    levels = decoded / step
    assert np.allclose(levels, np.round(levels), atol=1e-4)
    assert np.all(np.abs(np.round(levels)) <= 4)
    assert np.all((np.sign(decoded) == np.sign(update)) | (decoded == 0))


def test_qsgd_is_unbiased_over_seeds() -> None:
    update = gradient_like(2, dim=512)
    compressor = baselines.QSGD(512, levels=2, bucket=512)
    mean = np.mean([compressor.decode(compressor.encode(update, seed=s)) for s in range(400)], 0)
    assert np.linalg.norm(mean - update) < 0.15 * np.linalg.norm(update)


def test_qsgd_same_seed_same_bytes_and_other_seed_other_bytes() -> None:
    update = gradient_like(3)
    compressor = baselines.QSGD(DIM, levels=4)
    assert compressor.encode(update, seed=9) == compressor.encode(update.copy(), seed=9)
    assert compressor.encode(update, seed=9) != compressor.encode(update, seed=10)


def test_qsgd_of_zero_update_decodes_to_zero() -> None:
    compressor = baselines.QSGD(DIM, levels=4)
    zero = np.zeros(DIM, dtype=np.float32)
    assert not compressor.decode(compressor.encode(zero, seed=0)).any()


def test_top_k_keeps_exactly_the_largest_magnitudes() -> None:
    update = gradient_like(4)
    compressor = baselines.TopK(DIM, fraction=0.02)
    decoded = compressor.decode(compressor.encode(update, seed=0))
    kept = np.flatnonzero(decoded)
    assert kept.size == compressor.k
    assert np.array_equal(decoded[kept], update[kept])
    assert np.abs(update[kept]).min() >= np.abs(np.delete(update, kept)).max()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=2**40), min_size=1, max_size=200))
def test_elias_gamma_round_trip(values: list[int]) -> None:
    code, bits = baselines.elias_gamma_encode(np.array(values, dtype=np.int64))
    assert bits == sum(2 * v.bit_length() - 1 for v in values)
    assert baselines.elias_gamma_decode(code, len(values), bits).tolist() == values


def test_scaled_sign_keeps_signs_and_layer_mean_magnitudes() -> None:
    update = gradient_like(5)
    compressor = baselines.ScaledSign(baselines.layer_sizes(LAYERS))
    payload = compressor.encode(update, seed=0)
    decoded = compressor.decode(payload)
    assert np.array_equal(decoded >= 0, update >= 0)
    start = 0
    for size in baselines.layer_sizes(LAYERS):
        layer = slice(start, start + size)
        assert np.allclose(np.abs(decoded[layer]), np.abs(update[layer]).mean(), rtol=1e-6)
        start += size
    assert len(payload) <= DIM // 8 + 1 + 4 * len(LAYERS) + 10


@pytest.mark.parametrize("compressor", all_compressors(), ids=lambda c: c.name)
def test_decoder_refuses_truncated_or_foreign_payloads(compressor: Any) -> None:
    payload = compressor.encode(gradient_like(6), seed=1)
    with pytest.raises(ValueError):
        compressor.decode(payload[: len(payload) // 2])
    with pytest.raises(ValueError):
        compressor.decode(b"JUNK" + payload[4:])


@pytest.mark.parametrize("compressor", all_compressors(), ids=lambda c: c.name)
def test_decoder_refuses_a_payload_for_another_model(compressor: Any) -> None:
    payload = compressor.encode(gradient_like(7), seed=0)
    if isinstance(compressor, baselines.ScaledSign):
        wider = dataclasses.replace(compressor, layer_sizes=(*compressor.layer_sizes, 5))
    else:
        wider = dataclasses.replace(compressor, dim=DIM + 5)
    with pytest.raises(ValueError):
        wider.decode(payload)


def test_error_feedback_carries_what_top_k_left_out() -> None:
    compressor = baselines.TopK(DIM, fraction=0.01)
    replica = baselines.BaselineReplica(compressor, LAYERS, run_seed=0, error_feedback=True)
    first = gradient_like(8)
    sent = compressor.decode(replica.encode(torch.from_numpy(first), round=1, file=0))
    assert np.array_equal(replica.memory, first - sent)
    second = gradient_like(9)
    sent2 = compressor.decode(replica.encode(torch.from_numpy(second), round=2, file=3))
    assert np.allclose(sent + sent2 + replica.memory, first + second, atol=1e-7)


def test_replicas_of_a_file_send_identical_qsgd_bytes() -> None:
    update = torch.from_numpy(gradient_like(10))
    compressor = baselines.QSGD(DIM, levels=4)
    a = baselines.BaselineReplica(compressor, LAYERS, run_seed=5)
    b = baselines.BaselineReplica(compressor, LAYERS, run_seed=5)
    assert a.encode(update, round=2, file=7) == b.encode(update.clone(), round=2, file=7)
    assert a.encode(update, round=2, file=7) != a.encode(update, round=2, file=8)


def test_channel_decoder_rejects_garbage_as_a_malformed_reply() -> None:
    compressor = baselines.QSGD(DIM, levels=4)
    channel = baselines.BaselineChannel(torch.zeros(DIM), compressor)
    update = gradient_like(11)
    decoded = channel.decoder(compressor.encode(update, seed=0))
    assert decoded.dtype == torch.float32 and decoded.shape == (DIM,)
    with pytest.raises(ReplyRejectedError) as caught:
        channel.decoder(b"QSG1 not really")
    assert caught.value.kind == "malformed_reply"
