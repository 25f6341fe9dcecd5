from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from torch.utils._python_dispatch import TorchDispatchMode

from phalanx.detection import (
    DEFAULT_OUTLIER_RATIO,
    DEFAULT_OUTLIER_THRESHOLD,
    LOCAL_OUTLIER_RATIO,
    outliers,
)
from phalanx.detection.outliers import (
    CENTRE_ROW_TILE,
    centre_distances,
    outlier_measures,
    outlier_scores,
    robust_centre,
)


def honest_updates(n: int, d: int, seed: int, spread: float = 0.1) -> torch.Tensor:
    """``n`` IID updates around one common gradient."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(d, generator=g) + spread * torch.randn(n, d, generator=g)


class LargestTensor(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Records the tensors operations produced while active: their sizes, and which are new.

    An in-place or ``out=`` operation, or a view, allocates nothing new.
    """

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.outputs: list[tuple[int, bool]] = []

    @property
    def largest(self) -> int:
        """The most elements of any tensor produced."""
        return max((n for n, _ in self.outputs), default=0)

    def allocated(self, size: int) -> int:
        """How many new tensors of at least ``size`` elements were allocated."""
        return sum(1 for n, new in self.outputs if new and n >= size)

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        schema = func._schema
        new = not schema.is_mutable and not any(r.alias_info for r in schema.returns)
        for item in out if isinstance(out, tuple | list) else (out,):
            if isinstance(item, torch.Tensor):
                self.outputs.append((item.numel(), new))
        return out


@contextmanager
def largest_tensor() -> Iterator[LargestTensor]:
    with LargestTensor() as mode:
        yield mode


def test_screening_builds_no_matrix_of_all_pairs() -> None:
    n, d = 400, 3
    values = honest_updates(n, d, seed=1)
    with largest_tensor() as seen:
        outlier_scores(values, f=0)
    assert 0 < seen.largest <= n * d < n * n
    # The recorder does see an all-pairs matrix when one is built.
    with largest_tensor() as seen:
        torch.cdist(values, values)
    assert seen.largest == n * n


def test_screening_reads_the_stack_in_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    values = honest_updates(50, 40, seed=2)
    values[7] *= -30.0
    whole = outlier_scores(values, f=0)
    monkeypatch.setattr(outliers, "CHUNK_ELEMENTS", 64)
    with largest_tensor() as seen:
        blocked = outlier_scores(values, f=0)
    assert torch.allclose(whole, blocked, rtol=0, atol=1e-12)
    # Blocks of 64 elements: nothing larger than the input, a row or a column block.
    assert seen.largest <= 50 * 40


def test_the_distances_reuse_one_block_for_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    # A fresh float64 block per step, freed between small allocations, fragmented the
    # heap: at K = 1,000 the process grew by nearly one block per row.
    n, d = 50, 60
    values = honest_updates(n, d, seed=3)
    centre = robust_centre(values)
    expected = torch.linalg.vector_norm(values.to(torch.float64) - centre.to(torch.float64), dim=1)
    monkeypatch.setattr(outliers, "CHUNK_ELEMENTS", d)  # one row a step: 50 steps
    with largest_tensor() as seen:
        distances = centre_distances(values, centre)
    assert torch.equal(distances, expected)
    assert seen.allocated(d) <= 2  # the float64 centre and the block, whatever n is
    monkeypatch.setattr(outliers, "CHUNK_ELEMENTS", 3 * d)  # steps of 3 rows, the last of 2
    assert torch.equal(centre_distances(values, centre), expected)


def test_the_centre_is_the_coordinate_wise_median() -> None:
    values = torch.tensor([[0.0, 10.0], [1.0, -5.0], [100.0, 0.0]])
    assert robust_centre(values).tolist() == [1.0, 0.0]
    distances = centre_distances(values, torch.tensor([1.0, 0.0]))
    assert distances.dtype == torch.float64
    assert torch.allclose(distances, torch.tensor([101.0**0.5, 5.0, 99.0], dtype=torch.float64))


