"""Tests of phalanx.aggregation: reference formulas, Flower as an oracle, robustness, errors."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, MetricRecord, RecordDict
from flwr.serverapp.strategy.bulyan import aggregate_n_closest_weights
from flwr.serverapp.strategy.fedtrimmedavg import trim_mean
from flwr.serverapp.strategy.multikrum import select_multikrum
from flwr.serverapp.strategy.strategy_utils import aggregate_arrayrecords
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from phalanx.aggregation import (
    AGGREGATORS,
    PRE_AGGREGATORS,
    RobustAggregator,
    aggregate,
    bucketing,
    bulyan,
    centered_clipping,
    coordinate_median,
    geometric_median,
    krum,
    krum_selection,
    largest_f,
    mean,
    median_of_means,
    min_inputs,
    multi_krum,
    nearest_neighbor_mixing,
    pairwise_sq_distances,
    trimmed_mean,
)
from phalanx.aggregation.selection import _bulyan_selection
from phalanx.breakdown import RULES

Array = np.ndarray[Any, np.dtype[Any]]

# --------------------------------------------------------------------------- data


def gaussian(n: int, d: int, seed: int) -> torch.Tensor:
    """Continuous data: ties in distances or values have probability zero."""
    rng = np.random.default_rng(seed)
    scales = rng.uniform(0.5, 2.0, size=(n, 1))
    return torch.from_numpy((rng.standard_normal((n, d)) * scales).astype(np.float32))


def with_outliers(n: int, d: int, f: int, seed: int, magnitude: float) -> torch.Tensor:
    """``n - f`` honest Gaussian rows, then ``f`` rows scattered around ``magnitude * 1``."""
    x = gaussian(n, d, seed)
    rng = np.random.default_rng(seed + 1)
    x[n - f :] = torch.from_numpy(
        (rng.standard_normal((f, d)) * magnitude + magnitude).astype(np.float32)
    )
    return x


@st.composite
def krum_inputs(draw: st.DrawFn) -> tuple[torch.Tensor, int]:
    f = draw(st.integers(0, 3))
    n = draw(st.integers(2 * f + 3, 2 * f + 9))
    d = draw(st.integers(1, 12))
    return gaussian(n, d, draw(st.integers(0, 2**31))), f


@st.composite
def bulyan_inputs(draw: st.DrawFn) -> tuple[torch.Tensor, int]:
    f = draw(st.integers(0, 5))
    n = draw(st.integers(4 * f + 3, 4 * f + 8))
    d = draw(st.integers(1, 12))
    return gaussian(n, d, draw(st.integers(0, 2**31))), f


@st.composite
def value_stacks(draw: st.DrawFn) -> tuple[torch.Tensor, int]:
    """Arbitrary finite float32 stacks, ties and repeated values included."""
    n = draw(st.integers(1, 9))
    d = draw(st.integers(1, 8))
    values = draw(
        hnp.arrays(
            np.float32,
            (n, d),
            elements=st.floats(-1e6, 1e6, width=32, allow_subnormal=False)
            | st.sampled_from([0.0, 1.0, -1.0]),
        )
    )
    f = draw(st.integers(0, (n - 1) // 2))
    return torch.from_numpy(values), f


# --------------------------------------------------------------------------- references


def ref_median(x: Array) -> Array:
    n, d = x.shape
    out = np.empty(d)
    for j in range(d):
        column = sorted(float(v) for v in x[:, j])
        out[j] = (column[(n - 1) // 2] + column[n // 2]) / 2
    return out


def ref_trimmed_mean(x: Array, f: int) -> Array:
    n, d = x.shape
    out = np.empty(d)
    for j in range(d):
        column = sorted(float(v) for v in x[:, j])
        out[j] = sum(column[f : n - f]) / (n - 2 * f)
    return out


def ref_sq_distances(x: Array) -> Array:
    n = x.shape[0]
    x = x.astype(np.float64)
    return np.array([[float(np.sum((x[i] - x[j]) ** 2)) for j in range(n)] for i in range(n)])


def ref_krum_order(x: Array, f: int) -> list[int]:
    """Rows by increasing Krum score (sum of the n - f - 2 smallest distances to others)."""
    n = x.shape[0]
    dist = ref_sq_distances(x)
    scores = [sum(sorted(dist[i, j] for j in range(n) if j != i)[: n - f - 2]) for i in range(n)]
    return sorted(range(n), key=lambda i: scores[i])


def ref_bulyan(x: Array, f: int) -> Array:
    n, d = x.shape
    dist = ref_sq_distances(x)
    remaining = list(range(n))
    chosen = []
    for _ in range(n - 2 * f):
        k = min(max(len(remaining) - f - 2, 1), len(remaining) - 1)
        scores = {i: sum(sorted(dist[i, j] for j in remaining if j != i)[:k]) for i in remaining}
        best = min(remaining, key=lambda i: scores[i])
        chosen.append(best)
        remaining.remove(best)
    beta = n - 4 * f
    out = np.empty(d)
    for c in range(d):
        values = [float(x[i, c]) for i in chosen]
        med = float(np.median(values))
        closest = sorted(values, key=lambda v: abs(v - med))[:beta]
        out[c] = sum(closest) / beta
    return out


def ref_geometric_median(x: Array, nu: float, iterations: int) -> Array:
    x = x.astype(np.float64)
    z = x.mean(axis=0)
    for _ in range(iterations):
        weights = np.array([1.0 / max(nu, float(np.linalg.norm(row - z))) for row in x])
        z = (weights[:, None] * x).sum(axis=0) / weights.sum()
    return np.asarray(z, dtype=np.float64)


def ref_centered_clipping(x: Array, tau: float, n_iter: int, center: Array) -> Array:
    x = x.astype(np.float64)
    v = center.astype(np.float64)
    for _ in range(n_iter):
        step = np.zeros_like(v)
        for row in x:
            norm = float(np.linalg.norm(row - v))
            step += (row - v) * (min(1.0, tau / norm) if norm > 0 else 1.0)
        v = v + step / len(x)
    return v


def ref_median_of_means(x: Array, groups: int) -> Array:
    means = np.stack([g.astype(np.float64).mean(axis=0) for g in np.array_split(x, groups)])
    return np.asarray(np.median(means, axis=0), dtype=np.float64)


def ref_nnm(x: Array, f: int) -> Array:
    dist = ref_sq_distances(x)
    n = x.shape[0]
    return np.stack(
        [
            x[np.argsort(dist[i], kind="stable")[: n - f]].astype(np.float64).mean(0)
            for i in range(n)
        ]
    )


def close(actual: torch.Tensor, expected: Array, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    np.testing.assert_allclose(actual.double().numpy(), expected, rtol=rtol, atol=atol)


# --------------------------------------------------------------------------- Flower oracle


def flower_contents(x: torch.Tensor) -> list[RecordDict]:
    """One reply content per row, as a Flower ClientApp would send it."""
    return [
        RecordDict(
            {
                "arrays": ArrayRecord([row.numpy().copy()]),
                "metrics": MetricRecord({"num-examples": 1}),
            }
        )
        for row in x
    ]


# --------------------------------------------------------------------------- references agree


@settings(max_examples=60, deadline=None)
@given(value_stacks())
def test_median_equals_the_middle_of_each_sorted_column(case: tuple[torch.Tensor, int]) -> None:
    x, f = case
    result = coordinate_median(x, f=f)
    assert result.dtype == torch.float32 and result.shape == (x.shape[1],)
    close(result, ref_median(x.numpy()), rtol=1e-6, atol=0)
    close(result, np.median(x.numpy(), axis=0).astype(np.float64), rtol=1e-6, atol=0)


@settings(max_examples=60, deadline=None)
@given(value_stacks())
def test_trimmed_mean_averages_the_central_values_of_each_column(
    case: tuple[torch.Tensor, int],
) -> None:
    x, f = case
    close(trimmed_mean(x, f=f), ref_trimmed_mean(x.numpy(), f), rtol=1e-5, atol=1e-3)


@settings(max_examples=30, deadline=None)
@given(value_stacks())
def test_trimmed_mean_matches_flowers_trim_mean(case: tuple[torch.Tensor, int]) -> None:
    x, f = case
    n = x.shape[0]
    beta = (f + 0.25) / n  # Flower cuts int(beta * n) = f values from each end
    expected = trim_mean(x.numpy().astype(np.float64), beta)
    close(trimmed_mean(x, f=f), expected, rtol=1e-5, atol=1e-3)


@settings(max_examples=40, deadline=None)
@given(value_stacks())
def test_mean_equals_the_arithmetic_mean(case: tuple[torch.Tensor, int]) -> None:
    x, f = case
    close(mean(x, f=f), x.numpy().astype(np.float64).mean(axis=0), rtol=1e-5, atol=1e-2)


@settings(max_examples=40, deadline=None)
@given(krum_inputs())
def test_pairwise_distances_equal_direct_differences(case: tuple[torch.Tensor, int]) -> None:
    x, _ = case
    close(pairwise_sq_distances(x), ref_sq_distances(x.numpy()), rtol=1e-4, atol=1e-4)


@settings(max_examples=60, deadline=None)
@given(krum_inputs())
def test_krum_selects_the_row_with_the_lowest_reference_score(
    case: tuple[torch.Tensor, int],
) -> None:
    x, f = case
    best = ref_krum_order(x.numpy(), f)[0]
    assert torch.equal(krum(x, f=f), x[best])


@settings(max_examples=60, deadline=None)
@given(krum_inputs(), st.data())
def test_multi_krum_averages_the_m_rows_with_lowest_reference_scores(
    case: tuple[torch.Tensor, int], data: st.DataObject
) -> None:
    x, f = case
    n = x.shape[0]
    m = data.draw(st.integers(1, n))
    order = ref_krum_order(x.numpy(), f)
    assert krum_selection(x, f=f, m=m).tolist() == order[:m]
    expected = x.numpy()[order[:m]].astype(np.float64).mean(axis=0)
    close(multi_krum(x, f=f, m=m), expected)


def test_multi_krum_averages_n_minus_f_rows_by_default() -> None:
    x, f = gaussian(11, 6, seed=3), 2
    order = ref_krum_order(x.numpy(), f)
    close(multi_krum(x, f=f), x.numpy()[order[: 11 - f]].astype(np.float64).mean(axis=0))


@settings(max_examples=40, deadline=None)
@given(bulyan_inputs())
def test_bulyan_matches_the_reference_iterative_krum_then_closest_to_median(
    case: tuple[torch.Tensor, int],
) -> None:
    x, f = case
    close(bulyan(x, f=f), ref_bulyan(x.numpy(), f))


@settings(max_examples=30, deadline=None)
@given(krum_inputs(), st.integers(0, 6))
def test_geometric_median_follows_the_smoothed_weiszfeld_iterates(
    case: tuple[torch.Tensor, int], iterations: int
) -> None:
    x, _ = case
    result = geometric_median(x, nu=1e-3, max_iter=iterations, eps=0.0)
    close(result, ref_geometric_median(x.numpy(), 1e-3, iterations), rtol=1e-4, atol=1e-4)


def test_geometric_median_converges_to_the_minimiser_of_summed_distances() -> None:
    x = gaussian(9, 5, seed=11)
    z = geometric_median(x, max_iter=1000, eps=1e-12).double().numpy()

    def objective(point: Array) -> float:
        return float(np.linalg.norm(x.numpy().astype(np.float64) - point, axis=1).sum())

    rng = np.random.default_rng(0)
    for _ in range(50):
        assert objective(z) <= objective(z + rng.standard_normal(5) * 1e-2) + 1e-9


def test_geometric_median_of_collinear_symmetric_points_is_their_centre() -> None:
    x = torch.tensor([[-3.0, 0.0], [-1.0, 0.0], [0.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
    close(geometric_median(x, max_iter=500, eps=0.0), np.zeros(2), atol=1e-4)


@settings(max_examples=30, deadline=None)
@given(
    krum_inputs(),
    st.floats(0.1, 10.0),
    st.integers(1, 4),
    st.booleans(),
)
def test_centered_clipping_matches_the_reference_iteration(
    case: tuple[torch.Tensor, int], tau: float, n_iter: int, centred: bool
) -> None:
    x, f = case
    d = x.shape[1]
    center = torch.linspace(-1.0, 1.0, d) if centred else None
    expected = ref_centered_clipping(
        x.numpy(), tau, n_iter, np.zeros(d) if center is None else center.numpy()
    )
    close(centered_clipping(x, f=f, tau=tau, n_iter=n_iter, center=center), expected, 1e-4, 1e-4)


@settings(max_examples=40, deadline=None)
@given(krum_inputs(), st.data())
def test_median_of_means_is_the_median_of_consecutive_group_means(
    case: tuple[torch.Tensor, int], data: st.DataObject
) -> None:
    x, f = case
    groups = data.draw(st.integers(2 * f + 1, x.shape[0]))
    close(median_of_means(x, f=f, groups=groups), ref_median_of_means(x.numpy(), groups))


def test_median_of_means_defaults_to_2f_plus_1_groups() -> None:
    x = gaussian(12, 4, seed=5)
    close(median_of_means(x, f=2), ref_median_of_means(x.numpy(), 5))


@settings(max_examples=40, deadline=None)
@given(krum_inputs())
def test_nnm_replaces_each_row_by_the_mean_of_its_n_minus_f_nearest(
    case: tuple[torch.Tensor, int],
) -> None:
    x, f = case
    close(nearest_neighbor_mixing(x, f=f), ref_nnm(x.numpy(), f))


def test_column_kernels_agree_across_blocks_and_thread_counts() -> None:
    # Wide enough for several sort blocks and several Gram blocks.
    x = gaussian(7, 150_001, seed=2)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        single = [coordinate_median(x, f=2), trimmed_mean(x, f=2), bulyan(x, f=1)]
        torch.set_num_threads(2)
        double = [coordinate_median(x, f=2), trimmed_mean(x, f=2), bulyan(x, f=1)]
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(single, double, strict=True):
        assert torch.equal(a, b)
    close(single[0], np.median(x.numpy(), axis=0).astype(np.float64), rtol=1e-6, atol=0)
    expected = np.sort(x.numpy().astype(np.float64), axis=0)[2:5].mean(axis=0)
    close(single[1], expected)


def test_float64_input_gives_a_float64_result() -> None:
    x = gaussian(9, 4, seed=1).double()
    for name, rule in AGGREGATORS.items():
        assert rule(x, f=1).dtype == torch.float64, name


# --------------------------------------------------------------------------- Flower as an oracle


@settings(max_examples=40, deadline=None)
@given(krum_inputs(), st.data())
def test_krum_selection_agrees_with_flowers_select_multikrum(
    case: tuple[torch.Tensor, int], data: st.DataObject
) -> None:
    x, f = case
    m = data.draw(st.integers(1, x.shape[0]))
    contents = flower_contents(x)
    selected = select_multikrum(contents, num_malicious_nodes=f, num_nodes_to_select=m)
    flower_order = [next(i for i, c in enumerate(contents) if c is s) for s in selected]
    assert krum_selection(x, f=f, m=m).tolist() == flower_order


@settings(max_examples=25, deadline=None)
@given(krum_inputs())
def test_krum_and_multi_krum_equal_flowers_aggregate_of_its_selection(
    case: tuple[torch.Tensor, int],
) -> None:
    x, f = case
    n = x.shape[0]
    for m, ours in ((1, krum(x, f=f)), (n - f, multi_krum(x, f=f))):
        selected = select_multikrum(flower_contents(x), f, m)
        expected = aggregate_arrayrecords(selected, "num-examples").to_numpy_ndarrays()[0]
        close(ours, expected.astype(np.float64))


@settings(max_examples=25, deadline=None)
@given(bulyan_inputs())
def test_bulyan_coordinate_phase_equals_flowers_closest_to_median_average(
    case: tuple[torch.Tensor, int],
) -> None:
    x, f = case
    n = x.shape[0]
    # Flower's Bulyan picks its theta rows by one-shot Multi-Krum; the original (and
    # Phalanx) picks them by Krum one at a time. The coordinate phase is the same.
    chosen = _bulyan_selection(pairwise_sq_distances(x), f, n - 2 * f)
    picked = [[x[i].numpy()] for i in chosen.tolist()]
    median = [np.median(np.stack([p[0] for p in picked]), axis=0)]
    expected = aggregate_n_closest_weights(median, picked, n - 4 * f)[0]
    close(bulyan(x, f=f), expected.astype(np.float64))


# --------------------------------------------------------------------------- robustness


@settings(max_examples=30, deadline=None)
@given(
    st.integers(0, 4),
    st.integers(1, 6),
    st.integers(0, 2**31),
    st.sampled_from([1e3, 1e12, 1e30]),
)
def test_coordinate_rules_stay_within_the_honest_range_despite_f_huge_outliers(
    f: int, d: int, seed: int, magnitude: float
) -> None:
    n = 4 * f + 3
    x = with_outliers(n, d, f, seed, magnitude)
    honest = x[: n - f]
    low, high = honest.min(dim=0).values, honest.max(dim=0).values
    for result in (
        coordinate_median(x, f=f),
        trimmed_mean(x, f=f),
        bulyan(x, f=f),
        median_of_means(x, f=f, groups=n),
    ):
        assert bool(((result >= low - 1e-5) & (result <= high + 1e-5)).all())


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 4),
    st.integers(0, 3),
    st.integers(1, 8),
    st.integers(0, 2**31),
    st.sampled_from([1e2, 1e6, 1e30]),
)
def test_krum_never_selects_an_outlier_when_n_is_at_least_2f_plus_3(
    f: int, extra: int, d: int, seed: int, magnitude: float
) -> None:
    n = 2 * f + 3 + extra
    x = with_outliers(n, d, f, seed, magnitude)
    assert set(krum_selection(x, f=f, m=n - f).tolist()) == set(range(n - f))
    assert int(krum_selection(x, f=f)[0]) < n - f


def test_colluding_identical_outliers_do_not_win_krum() -> None:
    n, f, d = 9, 3, 5
    x = gaussian(n, d, seed=4)
    x[n - f :] = 50.0  # f identical points: zero distance among themselves
    assert int(krum_selection(x, f=f)[0]) < n - f


def test_geometric_median_and_clipping_stay_near_the_honest_rows_despite_outliers() -> None:
    n, f, d = 11, 4, 6
    x = with_outliers(n, d, f, seed=9, magnitude=1e6)
    honest_mean = x[: n - f].mean(dim=0)
    radius = float((x[: n - f] - honest_mean).norm(dim=1).max())
    assert float((geometric_median(x, f=f) - honest_mean).norm()) < radius
    clipped = centered_clipping(x, f=f, tau=1.0, n_iter=5)
    assert float((clipped - honest_mean).norm()) < radius


@pytest.mark.parametrize("magnitude", [1e3, 1e30])
def test_centered_clipping_bounds_each_outliers_pull_by_tau_over_n(magnitude: float) -> None:
    n, f, d, tau = 9, 3, 5, 0.5
    x = with_outliers(n, d, f, seed=12, magnitude=magnitude)
    result = centered_clipping(x, f=f, tau=tau, n_iter=3)
    expected = ref_centered_clipping(x.numpy(), tau, 3, np.zeros(d))
    close(result, expected, rtol=1e-4, atol=1e-4)
    assert float(result.norm()) <= 3 * tau + 1e-4  # each step moves v by at most tau


def test_rows_too_large_for_float32_squares_fall_back_to_float64_distances() -> None:
    x = gaussian(9, 4, seed=6)
    x[7:] = 3e38  # finite, but the squared norm overflows float32
    dist = pairwise_sq_distances(x)
    assert bool(torch.isfinite(dist).all())
    assert float(dist[7, 8]) == 0.0
    close(dist[:7, :7], ref_sq_distances(x.numpy()[:7]), rtol=1e-4, atol=1e-4)
    assert int(krum_selection(x, f=2)[0]) < 7


# --------------------------------------------------------------------------- pre-aggregators


def test_bucketing_averages_a_seeded_partition_into_buckets_of_s() -> None:
    n, s = 11, 3
    out = bucketing(torch.eye(n), s=s, seed=7)
    assert out.shape == (4, n)
    members = [set(torch.nonzero(row).flatten().tolist()) for row in out]
    assert sorted(len(m) for m in members) == [2, 3, 3, 3]
    assert set().union(*members) == set(range(n))
    for row, m in zip(out, members, strict=True):
        close(row[sorted(m)], np.full(len(m), 1.0 / len(m)))
    assert torch.equal(out, bucketing(torch.eye(n), s=s, seed=7))
    same_generator = bucketing(torch.eye(n), s=s, generator=torch.Generator().manual_seed(7))
    assert torch.equal(out, same_generator)


def test_bucketing_depends_on_the_seed() -> None:
    outs = {tuple(bucketing(torch.eye(10), s=2, seed=seed).flatten().tolist()) for seed in range(5)}
    assert len(outs) > 1


def test_bucketing_needs_exactly_one_source_of_randomness() -> None:
    with pytest.raises(ValueError, match="exactly one of seed"):
        bucketing(torch.eye(4), s=2)
    with pytest.raises(ValueError, match="exactly one of seed"):
        bucketing(torch.eye(4), s=2, seed=1, generator=torch.Generator())
    with pytest.raises(ValueError, match="bucket size"):
        bucketing(torch.eye(4), s=0, seed=1)


def test_aggregate_applies_the_pre_aggregator_before_the_rule() -> None:
    x, f = gaussian(15, 5, seed=8), 2
    expected = krum(nearest_neighbor_mixing(x, f=f), f=f)
    assert torch.equal(aggregate("krum", x, f=f, pre="nnm"), expected)
    bucketed = bucketing(x, f=f, s=2, seed=3)
    assert torch.equal(
        aggregate("median", x, f=f, pre="bucketing", pre_options={"s": 2, "seed": 3}),
        coordinate_median(bucketed, f=f),
    )
    assert torch.equal(aggregate("multi_krum", x, f=f, m=4), multi_krum(x, f=f, m=4))


def test_robust_aggregator_carries_settings_and_calls_aggregate() -> None:
    x = gaussian(15, 5, seed=8)
    settings_ = RobustAggregator("bulyan", f=2, pre="bucketing", pre_options={"s": 1, "seed": 0})
    assert torch.equal(settings_(x), bulyan(bucketing(x, s=1, seed=0), f=2))
    with pytest.raises(ValueError, match="unknown aggregator 'krumm'"):
        RobustAggregator("krumm", f=1)
    with pytest.raises(ValueError, match="unknown pre-aggregator"):
        RobustAggregator("krum", f=1, pre="clip")
    with pytest.raises(ValueError, match="non-negative int"):
        RobustAggregator("krum", f=-1)


def test_registries_name_every_rule_and_pre_aggregator() -> None:
    assert set(AGGREGATORS) == {
        "mean",
        "median",
        "trimmed_mean",
        "geometric_median",
        "krum",
        "multi_krum",
        "bulyan",
        "centered_clipping",
        "median_of_means",
    }
    assert set(PRE_AGGREGATORS) == {"nnm", "bucketing"}
    x = gaussian(11, 3, seed=0)
    for name, rule in AGGREGATORS.items():
        assert rule(x, f=2).shape == (3,), name
    for name, pre in PRE_AGGREGATORS.items():
        options: dict[str, Any] = {"seed": 0} if name == "bucketing" else {}
        assert pre(x, f=2, **options).shape[1] == 3, name


# --------------------------------------------------------------------------- preconditions


ALL_RULES: list[tuple[str, Callable[..., torch.Tensor]]] = [
    *AGGREGATORS.items(),
    ("nnm", nearest_neighbor_mixing),
    ("bucketing", lambda x, f: bucketing(x, f=f, seed=0)),
]


@pytest.mark.parametrize(("n", "f"), [(6, 2), (2, 0), (3, 1)])
def test_krum_rejects_fewer_than_2f_plus_3_updates(n: int, f: int) -> None:
    for rule in (krum, multi_krum, krum_selection):
        with pytest.raises(ValueError, match=r"n >= 2f \+ 3.*collect at least"):
            rule(gaussian(n, 3, seed=0), f=f)


def test_krum_accepts_exactly_2f_plus_3_updates() -> None:
    assert krum(gaussian(7, 3, seed=0), f=2).shape == (3,)


@pytest.mark.parametrize(("n", "f"), [(10, 2), (6, 1), (2, 0)])
def test_bulyan_rejects_fewer_than_4f_plus_3_updates(n: int, f: int) -> None:
    with pytest.raises(ValueError, match=r"n >= 4f \+ 3.*lower f to"):
        bulyan(gaussian(n, 3, seed=0), f=f)


@pytest.mark.parametrize("rule", [trimmed_mean, coordinate_median, geometric_median])
def test_minority_rules_reject_n_at_most_2f(rule: Callable[..., torch.Tensor]) -> None:
    with pytest.raises(ValueError, match=r"n > 2f.*lower f to 1"):
        rule(gaussian(4, 3, seed=0), f=2)


def test_median_of_means_rejects_too_few_groups() -> None:
    with pytest.raises(ValueError, match=r"2f < groups <= n.*use groups in \[5, 9\]"):
        median_of_means(gaussian(9, 3, seed=0), f=2, groups=4)


def test_multi_krum_rejects_m_outside_1_to_n() -> None:
    with pytest.raises(ValueError, match="m must be"):
        multi_krum(gaussian(9, 3, seed=0), f=1, m=10)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(("name", "rule"), ALL_RULES)
def test_every_rule_rejects_non_finite_values_and_names_the_row(
    name: str, rule: Callable[..., torch.Tensor], bad: float
) -> None:
    x = gaussian(11, 70, seed=0)
    x[4, 33] = bad
    with pytest.raises(ValueError, match=r"NaN or Inf in rows \[4\].*reject those replies"):
        rule(x, f=2)


@pytest.mark.parametrize(("name", "rule"), ALL_RULES)
def test_every_rule_rejects_wrong_rank_empty_and_non_float_input(
    name: str, rule: Callable[..., torch.Tensor]
) -> None:
    with pytest.raises(ValueError, match=r"must be 2-D.*torch\.stack"):
        rule(torch.zeros(5), f=0)
    with pytest.raises(ValueError, match="must be 2-D"):
        rule(torch.zeros(5, 2, 2), f=0)
    with pytest.raises(ValueError, match="empty"):
        rule(torch.zeros(0, 4), f=0)
    with pytest.raises(ValueError, match="empty"):
        rule(torch.zeros(4, 0), f=0)
    with pytest.raises(TypeError, match=r"floating point.*updates.float\(\)"):
        rule(torch.zeros(5, 3, dtype=torch.int64), f=0)
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        rule(np.zeros((5, 3), dtype=np.float32), f=0)
    with pytest.raises(ValueError, match="non-negative int"):
        rule(torch.zeros(5, 3), f=-1)


def test_aggregate_rejects_unknown_names_and_orphan_pre_options() -> None:
    x = gaussian(5, 2, seed=0)
    with pytest.raises(ValueError, match=r"unknown aggregator 'avg'.*mean"):
        aggregate("avg", x, f=0)
    with pytest.raises(ValueError, match=r"unknown pre-aggregator 'arc'.*bucketing, nnm"):
        aggregate("mean", x, f=0, pre="arc")
    with pytest.raises(ValueError, match="pre_options given without pre"):
        aggregate("mean", x, f=0, pre_options={"s": 2})


def test_krum_breaks_equal_scores_by_lower_index() -> None:
    # Mutual nearest neighbours score the same when each counts one neighbour.
    x = torch.tensor([[10.0], [0.0], [1.0]])
    assert krum_selection(x, f=0, m=3).tolist() == [1, 2, 0]
    assert torch.equal(krum(x, f=0), torch.tensor([0.0]))


@pytest.mark.parametrize("rule", sorted(AGGREGATORS))
def test_largest_f_is_the_largest_f_each_rule_accepts(rule: str) -> None:
    torch.manual_seed(0)
    for n in range(1, 12):
        updates = torch.randn(n, 4)
        f = largest_f(rule, n)

        def accepts(k: int, updates: torch.Tensor = updates) -> bool:
            try:
                aggregate(rule, updates, f=k)
            except ValueError:
                return False
            return True

        if f is None:
            assert not accepts(0)
        else:
            assert min_inputs(rule, f) <= n
            if rule != "mean":
                assert accepts(f) and not accepts(f + 1)


def test_the_breakdown_table_knows_exactly_the_registered_rules() -> None:
    assert set(AGGREGATORS) == RULES
