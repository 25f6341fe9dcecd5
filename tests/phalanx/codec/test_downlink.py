from __future__ import annotations

import numpy as np
import pytest

from phalanx.codec import (
    CodecConfig,
    CodecError,
    GlobalModel,
    decode_update_flat,
    encode_update,
)
from tests.support.codec_builders import correlated_rounds, gradient_like


def _parties(layout, config, workers=2):
    weights = gradient_like(layout, 0, scale=0.1)
    coordinator = GlobalModel(layout, weights, config=config)
    return coordinator, [GlobalModel(layout, weights.copy(), config=config) for _ in range(workers)]


def test_coordinator_and_workers_hold_identical_weights_after_every_broadcast(layout):
    config = CodecConfig()
    coordinator, workers = _parties(layout, config)
    for round_, delta in enumerate(correlated_rounds(layout, 3, 6)):
        payload = coordinator.broadcast(delta, run_seed=7, round=round_).payload
        for worker in workers:
            worker.receive(payload)
            assert worker.digest() == coordinator.digest()
    np.testing.assert_array_equal(
        workers[0].weights.view(np.uint32), coordinator.weights.view(np.uint32)
    )
    assert coordinator.history.rounds == 6


def test_uplink_payloads_decode_on_the_coordinator_after_broadcasts(layout):
    config = CodecConfig()
    coordinator, (worker,) = _parties(layout, config, workers=1)
    for round_, delta in enumerate(correlated_rounds(layout, 4, 3)):
        worker.receive(coordinator.broadcast(delta, run_seed=1, round=round_).payload)
    update = gradient_like(layout, 50)
    encoded = encode_update(
        update, layers_spec=layout, history=worker.history, config=config, seed_context=(1, 3, 0)
    )
    decoded = decode_update_flat(
        encoded.payload, layers_spec=layout, history=coordinator.history, config=config
    )
    np.testing.assert_array_equal(decoded.view(np.uint32), encoded.flat.view(np.uint32))


def test_a_worker_that_missed_a_broadcast_refuses_the_next_and_keeps_its_state(layout):
    config = CodecConfig()
    coordinator, (worker,) = _parties(layout, config, workers=1)
    deltas = correlated_rounds(layout, 5, 2)
    coordinator.broadcast(deltas[0], run_seed=1, round=0)  # never delivered
    second = coordinator.broadcast(deltas[1], run_seed=1, round=1).payload
    before = worker.digest()
    with pytest.raises(CodecError, match="another history"):
        worker.receive(second)
    assert worker.digest() == before and worker.history.rounds == 0


def test_downlink_error_feedback_keeps_the_model_on_the_intended_trajectory(layout):
    deltas = correlated_rounds(layout, 6, 8)
    drift = {}
    for feedback in (True, False):
        config = CodecConfig(downlink_error_feedback=feedback, rd_lambda=0.3, censor_threshold=0.0)
        coordinator, _ = _parties(layout, config, workers=0)
        intended = coordinator.weights.astype(np.float64)
        for round_, delta in enumerate(deltas):
            coordinator.broadcast(delta, run_seed=2, round=round_)
            intended += delta
        drift[feedback] = np.linalg.norm(coordinator.weights - intended)
    assert drift[True] < 0.5 * drift[False]


def test_weights_are_read_only_views(layout):
    coordinator, _ = _parties(layout, CodecConfig(), workers=0)
    with pytest.raises(ValueError):
        coordinator.weights[0] = 1.0
    assert [w.shape for w in coordinator.layers()] == list(layout.shapes)


def test_a_restored_coordinator_continues_exactly_where_it_stopped(layout):
    config = CodecConfig()
    deltas = correlated_rounds(layout, 8, 5)
    original, _ = _parties(layout, config, workers=0)
    for round_, delta in enumerate(deltas[:3]):
        original.broadcast(delta, run_seed=3, round=round_)
    resumed, _ = _parties(layout, config, workers=0)
    resumed.restore(original.state())
    assert resumed.digest() == original.digest()
    for round_, delta in enumerate(deltas[3:], start=3):
        a = original.broadcast(delta, run_seed=3, round=round_).payload
        b = resumed.broadcast(delta, run_seed=3, round=round_).payload
        assert a == b
    assert resumed.digest() == original.digest()