@settings(max_examples=60, deadline=None)
@given(st.integers(4, 40), st.integers(1, 12), st.integers(0, 2**31), st.randoms())
def test_scores_do_not_depend_on_the_order_of_the_updates(
    n: int, d: int, seed: int, rnd: Any
) -> None:
    values = honest_updates(n, d, seed)
    order = list(range(n))
    rnd.shuffle(order)
    scores = outlier_scores(values, f=0)
    shuffled = outlier_scores(values[order], f=0)
    assert torch.allclose(shuffled, scores[order], rtol=0, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(4, 40),
    st.integers(1, 12),
    st.integers(0, 2**31),
    st.floats(0.01, 100.0),
    st.floats(-50.0, 50.0),
)
def test_scores_do_not_depend_on_a_common_shift_or_scale(
    n: int, d: int, seed: int, scale: float, shift: float
) -> None:
    values = honest_updates(n, d, seed).to(torch.float64)
    scores = outlier_scores(values, f=0)
    moved = outlier_scores(values * scale + shift, f=0)
    assert torch.allclose(moved, scores, rtol=1e-6, atol=1e-6)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(5, 60),
    st.integers(1, 16),
    st.integers(0, 2**31),
    st.integers(0, 59),
    st.floats(50.0, 1e4),
)
def test_a_far_update_always_scores_highest_and_over_the_threshold(
    n: int, d: int, seed: int, where: int, factor: float
) -> None:
    values = honest_updates(n, d, seed)
    far = where % n
    centre = values.median(dim=0).values
    reach = float((values - centre).norm(dim=1).max())
    direction = torch.randn(d, generator=torch.Generator().manual_seed(seed + 1))
    values[far] = centre + factor * reach * direction / direction.norm()
    scores = outlier_scores(values, f=0)
    assert int(scores.argmax()) == far
    assert scores[far] > DEFAULT_OUTLIER_THRESHOLD
    measures = outlier_measures(values, f=0)
    assert torch.equal(measures.z, scores)
    assert bool(measures.outlying(DEFAULT_OUTLIER_THRESHOLD, LOCAL_OUTLIER_RATIO)[far])


@settings(max_examples=80, deadline=None)
@given(st.integers(40, 300), st.integers(64, 256), st.integers(0, 2**31))
def test_no_honest_update_is_flagged_on_tight_iid_data(n: int, d: int, seed: int) -> None:
    scores = outlier_scores(honest_updates(n, d, seed, spread=0.01), f=0)
    assert float(scores.max()) <= DEFAULT_OUTLIER_THRESHOLD


def test_colluders_sending_one_update_are_flagged_whatever_f() -> None:
    # Under the nearest-neighbour score, 4 identical liars were each other's neighbours
    # unless f >= 4; from the median they are as far as one liar alone.
    values = honest_updates(20, 10, seed=3)
    values[:4] = -20.0 * values[0]
    for f in (0, 1, 4):
        scores = outlier_scores(values, f=f)
        assert (scores[:4] > DEFAULT_OUTLIER_THRESHOLD).all()
        assert (scores[4:] <= DEFAULT_OUTLIER_THRESHOLD).all()


def test_identical_updates_score_zero() -> None:
    assert outlier_scores(torch.ones(6, 3), f=0).tolist() == [0.0] * 6


def test_scores_refuse_too_few_updates_or_a_wrong_shape() -> None:
    with pytest.raises(ValueError, match="n >= f \\+ 3"):
        outlier_scores(torch.zeros(4, 2), f=2)
    with pytest.raises(ValueError, match="n >= f \\+ 3"):
        outlier_scores(torch.zeros(4, 2), f=-1)
    with pytest.raises(ValueError, match="\\(n, d\\)"):
        outlier_scores(torch.zeros(4), f=0)


def test_ratios_are_distances_over_the_median_distance() -> None:
    values = honest_updates(7, 12, seed=5)
    distances = centre_distances(values, robust_centre(values))
    measures = outlier_measures(values, f=0)
    assert torch.allclose(measures.ratio, distances / distances.median())
    assert outlier_measures(torch.ones(4, 3), f=0).ratio.tolist() == [1.0] * 4


def test_among_three_honest_updates_the_score_is_noise_and_the_ratio_keeps_them_in() -> None:
    # Three updates around one gradient whose spreads differ by half: the MAD of three
    # distances is the smaller gap between them, so the widest scores far over 8, yet it
    # lies 1.5 times the typical distance, as clients' data make honest updates differ.
    g = torch.Generator().manual_seed(11)
    common = torch.randn(4_000, generator=g)
    values = common + torch.tensor([[0.1], [0.101], [0.15]]) * torch.randn(3, 4_000, generator=g)
    measures = outlier_measures(values, f=0)
    assert float(measures.z.max()) > DEFAULT_OUTLIER_THRESHOLD
    assert float(measures.ratio.max()) < DEFAULT_OUTLIER_RATIO
    assert not measures.outlying(DEFAULT_OUTLIER_THRESHOLD, DEFAULT_OUTLIER_RATIO).any()
    values[1] = common - 100 * (values[1] - common)  # one of them reversed and scaled
    measures = outlier_measures(values, f=0)
    assert measures.outlying(DEFAULT_OUTLIER_THRESHOLD, LOCAL_OUTLIER_RATIO).tolist() == [
        False,
        True,
        False,
    ]


