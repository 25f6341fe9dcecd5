"""RobustStrategy on reply messages built by hand: screening, detection, aggregation, reports."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Error,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.common.serde import metric_record_from_proto, metric_record_to_proto
from flwr.serverapp.exception import InconsistentMessageReplies
from flwr.serverapp.strategy import FedAvg, Krum
from flwr.supercore.task_identity import TaskIdentity

from phalanx.detection import DEFAULT_OUTLIER_THRESHOLD
from phalanx.flower.strategy import (
    METRIC_ACCEPTED,
    METRIC_FLAGGED,
    METRIC_FLAGGED_NODE_IDS,
    ArrayLayout,
    FlaggedNode,
    RobustStrategy,
    flag_outliers,
)
from tests.support.idle_grid import IdleGrid

Arrays = dict[str, npt.NDArray[Any]]

# Flower node ids are unsigned 64-bit; use ids above 2**63 to catch signed conversions.
HONEST = [2**64 - 1 - i for i in range(5)]
ATTACKER = 2**63 + 5
MALFORMED = 2**63 + 9


def model(offset: float = 0.0, seed: int = 0) -> Arrays:
    rng = np.random.default_rng(seed)
    return {
        "weight": (offset + rng.normal(1.0, 0.1, (3, 2))).astype(np.float32),
        "bias": (offset + rng.normal(0.0, 0.1, 2)).astype(np.float32),
    }


def honest_models(offset: float = 0.0) -> list[Arrays]:
    return [model(offset, seed) for seed in range(len(HONEST))]


def reversed_update(arrays: Arrays) -> Arrays:
    """The update (from the zero model) reversed and scaled by 100."""
    return {k: (-100 * v).astype(v.dtype) for k, v in arrays.items()}


@pytest.fixture(autouse=True)
def server_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """Set what a running ServerApp has set: creating a message needs a run id."""
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)


def instruction(node: int) -> Message:
    return Message(RecordDict(), dst_node_id=node, message_type=MessageType.TRAIN)


def reply(
    node: int,
    arrays: dict[str, npt.NDArray[Any]] | None,
    metrics: dict[str, Any] | None = None,
) -> Message:
    content = RecordDict()
    if arrays is not None:
        content["arrays"] = ArrayRecord({k: Array(v) for k, v in arrays.items()})
    content["metrics"] = MetricRecord(
        metrics if metrics is not None else {"num-examples": 10, "loss": 0.5}
    )
    return Message(content, reply_to=instruction(node))


def error_reply(node: int) -> Message:
    return Message(Error(code=1, reason="ClientApp raised"), reply_to=instruction(node))


def honest_replies(offset: float = 0.0) -> list[Message]:
    return [reply(n, m) for n, m in zip(HONEST, honest_models(offset), strict=True)]


def honest_median() -> Arrays:
    models = honest_models()
    return {k: np.median(np.stack([m[k] for m in models]), axis=0) for k in models[0]}


def as_numpy(record: ArrayRecord | None) -> Arrays:
    assert record is not None
    return {k: v.numpy() for k, v in record.items()}


def assert_honest_median(record: ArrayRecord | None) -> None:
    got, want = as_numpy(record), honest_median()
    assert list(got) == list(want)
    for key in want:
        assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape
        np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------------------
# Detection and aggregation


def test_poisoned_node_is_flagged_and_the_aggregate_is_the_honest_median() -> None:
    strategy = RobustStrategy(rule="median")
    replies = [*honest_replies(), reply(ATTACKER, reversed_update(model(seed=9)))]

    arrays, metrics = strategy.aggregate_train(1, replies)

    [flagged] = strategy.flagged[1]
    assert (flagged.node_id, flagged.kind) == (ATTACKER, "outlier")
    assert flagged.score is not None and flagged.threshold == DEFAULT_OUTLIER_THRESHOLD
    assert flagged.score > flagged.threshold
    assert f"Node {ATTACKER}'s update lies far" in flagged.summary
    assert_honest_median(arrays)
    assert metrics is not None
    assert metrics[METRIC_FLAGGED] == 1
    assert metrics[METRIC_FLAGGED_NODE_IDS] == [ATTACKER]
    assert metrics[METRIC_ACCEPTED] == len(HONEST)
    assert metrics["loss"] == pytest.approx(0.5)
    assert "num-examples" not in metrics  # FedAvg drops the weight key too


def test_multi_krum_after_exclusion_averages_the_honest_updates() -> None:
    strategy = RobustStrategy(rule="multi_krum", f=1)
    replies = [*honest_replies(), reply(ATTACKER, reversed_update(model(seed=9)))]

    arrays, _ = strategy.aggregate_train(1, replies)

    # Multi-Krum keeps n - f = 4 of the 5 honest updates: a point inside their hull.
    got, models = as_numpy(arrays), honest_models()
    for key in got:
        stacked = np.stack([m[key] for m in models])
        assert (stacked.min(axis=0) - 1e-6 <= got[key]).all()
        assert (got[key] <= stacked.max(axis=0) + 1e-6).all()
    assert [n.node_id for n in strategy.flagged[1]] == [ATTACKER]


def test_round_without_an_outlier_flags_nobody_and_skips_the_callback() -> None:
    calls: list[tuple[int, list[FlaggedNode]]] = []
    strategy = RobustStrategy(on_flagged=lambda rnd, flagged: calls.append((rnd, flagged)))

    arrays, metrics = strategy.aggregate_train(1, honest_replies())
    strategy.aggregate_train(2, [*honest_replies(), reply(ATTACKER, reversed_update(model()))])

    assert strategy.flagged[1] == []
    assert metrics is not None and metrics[METRIC_FLAGGED_NODE_IDS] == []
    assert_honest_median(arrays)
    assert [(rnd, [n.node_id for n in flagged]) for rnd, flagged in calls] == [(2, [ATTACKER])]


def test_flag_outliers_gives_detection_evidence_keyed_by_node_id() -> None:
    rows = torch.stack(
        [torch.from_numpy(np.concatenate([a.ravel() for a in m.values()])) for m in honest_models()]
    )
    poisoned = torch.cat([rows, -100 * rows[:1]])

    [flagged] = flag_outliers(poisoned, [*HONEST, ATTACKER], f=1)

    assert flagged.node_id == ATTACKER and flagged.evidence is not None
    assert flagged.evidence.worker == ATTACKER
    assert (flagged.evidence.kind, flagged.evidence.severity) == ("outlier", "low")
    assert list(flagged.evidence.files[0].digests) == [ATTACKER]
    record = flagged.to_dict()
    assert record["node_id"] == str(ATTACKER)  # exact in JSON, also for JavaScript readers
    assert record["evidence"]["worker"] == ATTACKER
    assert flag_outliers(poisoned, [*HONEST, ATTACKER], f=1, threshold=None) == []


# ---------------------------------------------------------------------------------------
# Malformed replies


def _nan(m: Arrays) -> Arrays:
    m["bias"][0] = np.nan
    return m


def _bad(arrays: Arrays | None, metrics: dict[str, Any] | None = None) -> Callable[[], Message]:
    return lambda: reply(MALFORMED, arrays, metrics)


# Replies are built inside the test: creating a message needs the server identity.
MALFORMED_CASES: dict[str, tuple[str, Callable[[], Message]]] = {
    "error message": ("error", lambda: error_reply(MALFORMED)),
    "wrong shape": ("layout", _bad({**model(), "bias": np.zeros(3, np.float32)})),
    "missing array": ("layout", _bad({"weight": model()["weight"]})),
    "extra array": ("layout", _bad({**model(), "extra": np.zeros(1, np.float32)})),
    "NaN": ("nonfinite", _bad(_nan(model()))),
    "beyond float32": ("nonfinite", _bad({**model(), "bias": np.full(2, 1e300)})),
    "NaN metric": ("nonfinite", _bad(model(), {"num-examples": 10, "loss": np.nan})),
    "no arrays": ("malformed", _bad(None)),
    "text array": ("malformed", _bad({**model(), "bias": np.array(["a", "b"])})),
    "no weight": ("malformed", _bad(model(), {"loss": 0.5})),
    "negative weight": ("malformed", _bad(model(), {"num-examples": -1, "loss": 0.5})),
    "other metric keys": ("malformed", _bad(model(), {"num-examples": 10, "x": 1.0})),
}


@pytest.mark.parametrize(("kind", "bad"), MALFORMED_CASES.values(), ids=list(MALFORMED_CASES))
def test_malformed_reply_is_rejected_and_reported_and_the_rest_aggregated(
    kind: str, bad: Callable[[], Message]
) -> None:
    strategy = RobustStrategy()

    arrays, metrics = strategy.aggregate_train(1, [*honest_replies(), bad()])

    [flagged] = strategy.flagged[1]
    assert (flagged.node_id, flagged.kind) == (MALFORMED, kind)
    assert flagged.summary.startswith(f"Node {MALFORMED} ")
    assert_honest_median(arrays)
    assert metrics is not None and metrics[METRIC_FLAGGED_NODE_IDS] == [MALFORMED]


def test_duplicate_replies_from_one_node_are_both_rejected() -> None:
    strategy = RobustStrategy()
    twice = [reply(MALFORMED, model(seed=1)), reply(MALFORMED, model(seed=2))]

    arrays, _ = strategy.aggregate_train(1, [*honest_replies(), *twice])

    assert [(n.node_id, n.kind) for n in strategy.flagged[1]] == [(MALFORMED, "malformed")]
    assert_honest_median(arrays)


def test_reference_layout_is_the_majority_so_one_node_cannot_impose_its_own() -> None:
    # The odd reply comes from the smallest node id, so "first reply wins" would pick it.
    odd = reply(1, {"weight": np.ones((2, 3), np.float32), "bias": np.zeros(2, np.float32)})
    strategy = RobustStrategy()

    arrays, _ = strategy.aggregate_train(1, [odd, *honest_replies()])

    assert [(n.node_id, n.kind) for n in strategy.flagged[1]] == [(1, "layout")]
    assert_honest_median(arrays)


def test_flower_strategies_neither_name_the_rejected_node_nor_survive_a_malformed_reply() -> None:
    """The gap RobustStrategy fills (Flower issue #2252), measured on Flower 1.42."""
    poisoned = [*honest_replies(), reply(ATTACKER, reversed_update(model(seed=9)))]
    _, metrics = Krum(num_malicious_nodes=1).aggregate_train(1, poisoned)
    assert metrics is not None
    assert all(ATTACKER not in (v if isinstance(v, list) else [v]) for v in metrics.values())

    with_bad = [*honest_replies(), MALFORMED_CASES["no weight"][1]()]
    for peer in (Krum(num_malicious_nodes=1), FedAvg()):
        with pytest.raises(InconsistentMessageReplies):
            peer.aggregate_train(1, with_bad)


# ---------------------------------------------------------------------------------------
# Round bookkeeping


def test_too_few_replies_for_the_rule_keep_the_model_but_still_report() -> None:
    # Multi-Krum with f = 1 needs 5 updates; excluding the attacker leaves 4.
    strategy = RobustStrategy(rule="multi_krum", f=1)
    replies = [*honest_replies()[:4], reply(ATTACKER, reversed_update(model(seed=9)))]

    arrays, metrics = strategy.aggregate_train(1, replies)

    assert arrays is None  # Strategy.start then keeps the current global model
    assert metrics is not None
    assert metrics[METRIC_FLAGGED_NODE_IDS] == [ATTACKER]
    assert metrics[METRIC_ACCEPTED] == 0


def test_flagged_node_ids_above_int64_survive_metric_record_serialization() -> None:
    strategy = RobustStrategy()
    replies = [*honest_replies(), reply(2**64 - 100, reversed_update(model(seed=9)))]

    _, metrics = strategy.aggregate_train(1, replies)

    assert metrics is not None
    restored = metric_record_from_proto(metric_record_to_proto(metrics))
    assert restored[METRIC_FLAGGED_NODE_IDS] == [2**64 - 100]


def test_evaluation_skips_malformed_replies_and_nodes_flagged_in_training() -> None:
    strategy = RobustStrategy()
    strategy.aggregate_train(1, [*honest_replies(), reply(ATTACKER, reversed_update(model()))])
    honest = [
        reply(n, None, {"num-examples": 10 * (i + 1), "acc": 0.1 * i}) for i, n in enumerate(HONEST)
    ]
    liar = reply(ATTACKER, None, {"num-examples": 10**9, "acc": 1.0})
    broken = reply(MALFORMED, None, {"acc": 1.0})

    metrics = strategy.aggregate_evaluate(1, [*honest, liar, broken])

    weights = np.arange(1, len(HONEST) + 1)
    expected = float(np.average(0.1 * np.arange(len(HONEST)), weights=weights))
    assert metrics is not None and metrics["acc"] == pytest.approx(expected)
    with pytest.raises(InconsistentMessageReplies):
        FedAvg().aggregate_evaluate(1, [*honest, broken])


def test_configured_round_sends_like_fedavg_and_aggregates_updates_from_the_model_sent() -> None:
    # Centered clipping (center zero, radius 1) is not translation-equivariant: on the
    # returned models (norm ~ 30) it would shrink everything; on the updates (norm < 1)
    # it clips nothing and returns the model sent plus the mean update.
    replies = [reply(n, m) for n, m in zip(HONEST, honest_models(offset=9.0), strict=True)]
    sent = {"weight": np.full((3, 2), 10.0, np.float32), "bias": np.full(2, 9.0, np.float32)}
    attack = {k: sent[k] - 100 * (v - sent[k]) for k, v in honest_models(offset=9.0)[0].items()}
    strategy = RobustStrategy(rule="centered_clipping", rule_options={"tau": 1.0})
    grid = IdleGrid([*HONEST, ATTACKER])

    messages = list(
        strategy.configure_train(
            3, ArrayRecord({k: Array(v) for k, v in sent.items()}), ConfigRecord(), grid
        )
    )
    arrays, _ = strategy.aggregate_train(3, [*replies, reply(ATTACKER, attack)])

    assert sorted(m.metadata.dst_node_id for m in messages) == sorted([*HONEST, ATTACKER])
    assert all(m.metadata.message_type == MessageType.TRAIN for m in messages)
    assert all(m.content["config"]["server-round"] == 3 for m in messages)
    assert [n.node_id for n in strategy.flagged[3]] == [ATTACKER]
    got, models = as_numpy(arrays), honest_models(offset=9.0)
    for key, value in got.items():
        np.testing.assert_allclose(value, np.mean([m[key] for m in models], axis=0), atol=1e-5)


# ---------------------------------------------------------------------------------------
# Layout and settings


def test_layout_rebuild_restores_keys_shapes_and_dtypes() -> None:
    arrays = {
        "w": np.arange(6, dtype=np.float64).reshape(2, 3) / 7,
        "steps": np.array([3, 4], dtype=np.int64),
        "mask": np.array([[True, False]]),
        "half": np.ones(2, np.float16),
    }
    record = ArrayRecord({k: Array(v) for k, v in arrays.items()})
    layout = ArrayLayout.of(record)

    vector = layout.flatten(record)
    rebuilt = as_numpy(layout.rebuild(vector + 0.25))

    assert vector.shape == (layout.size,) == (12,)
    assert list(rebuilt) == list(arrays)
    for key, value in arrays.items():
        assert rebuilt[key].dtype == value.dtype and rebuilt[key].shape == value.shape
    np.testing.assert_allclose(rebuilt["w"], arrays["w"] + 0.25, rtol=1e-6)
    assert rebuilt["steps"].tolist() == [3, 4]  # rounded back to integers
    assert rebuilt["mask"].tolist() == [[True, False]]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"rule": "mode"}, "unknown aggregator 'mode'"),
        ({"pre": "shuffle"}, "unknown pre-aggregator 'shuffle'"),
        ({"f": -1}, "f must be a non-negative int"),
        ({"outlier_threshold": 0.0}, "outlier_threshold must be positive"),
        # Red team: an infinite threshold or ratio turned screening off without a word,
        # a boolean passed as 1 and a string failed with a TypeError.
        ({"outlier_threshold": float("inf")}, "outlier_threshold must be positive and finite"),
        ({"outlier_threshold": True}, "outlier_threshold must be positive and finite"),
        ({"outlier_ratio": float("inf")}, "outlier_ratio must be at least 1 and finite"),
        ({"outlier_ratio": float("nan")}, "outlier_ratio must be at least 1 and finite"),
        ({"outlier_ratio": True}, "outlier_ratio must be at least 1 and finite"),
        ({"outlier_ratio": "5"}, "outlier_ratio must be at least 1 and finite"),
    ],
)
def test_invalid_settings_fail_at_construction(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RobustStrategy(**settings)
