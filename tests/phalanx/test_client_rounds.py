"""Each client's row of a local-data round: distance to the aggregate, federated report."""

from __future__ import annotations

import pytest
import torch

from phalanx.client_rounds import client_rounds, distance_ratios
from phalanx.detection import Replica
from phalanx.federated_evaluation import EvaluationExchange, EvaluationReport, federated_result
from phalanx.replies import Rejection


def test_distances_are_l2_to_the_aggregate_over_their_median() -> None:
    rows = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]])
    values, ratios = distance_ratios(rows, torch.zeros(2))
    assert values == [1.0, 2.0, 5.0]
    assert ratios == [0.5, 1.0, 2.5]


def test_a_zero_median_gives_no_ratio_but_to_rows_on_the_aggregate() -> None:
    rows = torch.tensor([[0.0], [0.0], [4.0]])
    assert distance_ratios(rows, torch.zeros(1))[1] == [1.0, 1.0, None]
    with pytest.raises(ValueError, match="do not match"):
        distance_ratios(rows, torch.zeros(2))


def test_every_worker_given_work_gets_a_row_with_what_the_round_knows_of_it() -> None:
    replicas = [
        Replica(worker=w, file=w, value=torch.tensor([float(w), 0.0]), digest=str(w))
        for w in (0, 1, 2)
    ]
    exchange = EvaluationExchange(
        [EvaluationReport(0, 0.4, 0.9, 20), EvaluationReport(1, 0.4, 9.0, 20)],
        failures=[Rejection(2, "worker_error", "no split")],
    )
    rows = client_rounds(
        [4, 3, 2, 1, 0],
        {0: "c0", 1: "c1"},
        replicas=replicas,
        aggregate=torch.tensor([1.0, 0.0]),
        samples={0: 100, 1: 50},
        evaluation=federated_result(exchange, None, asked=[0, 1, 2, 4]),
    )

    assert [r.worker for r in rows] == [0, 1, 2, 3, 4]
    first, second, third, idle, mute = rows
    assert (first.client_id, first.samples, first.distance, first.distance_ratio) == (
        "c0",
        100,
        1.0,
        1.0,
    )
    assert (first.eval_status, first.eval_accuracy, first.eval_samples) == ("counted", 0.9, 20)
    assert (second.distance, second.eval_status, second.eval_accuracy) == (0.0, "refused", None)
    assert (third.eval_status, third.client_id, third.samples) == ("failed", None, None)
    assert (idle.distance, idle.eval_status) == (None, None)
    assert (mute.eval_status, mute.eval_accuracy) == ("silent", None)


def test_without_an_applied_aggregate_no_distance_is_recorded() -> None:
    replica = Replica(worker=0, file=0, value=torch.ones(2), digest="d")
    (row,) = client_rounds([0], {}, replicas=[replica], aggregate=None, samples={}, evaluation=None)
    assert (row.distance, row.distance_ratio, row.eval_status) == (None, None, None)
