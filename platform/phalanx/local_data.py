"""A simulated client's own data (``data.mode = "local"``): its part of the run's seeded partition.

In simulation the run's training split is divided among its ``K`` clients by
``data.partition`` (:mod:`phalanx.partitions`, IID when left out), seeded by the
run, so the coordinator (for the partition's report) and every simulated client
(for its own part) derive the same partition from the config alone, on either
transport. A deployed client reads its own data instead, which the coordinator
never sees; only :func:`model_shape` of the run's model travels to it.
"""

from __future__ import annotations

import torch

from phalanx.config import RunConfig
from phalanx.data import ImageDataset
from phalanx.data_mode import ModelShape
from phalanx.partitions import Partition, PartitionConfig, PartitionReport, report_partition


def run_partition(config: RunConfig, train_set: ImageDataset) -> tuple[Partition, PartitionReport]:
    """Divide ``train_set`` among the run's workers as ``data.partition`` says; report it.

    Raises
    ------
    ValueError
        When the data cannot be partitioned so (e.g. too few samples of a label for
        ``min_partition_size``), naming the fix.
    """
    settings = config.data.partition or PartitionConfig()
    return report_partition(
        train_set.y.numpy(),
        train_set.num_classes,
        config.assignment.num_workers,
        settings,
        run_seed=config.seed,
    )


def client_data(train_set: ImageDataset, partition: Partition, worker: int) -> ImageDataset:
    """Return worker ``worker``'s part of ``train_set``.

    Raises
    ------
    ValueError
        When the partition has no part ``worker``, or gave it no sample.
    """
    if not 0 <= worker < len(partition):
        raise ValueError(f"worker {worker} has no part in a partition of {len(partition)} clients")
    indices = partition[worker]
    if len(indices) == 0:
        raise ValueError(f"{train_set.name}: the partition gave worker {worker} no samples")
    return train_set.subset(torch.from_numpy(indices))


def model_shape(dataset: ImageDataset) -> ModelShape:
    """Return the shape of the model built for ``dataset`` (channels, image side, classes)."""
    return ModelShape(dataset.in_channels, dataset.image_size, dataset.num_classes)
