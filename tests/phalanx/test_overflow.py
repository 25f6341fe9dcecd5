from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from phalanx.finite import all_finite
from phalanx.overflow import trace_overflow, update_norms


def test_norms_of_finite_float32_rows_never_overflow() -> None:
    rows = torch.full((3, 1000), 3.0e38)
    norms = update_norms(rows)
    assert norms.dtype == torch.float64
    assert torch.isfinite(norms).all()
    assert float(norms[0]) == pytest.approx(3.0e38 * 1000**0.5, rel=1e-6)


def mean_fits(rows: torch.Tensor):  # type: ignore[no-untyped-def]
    def fits(kept: torch.Tensor) -> bool:
        return all_finite(rows[kept].mean(dim=0))

    return fits


def test_the_two_rows_that_overflow_the_mean_are_found() -> None:
    rows = torch.randn(7, 50)
    rows[[2, 5]] = 3.0e38
    assert not all_finite(rows.mean(dim=0))
    removed = trace_overflow(update_norms(rows), mean_fits(rows), max_removed=3)
    assert removed is not None and sorted(removed) == [2, 5]


def test_no_answer_when_a_minority_cannot_explain_the_overflow() -> None:
    rows = torch.full((5, 10), 3.0e38)
    assert trace_overflow(update_norms(rows), mean_fits(rows), max_removed=2) is None
    assert trace_overflow(update_norms(rows), mean_fits(rows), max_removed=0) is None


def test_max_removed_must_leave_a_row() -> None:
    with pytest.raises(ValueError, match="max_removed"):
        trace_overflow(torch.ones(3), lambda kept: True, max_removed=3)


def test_equal_norms_are_removed_in_row_order_and_the_kept_rows_come_sorted() -> None:
    calls: list[list[int]] = []

    def fits(kept: torch.Tensor) -> bool:
        calls.append(kept.tolist())
        return 2 not in kept and 4 not in kept

    norms = torch.tensor([1.0, 1.0, 1e40, 1.0, 1e40, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert trace_overflow(norms, fits, max_removed=4) == (2, 4)
    assert all(c == sorted(c) for c in calls)


@given(
    n=st.integers(3, 30),
    data=st.data(),
)
def test_the_overflowing_rows_are_exactly_the_crafted_minority(n: int, data: st.DataObject) -> None:
    crafted = data.draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=(n - 1) // 2))
    seed = data.draw(st.integers(0, 2**31))
    rows = torch.randn(n, 20, generator=torch.Generator().manual_seed(seed))
    rows[sorted(crafted)] = 3.0e38
    removed = trace_overflow(update_norms(rows), mean_fits(rows), max_removed=(n - 1) // 2)
    if 2 * len(crafted) > 1 and not all_finite(rows.mean(dim=0)):
        assert removed is not None and set(removed) == crafted


def test_rows_of_the_same_magnitude_as_a_culprit_go_with_it() -> None:
    rows = torch.randn(9, 20)
    rows[1] = 3.0e38
    rows[4] = 1.0e38  # alone it would fit: 1e38 / 8 does not overflow the mean
    rows[7] = 1.0e3  # large for an update, but nowhere near the culprits
    removed = trace_overflow(update_norms(rows), mean_fits(rows), max_removed=4)
    assert removed == (1, 4)
