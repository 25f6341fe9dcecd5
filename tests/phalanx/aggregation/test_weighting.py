"""FedAvg's weighted mean: weights by sample counts, bounded counts, hostile counts refused."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.aggregation import mean, weighted_mean
from phalanx.aggregation.weighting import MAX_COUNT


def test_the_weighted_mean_is_fedavgs_average() -> None:
    updates = torch.tensor([[1.0, 0.0], [0.0, 4.0], [3.0, 3.0]])

    result = weighted_mean(updates, [1, 2, 1])

    torch.testing.assert_close(result, torch.tensor([1.0, 2.75]))


@given(
    st.integers(1, 8),
    st.integers(1, 6),
    st.integers(1, 1000),
    st.integers(0, 2**31),
)
@settings(max_examples=60, deadline=None)
def test_equal_counts_give_the_plain_mean_and_counts_act_as_repeats(
    n: int, d: int, count: int, seed: int
) -> None:
    generator = torch.Generator().manual_seed(seed)
    updates = torch.randn(n, d, generator=generator, dtype=torch.float64)
    repeats = torch.randint(1, 5, (n,), generator=generator)

    torch.testing.assert_close(weighted_mean(updates, [count] * n), mean(updates))
    torch.testing.assert_close(
        weighted_mean(updates, repeats.tolist()),
        mean(updates.repeat_interleave(repeats, dim=0)),
    )


def test_a_client_of_zero_samples_takes_no_part_even_with_infinite_values() -> None:
    updates = torch.tensor([[1.0, 1.0], [float("inf"), float("nan")], [3.0, 5.0]])

    torch.testing.assert_close(weighted_mean(updates, [1, 0, 1]), torch.tensor([2.0, 3.0]))


def test_a_client_claiming_a_huge_count_owns_the_mean_unless_counts_are_capped() -> None:
    honest = torch.zeros(9, 4)
    liar = torch.full((1, 4), 100.0)
    updates = torch.cat([honest, liar])
    counts = [50] * 9 + [MAX_COUNT]

    assert float(weighted_mean(updates, counts).max()) > 99.0
    torch.testing.assert_close(weighted_mean(updates, counts, max_count=50), torch.full((4,), 10.0))


def test_the_result_keeps_the_dtype_of_the_updates() -> None:
    assert weighted_mean(torch.ones(2, 3), [1, 2]).dtype == torch.float32


@pytest.mark.parametrize(
    ("counts", "message"),
    [
        ([1, 2], "3 updates but 2 counts"),
        ([1, 2, -1], "every count must be a whole number"),
        ([1, 2, 1.5], "every count must be a whole number"),
        ([1, 2, True], "every count must be a whole number"),
        ([1, 2, MAX_COUNT + 1], "every count must be a whole number"),
        ([1, 2, float("nan")], "every count must be a whole number"),
        ([0, 0, 0], "the counts sum to zero"),
    ],
)
def test_hostile_counts_are_refused(counts: list[Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        weighted_mean(torch.ones(3, 2), counts)


@pytest.mark.parametrize("counts", ["123", 3, None])
def test_counts_that_are_no_sequence_are_refused(counts: Any) -> None:
    with pytest.raises(TypeError, match="counts must be a sequence of ints"):
        weighted_mean(torch.ones(3, 2), counts)


@pytest.mark.parametrize("max_count", [0, -5, 2.5, True])
def test_a_cap_below_one_is_refused(max_count: Any) -> None:
    with pytest.raises(ValueError, match="max_count must be an int >= 1"):
        weighted_mean(torch.ones(2, 2), [1, 1], max_count=max_count)


def test_non_finite_rows_with_weight_are_refused() -> None:
    updates = torch.tensor([[1.0, float("nan")], [1.0, 1.0]])

    with pytest.raises(ValueError, match=r"NaN or Inf in rows \[0\]"):
        weighted_mean(updates, [1, 1])


def test_counts_may_come_as_an_integer_tensor() -> None:
    updates = torch.tensor([[0.0], [3.0]])

    torch.testing.assert_close(weighted_mean(updates, torch.tensor([2, 1])), torch.tensor([1.0]))