def test_one_far_update_beside_a_majority_on_the_median_update_is_flagged() -> None:
    # Red team: twenty identical updates (a model whose gradients vanish) leave a median
    # distance of 0; the one far update scored 16.8 over the z-score's 8 but its ratio
    # read as 1, so nothing was flagged. Against the mean distance it is 21 times out.
    values = torch.zeros(21, 4)
    values[-1] = 1e6
    measures = outlier_measures(values, f=0)
    assert measures.ratio[-1] == pytest.approx(21.0)
    assert measures.ratio[:-1].tolist() == [0.0] * 20
    assert measures.outlying(DEFAULT_OUTLIER_THRESHOLD, LOCAL_OUTLIER_RATIO).tolist() == [
        False
    ] * 20 + [True]
    # Among three, two on the median and one far stays unflagged: its z-score is 2.4.
    few = torch.tensor([[0.0, 0.0], [0.0, 0.0], [5.0, 5.0]])
    assert not outlier_measures(few, f=0).outlying(DEFAULT_OUTLIER_THRESHOLD, 2.0).any()


def test_colluders_cannot_raise_the_typical_distance_to_hide_a_scaled_update() -> None:
    # Red team: fewer than half the updates sit together at any distance from the
    # honest ones to pull the median update and the median distance their way; the
    # median distance stays an honest one, and an update scaled by -100 stays far out.
    honest = honest_updates(7, 2_000, seed=3)
    direction = torch.ones(2_000) / 2_000**0.5
    for reach in (0.0, 1.0, 3.0, 10.0, 40.0):
        colluders = (honest.mean(0) + reach * direction * 45).repeat(5, 1)
        scaled = -100 * honest.mean(0, keepdim=True)
        values = torch.cat([honest, colluders, scaled])
        measures = outlier_measures(values, f=6)
        assert bool(measures.outlying(DEFAULT_OUTLIER_THRESHOLD, LOCAL_OUTLIER_RATIO)[-1])
        assert not measures.outlying(DEFAULT_OUTLIER_THRESHOLD, LOCAL_OUTLIER_RATIO)[:7].any()


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from([np.float32, np.float64]),
    st.integers(1, 40),
    st.one_of(st.integers(0, 3), st.integers(250, 600)),  # one block or several
    st.data(),
)
def test_the_centre_is_exactly_torch_s_lower_median_and_leaves_the_updates_alone(
    dtype: Any, n: int, d: int, data: st.DataObject
) -> None:
    """The fast centre equals the old definition, ``values.median(dim=0).values``.

    Odd and even ``n`` (the lower middle value), widths across the 256-column blocks,
    repeated values, signed zeros, huge and tiny magnitudes: no NaN (replies are
    checked finite before detection).
    """
    width = 32 if dtype is np.float32 else 64
    elements = st.one_of(
        st.floats(width=width, allow_nan=False, allow_infinity=False),
        st.sampled_from([0.0, -0.0, 1.0, -1.0]),
    )
    array = data.draw(hnp.arrays(dtype, (n, d), elements=elements))
    values = torch.from_numpy(array)
    before = values.clone()
    centre = robust_centre(values)
    assert centre.dtype == values.dtype and centre.shape == (d,)
    assert torch.equal(centre, values.median(dim=0).values)
    assert torch.equal(values, before)  # partitioned in a copy, never in place


def test_a_transposed_or_sliced_stack_gives_the_same_centre() -> None:
    values = honest_updates(9, 300, seed=4)
    for view in (values[:, 7:290], values.T.contiguous().T, values[::2]):
        assert torch.equal(robust_centre(view), view.median(dim=0).values)


@pytest.mark.parametrize("n", [CENTRE_ROW_TILE - 1, CENTRE_ROW_TILE, CENTRE_ROW_TILE + 1, 1_100])
def test_a_stack_copied_a_tile_of_rows_at_a_time_gives_the_same_centre(n: int) -> None:
    values = honest_updates(n, 300, seed=n)
    values[n - 1] = 50.0  # a far update in the last tile
    assert torch.equal(robust_centre(values), values.median(dim=0).values)
