"""The partition report counts what each client holds, stays small, and refuses a bad partition."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from phalanx.partitions import (
    MAX_HISTOGRAM_CELLS,
    iid_partition,
    partition_report,
    pathological_partition,
)


def test_the_report_counts_samples_and_labels_per_client() -> None:
    labels = np.array([0, 1, 1, 2, 2, 2])
    partition = (np.array([0, 3]), np.array([1, 2, 4, 5]))

    report = partition_report(
        partition, labels, num_classes=4, kind="custom", parameters={"seed": 3, "alpha": 0.5}
    )

    assert report.samples == (2, 4)
    assert report.histograms == ((1, 0, 1, 0), (0, 2, 2, 0))
    assert report.label_totals == (1, 2, 3, 0)
    assert report.unassigned == 0
    assert report.num_clients == 2
    assert report.parameters == (("alpha", 0.5), ("seed", 3))


def test_the_report_is_json_and_frozen() -> None:
    labels = np.arange(30) % 3
    report = partition_report(
        iid_partition(30, 3, seed=0), labels, num_classes=3, kind="iid", parameters={"seed": 0}
    )

    assert json.loads(json.dumps(report.to_dict())) == {
        "kind": "iid",
        "parameters": {"seed": 0},
        "num_classes": 3,
        "samples": [10, 10, 10],
        "label_totals": [10, 10, 10],
        "unassigned": 0,
        "histograms": [list(row) for row in report.histograms or ()],
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.kind = "other"  # type: ignore[misc]


def test_samples_no_client_holds_are_reported_unassigned() -> None:
    labels = np.array([0] * 10 + [1] * 10 + [2] * 10)
    partition = pathological_partition(
        labels, 2, labels_per_client=1, seed=0, assignment="deterministic"
    )

    report = partition_report(partition, labels, num_classes=3, kind="shards")

    assert report.unassigned == 10
    assert report.label_totals == (10, 10, 0)


def test_a_report_too_large_for_a_heat_map_keeps_only_the_totals() -> None:
    clients = MAX_HISTOGRAM_CELLS // 10 + 1
    labels = np.arange(clients) % 10
    partition = tuple(np.array([i]) for i in range(clients))

    report = partition_report(partition, labels, num_classes=10, kind="iid")

    assert report.histograms is None
    assert sum(report.samples) == clients
    assert len(json.dumps(report.to_dict())) < 20 * clients


@pytest.mark.parametrize(
    ("partition", "message"),
    [
        ((np.array([0, 1]), np.array([1, 2])), "client 1: a sample is already in a partition"),
        ((np.array([0, 0]),), "client 0: a sample is already in a partition"),
        ((np.array([0, 4]),), r"client 0: an index lies outside 0\.\.3"),
        ((np.array([-1]),), r"client 0: an index lies outside 0\.\.3"),
        ((np.array([0.0]),), "client 0: indices must be a 1-D integer array"),
        ((), "the partition has no clients"),
    ],
)
def test_a_partition_that_is_not_one_is_refused(
    partition: tuple[np.ndarray, ...], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        partition_report(partition, np.array([0, 1, 0, 1]), num_classes=2, kind="x")


def test_labels_outside_the_classes_are_refused() -> None:
    with pytest.raises(ValueError, match=r"labels must lie in 0\.\.1"):
        partition_report((np.array([0]),), np.array([0, 2]), num_classes=2, kind="x")
