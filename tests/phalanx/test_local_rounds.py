"""Local data's side of a round: the task's model shape, FedAvg's weights and the cap on claims."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from phalanx.config import AggregationConfig
from phalanx.data_mode import ModelShape
from phalanx.detection import Replica
from phalanx.local_rounds import MEDIAN_MULTIPLE, LocalRounds, count_cap
from phalanx.partitions import partition_report
from phalanx.replies import Task

SHAPE = ModelShape(1, 8, 10)


def replicas(rows: torch.Tensor) -> list[Replica]:
    """One replica per row: worker w sent file w + 10."""
    return [Replica(worker=w, file=w + 10, value=row, digest=str(w)) for w, row in enumerate(rows)]


def weighted(rows: torch.Tensor, claims: list[int], largest: int | None) -> torch.Tensor:
    local = LocalRounds(SHAPE, largest_part=largest)
    samples = dict(enumerate(claims))
    weights = local.weights([w + 10 for w in range(len(claims))], replicas(rows), samples)
    return LocalRounds.aggregate(rows, weights.counts)


def test_a_client_with_three_times_the_samples_moves_the_mean_three_times_as_much() -> None:
    rows = torch.eye(2)

    mean = weighted(rows, [300, 100], largest=300)

    assert torch.allclose(mean, torch.tensor([0.75, 0.25]))
    assert mean[0] == 3 * mean[1]


def test_a_claim_over_the_cap_weighs_as_the_cap() -> None:
    rows = torch.eye(3)
    local = LocalRounds(SHAPE, largest_part=200)

    weights = local.weights([10, 11, 12], replicas(rows), {0: 100, 1: 200, 2: 2**53})

    assert weights.counts.tolist() == [100, 200, 200]
    assert (weights.cap, weights.capped) == (200, 1)
    assert weights.metrics() == {
        "samples_weighted": 500.0,
        "count_cap": 200.0,
        "capped_claims": 1.0,
    }
    assert torch.allclose(
        LocalRounds.aggregate(rows, weights.counts), torch.tensor([0.2, 0.4, 0.4])
    )


def test_the_cap_is_the_largest_part_when_known_else_a_multiple_of_the_median_claim() -> None:
    assert count_cap([5, 10**12], largest_part=240) == 240
    assert count_cap([100, 120, 90, 10**12], largest_part=None) == MEDIAN_MULTIPLE * 110
    assert count_cap([1], largest_part=None) == MEDIAN_MULTIPLE
    assert count_cap([], largest_part=None) == 1


@given(honest=st.lists(st.integers(50, 500), min_size=1, max_size=12), data=st.data())
def test_fewer_liars_than_honest_clients_cannot_lift_the_median_cap_beyond_honest_claims(
    honest: list[int], data: st.DataObject
) -> None:
    lies = data.draw(st.lists(st.integers(1, 2**53), max_size=len(honest) - 1))

    cap = count_cap(honest + lies, largest_part=None)

    assert cap <= MEDIAN_MULTIPLE * max(honest)


def test_the_largest_part_comes_from_the_partition_report() -> None:
    labels = np.array([0, 1, 0, 1, 1, 0, 1])
    parts = (np.array([0, 1, 2]), np.array([3]), np.array([4, 5, 6]))
    report = partition_report(parts, labels, num_classes=2, kind="test")

    assert LocalRounds.of(SHAPE, report).largest_part == 3
    assert LocalRounds.of(SHAPE, None).largest_part is None


def test_a_local_task_names_the_model_shape_and_nothing_else_changes() -> None:
    task = Task("r", 4, "n", 2, (2,))

    local = LocalRounds(SHAPE).task(task)

    assert local.model_shape == SHAPE and local.local and not task.local
    assert (local.run_id, local.round, local.nonce, local.worker, local.files) == (
        "r",
        4,
        "n",
        2,
        (2,),
    )


@pytest.mark.parametrize(
    ("rule", "pre", "weighs"),
    [("mean", None, True), ("mean", "nnm", False), ("median", None, False)],
)
def test_only_the_plain_mean_takes_weights(rule: str, pre: str | None, weighs: bool) -> None:
    config = AggregationConfig.model_validate({"rule": rule, "pre": pre})

    assert LocalRounds.weighs(config) is weighs


def test_an_accepted_file_without_a_count_is_the_coordinators_bug() -> None:
    with pytest.raises(ValueError, match="accepted file 11 has no sample count"):
        LocalRounds(SHAPE).weights([10, 11], replicas(torch.eye(2)), {0: 5})
