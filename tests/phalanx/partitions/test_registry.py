"""A partition made from its setting is the scheme's, with the defaults and the run seed."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.data import load_digits
from phalanx.partitions import (
    PartitionConfig,
    dirichlet_partition,
    iid_partition,
    make_partition,
    pathological_partition,
    quantity_skew_partition,
    report_partition,
    settings_of,
)
from phalanx.partitions.schemes import Partition


def same(a: Partition, b: Partition) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def labels() -> np.ndarray:
    return load_digits("train").y.numpy()


def test_settings_fill_the_defaults_and_take_the_run_seed_unless_one_is_given() -> None:
    assert settings_of(PartitionConfig(kind="dirichlet", alpha=0.3), run_seed=5) == {
        "seed": 5,
        "alpha": 0.3,
        "min_partition_size": 10,
        "self_balancing": False,
    }
    shards = PartitionConfig(kind="shards", labels_per_client=2, seed=9)
    assert settings_of(shards, run_seed=5) == {
        "seed": 9,
        "labels_per_client": 2,
        "label_assignment": "random",
    }


def test_each_kind_is_its_scheme(labels: np.ndarray) -> None:
    n = len(labels)
    made = {
        "iid": make_partition(labels, 7, PartitionConfig(), run_seed=3),
        "dirichlet": make_partition(
            labels, 7, PartitionConfig(kind="dirichlet", alpha=0.5, self_balancing=True), run_seed=3
        ),
        "shards": make_partition(
            labels,
            7,
            PartitionConfig(kind="shards", labels_per_client=3, label_assignment="deterministic"),
            run_seed=3,
        ),
        "quantity": make_partition(
            labels, 7, PartitionConfig(kind="quantity", alpha=2.0, seed=4), run_seed=3
        ),
    }

    assert same(made["iid"], iid_partition(n, 7, seed=3))
    assert same(
        made["dirichlet"],
        dirichlet_partition(labels, 7, alpha=0.5, seed=3, self_balancing=True),
    )
    assert same(
        made["shards"],
        pathological_partition(labels, 7, labels_per_client=3, seed=3, assignment="deterministic"),
    )
    assert same(made["quantity"], quantity_skew_partition(n, 7, alpha=2.0, seed=4))


def test_the_report_names_the_kind_and_the_settings_used(labels: np.ndarray) -> None:
    config = PartitionConfig(kind="dirichlet", alpha=0.3)

    partition, report = report_partition(labels, 10, 20, config, run_seed=1)

    assert report.kind == "dirichlet"
    assert dict(report.parameters) == settings_of(config, run_seed=1)
    assert report.samples == tuple(len(part) for part in partition)
    assert sum(report.samples) == len(labels)
    assert report.histograms is not None and len(report.histograms) == 20


def test_a_data_set_too_small_for_the_clients_is_a_clear_error(labels: np.ndarray) -> None:
    with pytest.raises(ValueError, match="clients but only 1438 samples"):
        make_partition(labels, 5000, PartitionConfig(), run_seed=0)
