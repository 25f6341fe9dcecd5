"""The partitions against their definitions: coverage, the seed, labels per client, alpha, sizes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from phalanx.data import load_digits
from phalanx.partitions import (
    Partition,
    dirichlet_partition,
    iid_partition,
    pathological_partition,
    quantity_skew_partition,
    quantity_skew_sizes,
    sized_partition,
)
from tests.support.flower_partitions import CASES, LABELS

SEEDS = st.integers(0, 2**63 - 1)


@st.composite
def labelled(draw: st.DrawFn, *, most_clients: int = 12) -> tuple[NDArray[np.int64], int]:
    """Labels of 1..400 samples over 1..10 classes, and a number of clients they allow."""
    classes = draw(st.integers(1, 10))
    size = draw(st.integers(1, 400))
    labels = np.asarray(draw(st.lists(st.integers(0, classes - 1), min_size=size, max_size=size)))
    clients = draw(st.integers(1, min(most_clients, size)))
    return labels.astype(np.int64), clients


def flat(partition: Partition) -> NDArray[np.int64]:
    return np.concatenate(partition) if partition else np.zeros(0, dtype=np.int64)


def assert_each_sample_once(partition: Partition, num_samples: int) -> None:
    assert all(part.dtype == np.int64 and part.ndim == 1 for part in partition)
    assert np.array_equal(np.sort(flat(partition)), np.arange(num_samples))


def assert_same(a: Partition, b: Partition) -> None:
    assert len(a) == len(b)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def histogram(labels: NDArray[np.int64], part: NDArray[np.int64], classes: int) -> Any:
    return np.bincount(labels[part], minlength=classes) / max(len(part), 1)


@pytest.fixture(scope="module")
def digits_labels() -> NDArray[np.int64]:
    return load_digits("train").y.numpy()


# --------------------------------------------------------------------------- Flower Datasets


@pytest.mark.parametrize(("kind", "parameters", "expected"), CASES)
def test_each_partition_is_the_one_flower_datasets_makes_for_the_same_seed(
    kind: str, parameters: dict[str, Any], expected: list[list[int]]
) -> None:
    labels = np.asarray(LABELS)
    p = dict(parameters)
    if kind == "iid":
        ours = iid_partition(len(labels), p["num_clients"], seed=p["seed"])
    elif kind == "dirichlet":
        ours = dirichlet_partition(labels, p.pop("num_clients"), **p)
    elif kind == "pathological":
        ours = pathological_partition(labels, p.pop("num_clients"), **p)
    else:
        ours = sized_partition(len(labels), p["sizes"], seed=p["seed"])

    assert [part.tolist() for part in ours] == expected


# --------------------------------------------------------------------------- IID


@given(labelled(), SEEDS)
@settings(max_examples=60, deadline=None)
def test_iid_puts_every_sample_in_one_client_in_sizes_differing_by_one_at_most(
    data: tuple[NDArray[np.int64], int], seed: int
) -> None:
    labels, clients = data
    partition = iid_partition(len(labels), clients, seed=seed)

    assert_each_sample_once(partition, len(labels))
    sizes = [len(part) for part in partition]
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)
    assert_same(partition, iid_partition(len(labels), clients, seed=seed))


def test_iid_depends_on_the_seed() -> None:
    first = iid_partition(100, 4, seed=1)

    assert not all(
        np.array_equal(a, b) for a, b in zip(first, iid_partition(100, 4, seed=2), strict=True)
    )


# --------------------------------------------------------------------------- Dirichlet


@given(labelled(), SEEDS, st.floats(0.01, 100.0), st.booleans())
@settings(max_examples=60, deadline=None)
def test_dirichlet_puts_every_sample_in_one_client_reproducibly(
    data: tuple[NDArray[np.int64], int], seed: int, alpha: float, balancing: bool
) -> None:
    labels, clients = data
    kwargs: dict[str, Any] = {
        "alpha": alpha,
        "seed": seed,
        "min_partition_size": 0,
        "self_balancing": balancing,
    }
    partition = dirichlet_partition(labels, clients, **kwargs)

    assert_each_sample_once(partition, len(labels))
    assert_same(partition, dirichlet_partition(labels, clients, **kwargs))


@given(labelled(most_clients=5), SEEDS, st.floats(0.5, 50.0))
@settings(max_examples=40, deadline=None)
def test_dirichlet_gives_every_client_min_partition_size_or_says_it_could_not(
    data: tuple[NDArray[np.int64], int], seed: int, alpha: float
) -> None:
    labels, clients = data
    least = min(3, len(labels) // clients)
    try:
        partition = dirichlet_partition(
            labels, clients, alpha=alpha, seed=seed, min_partition_size=least
        )
    except ValueError as err:
        assert "min_partition_size" in str(err)
        return
    assert min(len(part) for part in partition) >= least
    assert_each_sample_once(partition, len(labels))


def test_large_alpha_gives_every_client_the_label_histogram_of_the_whole_split(
    digits_labels: NDArray[np.int64],
) -> None:
    whole = histogram(digits_labels, np.arange(len(digits_labels)), 10)
    partition = dirichlet_partition(digits_labels, 10, alpha=1e4, seed=0)

    distances = [0.5 * np.abs(histogram(digits_labels, p, 10) - whole).sum() for p in partition]
    assert max(distances) < 0.05


def test_small_alpha_gives_each_client_few_labels(digits_labels: NDArray[np.int64]) -> None:
    partition = dirichlet_partition(digits_labels, 10, alpha=0.05, seed=0, min_partition_size=1)

    top_share = [histogram(digits_labels, p, 10).max() for p in partition]
    assert np.mean(top_share) > 0.6


def test_skew_falls_as_alpha_grows(digits_labels: NDArray[np.int64]) -> None:
    whole = histogram(digits_labels, np.arange(len(digits_labels)), 10)

    def skew(alpha: float) -> float:
        total = []
        for seed in range(5):
            partition = dirichlet_partition(
                digits_labels, 10, alpha=alpha, seed=seed, min_partition_size=1
            )
            total += [
                0.5 * np.abs(histogram(digits_labels, p, 10) - whole).sum() for p in partition
            ]
        return float(np.mean(total))

    skews = [skew(alpha) for alpha in (0.1, 0.3, 1.0, 10.0, 100.0)]
    assert skews == sorted(skews, reverse=True)


def test_self_balancing_narrows_the_spread_of_sizes(digits_labels: NDArray[np.int64]) -> None:
    def spread(balancing: bool) -> float:
        sizes = [
            len(p)
            for seed in range(5)
            for p in dirichlet_partition(
                digits_labels, 10, alpha=0.3, seed=seed, self_balancing=balancing
            )
        ]
        return float(np.std(sizes))

    assert spread(True) < spread(False)


# --------------------------------------------------------------------------- pathological


@st.composite
def shardable(draw: st.DrawFn) -> tuple[NDArray[np.int64], int, int]:
    """Labels where every label has a sample per client, clients, and labels per client."""
    classes = draw(st.integers(1, 10))
    clients = draw(st.integers(1, 12))
    counts = draw(st.lists(st.integers(clients, clients + 20), min_size=classes, max_size=classes))
    labels = np.repeat(np.arange(classes), counts)
    order = draw(st.permutations(range(len(labels))))
    return labels[np.asarray(order)].astype(np.int64), clients, draw(st.integers(1, classes))


@given(shardable(), SEEDS, st.sampled_from(["random", "deterministic", "first-deterministic"]))
@settings(max_examples=80, deadline=None)
def test_shards_give_every_client_exactly_k_labels_and_drop_only_unheld_labels(
    data: tuple[NDArray[np.int64], int, int], seed: int, assignment: Any
) -> None:
    labels, clients, k = data
    partition = pathological_partition(
        labels, clients, labels_per_client=k, seed=seed, assignment=assignment
    )

    held = [set(labels[part].tolist()) for part in partition]
    assert all(len(mine) == k for mine in held)
    placed = flat(partition)
    assert len(np.unique(placed)) == len(placed)
    used = set().union(*held)
    assert set(np.flatnonzero(np.isin(labels, sorted(used))).tolist()) == set(placed.tolist())
    assert_same(
        partition,
        pathological_partition(
            labels, clients, labels_per_client=k, seed=seed, assignment=assignment
        ),
    )


def test_first_deterministic_shards_use_every_label_when_clients_outnumber_them(
    digits_labels: NDArray[np.int64],
) -> None:
    partition = pathological_partition(
        digits_labels, 20, labels_per_client=2, seed=0, assignment="first-deterministic"
    )

    assert_each_sample_once(partition, len(digits_labels))


def test_deterministic_shards_follow_the_formula(digits_labels: NDArray[np.int64]) -> None:
    partition = pathological_partition(
        digits_labels, 12, labels_per_client=3, seed=0, assignment="deterministic"
    )

    held = [sorted(set(digits_labels[p].tolist())) for p in partition]
    assert held == [sorted({(c + j) % 10 for j in range(3)}) for c in range(12)]


def test_a_label_held_by_more_clients_than_its_samples_is_refused() -> None:
    labels = np.array([0] * 30 + [1] * 2)

    with pytest.raises(ValueError, match="label 1 is held by 3 clients but has only 2 samples"):
        pathological_partition(labels, 3, labels_per_client=2, seed=0, assignment="deterministic")


# --------------------------------------------------------------------------- sizes


@given(st.integers(1, 500), st.data(), SEEDS)
@settings(max_examples=60, deadline=None)
def test_sized_partition_gives_each_client_its_stated_size(
    num_samples: int, data: st.DataObject, seed: int
) -> None:
    clients = data.draw(st.integers(1, min(num_samples, 20)))
    sizes = data.draw(
        st.lists(st.integers(1, num_samples // clients), min_size=clients, max_size=clients)
    )
    partition = sized_partition(num_samples, sizes, seed=seed)

    assert [len(part) for part in partition] == sizes
    placed = flat(partition)
    assert len(np.unique(placed)) == len(placed) == sum(sizes)
    assert placed.min() >= 0 and placed.max() < num_samples


@given(st.integers(1, 2000), st.data(), SEEDS, st.floats(0.05, 100.0))
@settings(max_examples=60, deadline=None)
def test_quantity_skew_gives_the_sizes_it_states_and_every_sample_once(
    num_samples: int, data: st.DataObject, seed: int, alpha: float
) -> None:
    clients = data.draw(st.integers(1, min(num_samples, 20)))
    least = data.draw(st.integers(0, min(5, num_samples // clients)))
    kwargs: dict[str, Any] = {"alpha": alpha, "seed": seed, "min_partition_size": least}
    try:
        sizes = quantity_skew_sizes(num_samples, clients, **kwargs)
    except ValueError as err:
        assert "min_partition_size" in str(err)
        return
    partition = quantity_skew_partition(num_samples, clients, **kwargs)

    assert sum(sizes) == num_samples
    assert min(sizes) >= least
    assert [len(part) for part in partition] == list(sizes)
    assert_each_sample_once(partition, num_samples)
    assert_same(partition, quantity_skew_partition(num_samples, clients, **kwargs))


def test_quantity_skew_sizes_are_near_equal_for_large_alpha_and_skewed_for_small() -> None:
    even = quantity_skew_sizes(10_000, 10, alpha=1e4, seed=0)
    skewed = quantity_skew_sizes(10_000, 10, alpha=0.2, seed=0, min_partition_size=0)

    assert max(even) - min(even) < 100
    assert max(skewed) > 4 * np.median(skewed)


# --------------------------------------------------------------------------- hostile input

BAD_ALPHAS = [0.0, -1.0, float("nan"), float("inf"), True, "1", None]


@pytest.mark.parametrize("alpha", BAD_ALPHAS)
def test_an_alpha_that_is_not_a_finite_positive_number_is_refused(alpha: Any) -> None:
    labels = np.arange(40) % 4
    with pytest.raises(ValueError, match="alpha must be a finite number > 0"):
        dirichlet_partition(labels, 4, alpha=alpha, seed=0)
    with pytest.raises(ValueError, match="alpha must be a finite number > 0"):
        quantity_skew_partition(40, 4, alpha=alpha, seed=0)


@pytest.mark.parametrize("k", [0, -1, 5, 2.0, True])
def test_labels_per_client_outside_the_labels_present_is_refused(k: Any) -> None:
    labels = np.arange(40) % 4
    with pytest.raises(ValueError, match=r"labels_per_client must be a whole number in 1\.\.4"):
        pathological_partition(labels, 2, labels_per_client=k, seed=0)


def test_more_clients_than_samples_is_refused_by_every_scheme() -> None:
    labels = np.arange(5) % 2
    message = "6 clients but only 5 samples"
    with pytest.raises(ValueError, match=message):
        iid_partition(5, 6, seed=0)
    with pytest.raises(ValueError, match=message):
        dirichlet_partition(labels, 6, alpha=1.0, seed=0, min_partition_size=0)
    with pytest.raises(ValueError, match=message):
        pathological_partition(labels, 6, labels_per_client=1, seed=0)
    with pytest.raises(ValueError, match=message):
        quantity_skew_partition(5, 6, alpha=1.0, seed=0, min_partition_size=0)


@pytest.mark.parametrize("clients", [0, -3, 2.5, True, None])
def test_a_client_count_that_is_not_a_positive_whole_number_is_refused(clients: Any) -> None:
    with pytest.raises(ValueError, match="num_clients must be a whole number >= 1"):
        iid_partition(10, clients, seed=0)


@pytest.mark.parametrize("seed", [-1, 2**63, 1.5, True, None, "0"])
def test_a_seed_outside_0_to_2_63_is_refused(seed: Any) -> None:
    with pytest.raises(ValueError, match="seed must be a whole number"):
        iid_partition(10, 2, seed=seed)


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (np.array([0.0, 1.0, 1.0]), "labels must be integers"),
        (np.array([[0, 1], [1, 0]]), "non-empty 1-D"),
        (np.array([], dtype=np.int64), "non-empty 1-D"),
        (np.array([0, -1, 1]), "labels must be >= 0"),
    ],
)
def test_malformed_labels_are_refused(labels: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dirichlet_partition(labels, 1, alpha=1.0, seed=0, min_partition_size=0)


def test_a_min_partition_size_above_the_average_is_refused() -> None:
    with pytest.raises(ValueError, match=r"min_partition_size must be a whole number in 0\.\.10"):
        dirichlet_partition(np.arange(40) % 4, 4, alpha=1.0, seed=0, min_partition_size=11)


def test_an_unreachable_min_partition_size_is_refused_after_the_last_draw() -> None:
    labels = np.arange(1000) % 10
    with pytest.raises(ValueError, match="raise alpha, lower min_partition_size"):
        dirichlet_partition(labels, 50, alpha=0.01, seed=0, min_partition_size=20)


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ([], "at least one client"),
        ([3, 0], "every size must be a whole number >= 1"),
        ([3, -2], "every size must be a whole number >= 1"),
        ([3, 2.0], "every size must be a whole number >= 1"),
        ([6, 5], "the sizes sum to 11, more than the 10 samples"),
    ],
)
def test_bad_sizes_are_refused(sizes: list[Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sized_partition(10, sizes, seed=0)


def test_an_unknown_label_assignment_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown assignment 'sorted'"):
        pathological_partition(
            np.arange(20) % 2, 2, labels_per_client=1, seed=0, assignment="sorted"
        )  # type: ignore[arg-type]
