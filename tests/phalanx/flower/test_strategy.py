"""RobustStrategy dropped into a minimal Flower app, run by Flower's simulation engine (Ray).

Six nodes fit a linear model to their own synthetic data; the node with partition id 0
multiplies its update by -100. The ServerApp asks every node for its partition id
(a query message) so the test knows which Flower node id is the attacker, then runs
``RobustStrategy.start`` like any Flower strategy.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pytest
from flwr.app import (
    Array,
    ArrayRecord,
    Context,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import Result
from flwr.simulation import run_simulation

from phalanx.flower.strategy import (
    METRIC_ACCEPTED,
    METRIC_FLAGGED,
    METRIC_FLAGGED_NODE_IDS,
    FlaggedNode,
    RobustStrategy,
)
from phalanx.roster import SimulatedRoster, wait_for_roster

pytestmark = pytest.mark.slow

NUM_NODES = 6
ROUNDS = 3
ATTACKER = 0  # partition id
FEATURES, OUTPUTS, SAMPLES = 4, 2, 64
LOCAL_STEPS, LEARNING_RATE = 5, 0.1

Arrays = dict[str, npt.NDArray[np.float32]]


def partition(pid: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Node ``pid``'s data: y = x W* + b* + noise, the same W*, b* for every node."""
    truth = np.random.default_rng(7)
    w_true = truth.normal(size=(FEATURES, OUTPUTS)).astype(np.float32)
    b_true = truth.normal(size=OUTPUTS).astype(np.float32)
    rng = np.random.default_rng(1000 + pid)
    x = rng.normal(size=(SAMPLES, FEATURES)).astype(np.float32)
    noise = rng.normal(scale=0.1, size=(SAMPLES, OUTPUTS)).astype(np.float32)
    return x, x @ w_true + b_true + noise


def local_fit(model: Arrays, pid: int) -> tuple[Arrays, float]:
    """A few steps of gradient descent on the mean squared error; returns model and loss."""
    x, y = partition(pid)
    w, b = model["weight"].copy(), model["bias"].copy()
    for _ in range(LOCAL_STEPS):
        residual = x @ w + b - y
        w -= np.float32(LEARNING_RATE * 2 / SAMPLES) * (x.T @ residual)
        b -= np.float32(LEARNING_RATE * 2 / SAMPLES) * residual.sum(axis=0)
    loss = float(np.mean((x @ w + b - y) ** 2))
    return {"weight": w, "bias": b}, loss


def to_record(arrays: Arrays) -> ArrayRecord:
    return ArrayRecord({k: Array(v) for k, v in arrays.items()})


def initial_model() -> Arrays:
    return {
        "weight": np.zeros((FEATURES, OUTPUTS), np.float32),
        "bias": np.zeros(OUTPUTS, np.float32),
    }


def build_client_app() -> ClientApp:
    app = ClientApp()

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        pid = int(context.node_config["partition-id"])
        return Message(RecordDict({"node": MetricRecord({"partition-id": pid})}), reply_to=msg)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        pid = int(context.node_config["partition-id"])
        sent = {k: v.numpy() for k, v in msg.content.array_records["arrays"].items()}
        fitted, loss = local_fit(sent, pid)
        if pid == ATTACKER:
            fitted = {k: sent[k] - 100 * (fitted[k] - sent[k]) for k in fitted}
        content = RecordDict(
            {
                "arrays": to_record(fitted),
                "metrics": MetricRecord({"num-examples": SAMPLES, "train_loss": loss}),
            }
        )
        return Message(content, reply_to=msg)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        x, y = partition(int(context.node_config["partition-id"]))
        m = {k: v.numpy() for k, v in msg.content.array_records["arrays"].items()}
        loss = float(np.mean((x @ m["weight"] + m["bias"] - y) ** 2))
        metrics = MetricRecord({"num-examples": SAMPLES, "eval_loss": loss})
        return Message(RecordDict({"metrics": metrics}), reply_to=msg)

    return app


