"""A partition made from its ``data.partition`` setting, and reported."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from phalanx.partitions.config import DEFAULTS, PARAMETERS, PartitionConfig
from phalanx.partitions.report import Parameter, PartitionReport, partition_report
from phalanx.partitions.schemes import (
    Partition,
    dirichlet_partition,
    iid_partition,
    pathological_partition,
    quantity_skew_partition,
)


def settings_of(config: PartitionConfig, *, run_seed: int) -> dict[str, Parameter]:
    """Return the parameters the partition of ``config`` uses, defaults filled in.

    The seed is ``config.seed``, else ``run_seed``.
    """
    seed = run_seed if config.seed is None else config.seed
    settings: dict[str, Parameter] = {"seed": seed}
    for name in sorted(PARAMETERS[config.kind]):
        value = getattr(config, name)
        settings[name] = DEFAULTS[name] if value is None else value
    return settings


def make_partition(
    labels: NDArray[np.integer], num_clients: int, config: PartitionConfig, *, run_seed: int
) -> Partition:
    """Divide the samples of ``labels`` among ``num_clients`` clients as ``config`` says.

    Raises
    ------
    ValueError
        When the data cannot be partitioned so (see :mod:`phalanx.partitions.schemes`).
    """
    s = settings_of(config, run_seed=run_seed)
    seed = int(s["seed"])
    if config.kind == "iid":
        return iid_partition(len(labels), num_clients, seed=seed)
    if config.kind == "dirichlet":
        return dirichlet_partition(
            labels,
            num_clients,
            alpha=float(s["alpha"]),
            seed=seed,
            min_partition_size=int(s["min_partition_size"]),
            self_balancing=bool(s["self_balancing"]),
        )
    if config.kind == "shards":
        return pathological_partition(
            labels,
            num_clients,
            labels_per_client=int(s["labels_per_client"]),
            seed=seed,
            assignment=config.label_assignment or "random",
        )
    return quantity_skew_partition(
        len(labels),
        num_clients,
        alpha=float(s["alpha"]),
        seed=seed,
        min_partition_size=int(s["min_partition_size"]),
    )


def report_partition(
    labels: NDArray[np.integer],
    num_classes: int,
    num_clients: int,
    config: PartitionConfig,
    *,
    run_seed: int,
) -> tuple[Partition, PartitionReport]:
    """Make the partition of ``config`` and its report."""
    partition = make_partition(labels, num_clients, config, run_seed=run_seed)
    report = partition_report(
        partition,
        labels,
        num_classes=num_classes,
        kind=config.kind,
        parameters=settings_of(config, run_seed=run_seed),
    )
    return partition, report
