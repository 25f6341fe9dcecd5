"""The codec's wiring into the model channel: separate rate weights up and down."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from phalanx.channel import CodecChannel, broadcast_config, downlink_lambda, make_channel
from phalanx.codec import CodecConfig, GlobalModel, encode_update, layer_layout
from phalanx.config import RunConfig
from phalanx.data import load_dataset
from phalanx.reports import RoundReport
from phalanx.roster import simulated_roster
from phalanx.runs import build_coordinator, execute_run
from phalanx_clients.inprocess import InProcessTransport
from phalanx_clients.replica import ModelReplica
from phalanx_clients.worker import Worker
from tests.support.codec_builders import SPEC, correlated_rounds, gradient_like
from tests.support.configs import small_config

RUN_ID = "codec-channel-under-test"
LAYOUT = layer_layout(SPEC)
SPLIT = {"enabled": True, "rd_lambda": 1.0, "downlink_rd_lambda": 0.01}


def test_downlink_lambda_falls_back_to_rd_lambda_and_changes_nothing_else() -> None:
    same = CodecConfig(enabled=True, rd_lambda=0.3)
    assert downlink_lambda(same) == 0.3
    assert broadcast_config(same) == same
    split = CodecConfig(enabled=True, rd_lambda=1.0, downlink_rd_lambda=0.03)
    assert downlink_lambda(split) == 0.03
    down = broadcast_config(split)
    assert down.rd_lambda == 0.03
    assert down == CodecConfig(**{**vars(split), "rd_lambda": 0.03})


def test_the_broadcast_keeps_the_uplink_s_measure_but_rounds_to_nearest_without_low_rank() -> None:
    up = CodecConfig(
        enabled=True, rd_distortion="layer", unbiased=True, rounding="correlated", low_rank=4
    )
    down = broadcast_config(up)
    assert (up.rd_distortion, up.rounding, up.unbiased, up.low_rank) == (
        "layer",
        "correlated",
        True,
        4,
    )
    assert (down.rd_distortion, down.rounding, down.unbiased, down.low_rank) == (
        "layer",
        "correlated",
        False,
        0,
    )
    with pytest.raises(ValueError, match="rd_distortion"):
        CodecConfig(enabled=True, rd_distortion="adam")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rounding"):
        CodecConfig(enabled=True, rounding="shared")  # type: ignore[arg-type]


def test_the_coordinator_encodes_its_broadcast_with_the_workers_downlink_config() -> None:
    settings = CodecConfig(
        enabled=True, rd_lambda=20.0, downlink_rd_lambda=0.03, rd_distortion="layer", low_rank=8
    )
    channel = make_channel(settings, SPEC, _params(), run_seed=1)
    assert isinstance(channel, CodecChannel)
    assert channel.downlink_config == broadcast_config(settings)
    assert channel.config == settings


def _params() -> torch.Tensor:
    return torch.from_numpy(gradient_like(LAYOUT, 0, scale=0.1))


def _broadcast(downlink_rd_lambda: float | None) -> tuple[CodecChannel, list[bytes], np.ndarray]:
    """Three rounds of global steps through a channel whose uplink lambda is 1."""
    params = _params()
    channel = CodecChannel(
        SPEC, params, CodecConfig(rd_lambda=1.0, downlink_rd_lambda=downlink_rd_lambda), run_seed=5
    )
    intended = params.numpy().astype(np.float64)
    current = params
    payloads = []
    for round_, step in enumerate(correlated_rounds(LAYOUT, 11, 3), start=1):
        target = current + torch.from_numpy(step)
        intended += step
        current = channel.commit(target, round_)
        payloads.append(channel.downlink().delta)
    error = np.asarray(channel.model.weights, dtype=np.float64) - intended
    return channel, payloads, error


def test_a_smaller_downlink_lambda_gives_a_larger_more_accurate_broadcast() -> None:
    coarse, coarse_payloads, coarse_error = _broadcast(None)
    fine, fine_payloads, fine_error = _broadcast(0.01)
    assert coarse.downlink_config.rd_lambda == 1.0
    assert fine.downlink_config.rd_lambda == 0.01
    assert fine.config.rd_lambda == 1.0  # the uplink keeps its own lambda
    assert sum(map(len, fine_payloads)) > 4 * sum(map(len, coarse_payloads))
    assert np.linalg.norm(fine_error) < 0.5 * np.linalg.norm(coarse_error)


def test_make_channel_codes_the_broadcast_at_downlink_rd_lambda() -> None:
    settings = CodecConfig(enabled=True, rd_lambda=1.0, downlink_rd_lambda=0.01)
    channel = make_channel(settings, SPEC, _params(), run_seed=5)
    assert isinstance(channel, CodecChannel)
    assert channel.config == settings
    assert channel.model.config == broadcast_config(settings)
    assert channel.model.config.rd_lambda == 0.01
    unset = make_channel(CodecConfig(enabled=True, rd_lambda=1.0), SPEC, _params(), 5)
    assert isinstance(unset, CodecChannel)
    assert unset.model.config == unset.config == CodecConfig(enabled=True, rd_lambda=1.0)


@pytest.mark.parametrize("receiver_lambda", [1.0, 0.01, 123.0])
def test_a_broadcast_decodes_whatever_lambda_the_receiver_was_built_with(
    receiver_lambda: float,
) -> None:
    channel, _, _ = _broadcast(0.01)
    # A fresh channel replays the broadcasts; the receiver's lambda plays no part.
    replay = CodecChannel(SPEC, _params(), CodecConfig(rd_lambda=1.0, downlink_rd_lambda=0.01), 5)
    receiver = GlobalModel(SPEC, _params().numpy(), config=CodecConfig(rd_lambda=receiver_lambda))
    current = _params()
    for round_, step in enumerate(correlated_rounds(LAYOUT, 11, 3), start=1):
        current = replay.commit(current + torch.from_numpy(step), round_)
        receiver.receive(replay.downlink().delta)
        assert receiver.digest() == replay.model.digest()
    assert receiver.digest() == channel.model.digest()


def test_replica_follows_the_channel_and_encodes_its_uplink_at_rd_lambda() -> None:
    settings = CodecConfig(enabled=True, rd_lambda=1.0, downlink_rd_lambda=0.01)
    channel = make_channel(settings, SPEC, _params(), run_seed=5)
    assert isinstance(channel, CodecChannel)
    replica = ModelReplica(settings, SPEC, run_seed=5)
    replica.apply(channel.downlink())  # the full first state
    current = _params()
    for round_, step in enumerate(correlated_rounds(LAYOUT, 13, 3), start=1):
        current = channel.commit(current + torch.from_numpy(step), round_)
        params = replica.apply(channel.downlink())
        assert torch.equal(params, current)
        assert replica.model is not None and replica.model.digest() == channel.model.digest()
    update = torch.from_numpy(gradient_like(LAYOUT, 99))
    payload = replica.encode(update, round=4, file=2)
    assert replica.model is not None
    expected = {
        lam: encode_update(
            update.numpy(),
            layers_spec=LAYOUT,
            history=replica.model.history,
            config=CodecConfig(rd_lambda=lam),
            seed_context=(5, 4, 2),
        ).payload
        for lam in (1.0, 0.01)
    }
    assert payload == expected[1.0] != expected[0.01]
    decoded = channel.decoder(payload)
    assert decoded.shape == (LAYOUT.total,)


class _Sink:
    def __init__(self) -> None:
        self.reports: list[RoundReport] = []

    def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
        self.reports.append(report)


def _transport(config: RunConfig) -> InProcessTransport:
    train = load_dataset(config.data.dataset, "train")
    workers = {
        ident.worker: Worker(
            config=config,
            train_set=train,
            client_id=ident.client_id,
            private_key=ident.private_key,
        )
        for ident in simulated_roster(RUN_ID, config.assignment.num_workers)
    }
    return InProcessTransport(workers)


def _run_and_check_in_step(config: RunConfig) -> _Sink:
    """Run ``config`` in process; every honest replica agreed, every worker holds the model."""
    t = _transport(config)
    sink = _Sink()
    coordinator = build_coordinator(config, RUN_ID, t, sink)
    assert isinstance(coordinator.channel, CodecChannel)
    assert coordinator.channel.downlink_config == broadcast_config(config.codec)
    coordinator.run()
    for report in sink.reports:  # exact digests: honest replicas agreed byte for byte
        assert not report.flagged and not report.rejected
    final = coordinator.channel.downlink()  # the last broadcast, not yet sent
    assert final.kind == "delta"
    for worker in t.workers.values():
        assert worker.replica.config == config.codec
        assert worker.replica.model is not None
        assert worker.replica.model.digest() == final.base
        assert torch.equal(worker.replica.apply(final), coordinator.params)
        assert worker.replica.model.digest() == final.target
    return sink


def _honest(codec: dict[str, object]) -> RunConfig:
    return small_config(
        rounds=3, detection={"mode": "exact"}, attack={"name": None, "q": 0}, codec=codec
    )


def test_coordinator_and_workers_end_with_identical_models_under_split_lambdas() -> None:
    split = _run_and_check_in_step(_honest(SPLIT))
    # The same run with lambda 1 both ways sends a much smaller broadcast.
    same = _honest({"enabled": True, "rd_lambda": 1.0})
    one = _Sink()
    execute_run(same, run_id=RUN_ID, sink=one, transport=_transport(same))
    assert sum(r.bytes_down for r in split.reports[1:]) > 1.5 * sum(
        r.bytes_down for r in one.reports[1:]
    )


def test_unbiased_uplink_keeps_replicas_byte_identical_and_models_in_step() -> None:
    config = _honest({**SPLIT, "rd_lambda": 3.0, "unbiased": True})
    assert config.codec.unbiased
    assert not broadcast_config(config.codec).unbiased  # the broadcast rounds to nearest
    _run_and_check_in_step(config)


def test_low_rank_steers_the_uplink_and_the_broadcast_never_uses_it() -> None:
    up = CodecConfig(enabled=True, low_rank=8, low_rank_step=0.5)
    assert (up.low_rank, up.low_rank_step) == (8, 0.5)
    assert broadcast_config(up).low_rank == 0
    for bad in ({"low_rank": -1}, {"low_rank_step": 0.0}):
        with pytest.raises(ValueError, match="low_rank"):
            CodecConfig(enabled=True, **bad)  # type: ignore[arg-type]


class FakeEncoderSpy:
    """Wraps the worker's real encoder and records which quantizer each layer got."""

    def __init__(self, real: object) -> None:
        self.real = real
        self.quantizers: list[tuple[str, ...]] = []

    def __call__(self, *args: object, **kwargs: object) -> object:
        encoded = self.real(*args, **kwargs)  # type: ignore[operator]
        self.quantizers.append(tuple(s.quantizer.name for s in encoded.stats.layers))
        return encoded


def test_low_rank_layers_keep_replicas_byte_identical_and_models_in_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import phalanx_clients.replica as replica_module

    spy = FakeEncoderSpy(replica_module.encode_update)
    monkeypatch.setattr(replica_module, "encode_update", spy)
    config = _honest({**SPLIT, "rd_lambda": 0.3, "low_rank": 4})
    _run_and_check_in_step(config)  # r = 3 with exact digests: any disagreement is flagged
    assert any("LOWRANK" in layers for layers in spy.quantizers)
