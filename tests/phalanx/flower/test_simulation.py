"""Runs through Flower's simulation engine (Ray), small: digits, few rounds."""

from __future__ import annotations

import dataclasses

import pytest

from phalanx.flower.simulation import SimulationEngine
from phalanx.plan import adversaries
from phalanx.reports import RoundReport
from phalanx.runs import execute_run, summarize
from tests.support.configs import local_config, small_config
from tests.support.inprocess import inprocess_transport
from tests.support.torch_threads import one_torch_thread

pytestmark = pytest.mark.slow


class FakeSink:
    """Keeps rounds in memory (a test double of the database)."""

    def __init__(self) -> None:
        self.reports: list[RoundReport] = []

    def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
        self.reports.append(report)


def test_flower_simulation_flags_every_adversary_and_no_honest_worker(
    ray_engine: SimulationEngine,
) -> None:
    config = small_config(rounds=2)
    sink = FakeSink()
    reports = execute_run(config, run_id="sim-test", sink=sink, transport=ray_engine)
    truth = adversaries(config)
    assert [r.round for r in reports] == [1, 2]
    assert sink.reports == reports
    for report in reports:
        assert set(report.flagged) == truth
        assert not report.rejected
        assert report.bytes_up > 0 and report.bytes_down > 0
    summary = summarize(config, "sim-test", reports)
    assert (summary.precision, summary.recall) == (1.0, 1.0)


def test_codec_through_flower_keeps_worker_state_between_rounds(
    ray_engine: SimulationEngine,
) -> None:
    config = small_config(rounds=3, detection={"mode": "exact"}, codec={"enabled": True})
    reports = execute_run(config, run_id="sim-codec", sink=FakeSink(), transport=ray_engine)
    truth = adversaries(config)
    for report in reports:
        assert set(report.flagged) == truth
        assert not report.rejected
    # Round 1 sends the full model; later rounds only the compressed delta, which
    # workers can apply only if Flower kept their state (a lost state would sync
    # and cost the full model again).
    assert reports[2].bytes_down < reports[0].bytes_down / 4


def test_low_rank_with_error_feedback_through_flower_matches_the_in_process_run(
    ray_engine: SimulationEngine,
) -> None:
    from phalanx.data import load_dataset
    from phalanx.roster import simulated_roster
    from phalanx_clients.inprocess import InProcessTransport
    from phalanx_clients.worker import Worker

    config = small_config(
        rounds=3,
        assignment={"scheme": "none", "num_workers": 7, "r": 1},
        attack={"name": None, "q": 0},
        codec={
            "enabled": True,
            "rd_lambda": 0.3,
            "unbiased": True,
            "low_rank": 4,
            "error_feedback": True,
        },
    )
    run_id = "sim-low-rank"
    # Seven workers on three virtual nodes: a node's tasks of a round travel in one
    # message (a batch), which it answers worker by worker, each keeping its own state
    # on the node it shares.
    engine = dataclasses.replace(ray_engine, nodes=3)
    flower = execute_run(config, run_id=run_id, sink=FakeSink(), transport=engine)
    train = load_dataset(config.data.dataset, "train")
    workers = {
        ident.worker: Worker(
            config=config, train_set=train, client_id=ident.client_id, private_key=ident.private_key
        )
        for ident in simulated_roster(run_id, config.assignment.num_workers)
    }
    with one_torch_thread():  # as the ClientApp trains: the float sums depend on it
        local = execute_run(
            config, run_id=run_id, sink=FakeSink(), transport=InProcessTransport(workers)
        )
    # Each worker's error memory lives in Flower's node state between rounds; a lost or
    # stale memory (or another worker's, on the same node) would change the updates, and
    # so the model, from round 2 on.
    assert [r.model_digest for r in flower] == [r.model_digest for r in local]
    assert all(not r.rejected for r in flower)
    assert all(
        w.replica.feedback is not None and w.replica.feedback.memory.any() for w in workers.values()
    )


def test_an_attack_on_local_data_through_flower_matches_the_in_process_run(
    ray_engine: SimulationEngine,
) -> None:
    # ALIE is not flagged, so both adversaries' forged updates, each computed from the
    # reference crowd that its ClientApp process derives for itself, enter the aggregate.
    config = local_config(
        rounds=2,
        data={"partition": {"kind": "dirichlet", "alpha": 0.5}},
        attack={"name": "alie", "q": 2},
    )
    run_id = "sim-local-alie"
    flower = execute_run(config, run_id=run_id, sink=FakeSink(), transport=ray_engine)
    with one_torch_thread():  # as the ClientApp trains: the float sums depend on it
        local = execute_run(
            config, run_id=run_id, sink=FakeSink(), transport=inprocess_transport(config, run_id)
        )
    honest = local_config(rounds=1, data={"partition": {"kind": "dirichlet", "alpha": 0.5}})
    with one_torch_thread():
        clean = execute_run(
            honest, run_id=run_id, sink=FakeSink(), transport=inprocess_transport(honest, run_id)
        )

    assert [r.model_digest for r in flower] == [r.model_digest for r in local]
    assert flower[0].model_digest != clean[0].model_digest  # the forged updates counted
    assert [r.flagged for r in flower] == [r.flagged for r in local]
    assert not any(r.rejected for r in flower)
    for a, b in zip(flower, local, strict=True):
        assert a.clients == b.clients


def test_a_local_data_run_through_flower_matches_the_in_process_run(
    ray_engine: SimulationEngine,
) -> None:
    # Each simulated ClientApp derives its own part of the seeded partition from the run
    # config; the in-process workers are given theirs: the same parts, the same updates.
    config = local_config(rounds=2, data={"partition": {"kind": "dirichlet", "alpha": 0.5}})
    run_id = "sim-local"
    flower = execute_run(config, run_id=run_id, sink=FakeSink(), transport=ray_engine)
    with one_torch_thread():  # as the ClientApp trains: the float sums depend on it
        local = execute_run(
            config, run_id=run_id, sink=FakeSink(), transport=inprocess_transport(config, run_id)
        )

    assert [r.model_digest for r in flower] == [r.model_digest for r in local]
    assert [r.metrics["samples_weighted"] for r in flower] == [
        r.metrics["samples_weighted"] for r in local
    ]
    assert not any(r.rejected for r in flower)
    assert flower[-1].accuracy > flower[0].accuracy
    # Federated evaluation through the ClientApp's evaluate handler: every client's
    # report, and so the aggregate, equal the in-process workers' to the bit.
    # Only the bytes differ: each Flower message carries the run config beside the model.
    fed = [k for k in flower[0].metrics if k.startswith("fed_") and k != "fed_bytes_down"]
    assert "fed_accuracy" in fed and "fed_loss" in fed
    for a, b in zip(flower, local, strict=True):
        assert {k: a.metrics[k] for k in fed} == {k: b.metrics[k] for k in fed}
        assert a.metrics["fed_bytes_down"] > b.metrics["fed_bytes_down"] > 0
        assert a.clients == b.clients
        assert all(c.eval_status == "counted" for c in a.clients)