def build_server_app(out: dict[str, Any]) -> ServerApp:
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        roster = wait_for_roster(
            grid.get_node_ids, SimulatedRoster("strategy"), NUM_NODES, timeout=120
        )
        nodes = list(roster.node_of_worker.values())
        queries = [
            Message(RecordDict(), dst_node_id=n, message_type=MessageType.QUERY) for n in nodes
        ]
        replies = grid.send_and_receive(queries, timeout=120)
        out["partition_of"] = {
            r.metadata.src_node_id: cast(int, r.content.metric_records["node"]["partition-id"])
            for r in replies
        }
        calls: list[tuple[int, list[FlaggedNode]]] = []
        strategy = RobustStrategy(
            rule="median",
            f=1,
            min_available_nodes=NUM_NODES,
            on_flagged=lambda rnd, flagged: calls.append((rnd, flagged)),
        )
        out["result"] = strategy.start(
            grid=grid,
            initial_arrays=to_record(initial_model()),
            num_rounds=ROUNDS,
            timeout=120,
        )
        out["strategy"], out["calls"] = strategy, calls

    return app


def honest_median_run() -> Arrays:
    """What the honest nodes alone produce: the coordinate median of their updates."""
    model = initial_model()
    for _ in range(ROUNDS):
        fitted = [local_fit(model, pid)[0] for pid in range(NUM_NODES) if pid != ATTACKER]
        model = {
            k: model[k] + np.median(np.stack([m[k] - model[k] for m in fitted]), axis=0)
            for k in model
        }
    return model


@pytest.fixture(scope="module")
def simulated(ray_head: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    run_simulation(
        server_app=build_server_app(out),
        client_app=build_client_app(),
        num_supernodes=NUM_NODES,
        backend_config={
            "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
            "init_args": {
                # The test process's own head, never one another test started beside it.
                "address": ray_head,
                "logging_level": logging.WARNING,
                "log_to_driver": False,
            },
        },
    )
    assert "result" in out, "the ServerApp did not finish; see the log above"
    return out


def test_attacker_node_is_flagged_every_round_and_nobody_else(simulated: dict[str, Any]) -> None:
    partition_of: dict[int, int] = simulated["partition_of"]
    assert sorted(partition_of.values()) == list(range(NUM_NODES))
    attacker = next(node for node, pid in partition_of.items() if pid == ATTACKER)
    strategy: RobustStrategy = simulated["strategy"]
    assert list(strategy.flagged) == list(range(1, ROUNDS + 1))
    for flagged in strategy.flagged.values():
        assert [(n.node_id, n.kind) for n in flagged] == [(attacker, "outlier")]
        assert flagged[0].score is not None and flagged[0].score > 3.5
        assert str(attacker) in flagged[0].summary
    assert [rnd for rnd, _ in simulated["calls"]] == list(range(1, ROUNDS + 1))


def test_round_metrics_report_the_attacker_node_id(simulated: dict[str, Any]) -> None:
    attacker = next(n for n, pid in simulated["partition_of"].items() if pid == ATTACKER)
    result: Result = simulated["result"]
    assert sorted(result.train_metrics_clientapp) == list(range(1, ROUNDS + 1))
    for metrics in result.train_metrics_clientapp.values():
        assert metrics[METRIC_FLAGGED] == 1
        assert metrics[METRIC_FLAGGED_NODE_IDS] == [attacker]
        assert metrics[METRIC_ACCEPTED] == NUM_NODES - 1
        assert "train_loss" in metrics


def test_final_model_is_what_the_honest_nodes_alone_produce(simulated: dict[str, Any]) -> None:
    result: Result = simulated["result"]
    final = {k: v.numpy() for k, v in result.arrays.items()}
    expected = honest_median_run()
    assert set(final) == set(expected)
    for key, value in expected.items():
        assert final[key].dtype == np.float32 and final[key].shape == value.shape
        assert np.isfinite(final[key]).all()
        np.testing.assert_allclose(final[key], value, rtol=1e-5, atol=1e-5)
    # Training made progress: the honest nodes' loss fell from round 1 to the last.
    losses = [
        cast(float, m["eval_loss"]) for _, m in sorted(result.evaluate_metrics_clientapp.items())
    ]
    assert len(losses) == ROUNDS and losses[-1] < losses[0]
