"""Partitions of a training split among simulated clients, and their reports.

:mod:`~phalanx.partitions.schemes` holds the pure functions (IID, Dirichlet over
labels, pathological label shards, quantity skew), following Flower Datasets'
partitioners; :mod:`~phalanx.partitions.report` counts what each client got;
:mod:`~phalanx.partitions.config` is the ``data.partition`` setting and
:mod:`~phalanx.partitions.registry` makes a partition from it.
"""

from phalanx.partitions.config import PartitionConfig, PartitionKind
from phalanx.partitions.registry import make_partition, report_partition, settings_of
from phalanx.partitions.report import MAX_HISTOGRAM_CELLS, PartitionReport, partition_report
from phalanx.partitions.schemes import (
    Partition,
    dirichlet_partition,
    iid_partition,
    pathological_partition,
    quantity_skew_partition,
    quantity_skew_sizes,
    sized_partition,
)

__all__ = [
    "MAX_HISTOGRAM_CELLS",
    "Partition",
    "PartitionConfig",
    "PartitionKind",
    "PartitionReport",
    "dirichlet_partition",
    "iid_partition",
    "make_partition",
    "partition_report",
    "pathological_partition",
    "quantity_skew_partition",
    "quantity_skew_sizes",
    "report_partition",
    "settings_of",
    "sized_partition",
]
