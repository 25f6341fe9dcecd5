"""Federated evaluation reports: judged alone, bounded, aggregated by count."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.event_kinds import EventKind
from phalanx.federated_evaluation import (
    MAX_LOSS,
    EvaluationExchange,
    EvaluationReport,
    federated_result,
    judge_report,
)
from phalanx.replies import Rejection


def report(
    worker: int, loss: object = 0.5, accuracy: object = 0.8, n: object = 10
) -> EvaluationReport:
    return EvaluationReport(worker, loss, accuracy, n)


@pytest.mark.parametrize(
    ("loss", "accuracy", "n", "why"),
    [
        (float("nan"), 0.5, 10, "loss nan"),
        (0.5, float("nan"), 10, "accuracy nan"),
        (0.5, float("inf"), 10, "accuracy inf"),
        (0.5, 7.0, 10, "accuracy 7.0"),
        (0.5, -0.1, 10, "accuracy -0.1"),
        (-1.0, 0.5, 10, "loss -1.0"),
        (-math.inf, 0.5, 10, "loss -inf"),
        (0.5, 0.5, -5, "count -5"),
        (0.5, 0.5, 0, "count 0"),
        (0.5, 0.5, 10**30, "count 1000000000000000000000000000000"),
        (0.5, 0.5, 2.5, "count 2.5"),
        (0.5, 0.5, True, "count bool"),
        ("0.5", 0.5, 10, "loss str"),
        (0.5, None, 10, "accuracy NoneType"),
        (0.5, 0.5, [1], "count list"),
    ],
)
def test_an_impossible_report_is_refused_with_its_reason(
    loss: object, accuracy: object, n: object, why: str
) -> None:
    judged = judge_report(report(3, loss, accuracy, n))

    assert judged.status == "refused"
    assert (judged.loss, judged.accuracy, judged.num_samples) == (None, None, None)
    field, shown = why.split(" ", 1)
    said = f"{'sample count' if field == 'count' else field} {shown} "
    assert any(reason.startswith(said) for reason in judged.reasons), judged.reasons


@pytest.mark.parametrize("loss", [MAX_LOSS * 10, math.inf, 10**400])
def test_a_loss_beyond_the_bound_counts_as_the_bound_without_an_event(loss: object) -> None:
    judged = judge_report(report(1, loss=loss))
    assert (judged.status, judged.loss) == ("clipped", MAX_LOSS)

    result = federated_result(EvaluationExchange([report(0), report(1, loss=loss)]), None)
    assert result.events(1, {}) == []
    assert result.metrics()["fed_clipped_losses"] == 1.0


def test_the_aggregate_is_count_weighted_and_counts_are_capped() -> None:
    exchange = EvaluationExchange(
        [report(0, 1.0, 0.5, 10), report(1, 3.0, 1.0, 30), report(2, 2.0, 0.0, 2**40)],
        failures=[Rejection(3, "worker_error", "no test split")],
    )

    result = federated_result(exchange, largest_test=30)
    metrics = result.metrics()

    assert result.cap == 30 and result.judged[2].capped and result.judged[2].num_samples == 30
    assert metrics["fed_samples"] == 70.0
    assert metrics["fed_accuracy"] == pytest.approx((0.5 * 10 + 1.0 * 30 + 0.0 * 30) / 70)
    assert metrics["fed_loss"] == pytest.approx((10 + 90 + 60) / 70)
    assert (metrics["fed_capped_claims"], metrics["fed_failed"], metrics["fed_reports"]) == (
        1.0,
        1.0,
        3.0,
    )


def test_refused_reports_are_medium_events_and_count_for_nothing() -> None:
    exchange = EvaluationExchange([report(0), report(1, accuracy=7), report(1, accuracy=0.1)])

    result = federated_result(exchange, None)
    (event,) = result.events(4, {1: "client-1"})

    assert result.metrics()["fed_accuracy"] == 0.8  # the second report of worker 1 is ignored
    assert (event.worker, event.client_id, event.kind, event.severity) == (
        1,
        "client-1",
        EventKind.IMPLAUSIBLE_EVALUATION,
        "medium",
    )
    assert "accuracy 7" in event.evidence["reason"] and event.evidence["round"] == 4


def test_without_any_report_that_counts_there_is_no_aggregate() -> None:
    metrics = federated_result(EvaluationExchange([report(0, accuracy=2.0)]), None).metrics()
    assert "fed_accuracy" not in metrics and metrics["fed_refused"] == 1.0


@given(
    honest=st.lists(
        st.tuples(st.floats(0, 1), st.floats(0, 10), st.integers(1, 100)), min_size=3, max_size=12
    ),
    liars=st.lists(
        st.tuples(
            st.one_of(st.floats(allow_nan=True), st.integers(-(10**40), 10**40)),
            st.one_of(st.floats(allow_nan=True), st.integers(-5, 5)),
            st.one_of(st.integers(-(10**40), 10**40), st.floats(allow_nan=True)),
        ),
        max_size=3,
    ),
)
def test_liars_move_the_aggregate_no_further_than_their_capped_weight(
    honest: list[tuple[float, float, int]], liars: list[tuple[object, object, object]]
) -> None:
    reports = [report(w, loss, acc, n) for w, (acc, loss, n) in enumerate(honest)]
    reports += [report(100 + i, loss, acc, n) for i, (acc, loss, n) in enumerate(liars)]
    cap = max(n for _, _, n in honest)
    alone = federated_result(EvaluationExchange(reports[: len(honest)]), cap).metrics()
    mixed = federated_result(EvaluationExchange(reports), cap).metrics()

    weight = sum(n for _, _, n in honest)
    share = len(liars) * cap / (weight + len(liars) * cap)
    assert math.isfinite(mixed["fed_accuracy"]) and math.isfinite(mixed["fed_loss"])
    assert abs(mixed["fed_accuracy"] - alone["fed_accuracy"]) <= share + 1e-9
    assert abs(mixed["fed_loss"] - alone["fed_loss"]) <= MAX_LOSS * share + 1e-6


def test_a_failed_evaluation_is_recorded_once_by_its_kind() -> None:
    exchange = EvaluationExchange(
        [report(0)],
        failures=[
            Rejection(1, EventKind.WORKER_ERROR, "no test split"),
            Rejection(2, EventKind.MALFORMED_REPLY, "accuracy is not a number"),
            Rejection(3, EventKind.DATA_MISMATCH, "holds 1x28x28 images"),
        ],
    )
    result = federated_result(exchange, None)

    # Worker 3's training failed on the same data this round: its event is there already.
    events = result.events(2, {1: "c1", 2: "c2"}, frozenset({(3, EventKind.DATA_MISMATCH)}))

    assert [(e.worker, e.client_id, e.kind, e.severity) for e in events] == [
        (1, "c1", EventKind.WORKER_ERROR, "low"),
        (2, "c2", EventKind.MALFORMED_REPLY, "medium"),
    ]
    assert events[1].evidence["reason"] == "evaluation: accuracy is not a number"
    assert "worker 2 did not evaluate the global model" in events[1].evidence["summary"]


def test_workers_asked_that_neither_report_nor_fail_are_silent_and_counted() -> None:
    exchange = EvaluationExchange(
        [report(0), report(0), report(5)],
        failures=[Rejection(1, EventKind.WORKER_ERROR, "no test split")],
    )
    result = federated_result(exchange, None, asked=[3, 2, 1, 0])

    assert result.silent == (2, 3)
    assert result.metrics()["fed_silent"] == 2.0
    assert [e.worker for e in result.events(1, {})] == [1]
