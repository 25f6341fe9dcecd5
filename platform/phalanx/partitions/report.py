"""What a partition gave each client: its sample count and its label histogram.

A :class:`PartitionReport` is stored with a run and drawn as a clients-by-labels
heat map, so its size is bounded: the histograms are kept only while
``clients x classes`` is at most :data:`MAX_HISTOGRAM_CELLS`; beyond that the
report keeps the sample counts and the label totals alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from phalanx.partitions.schemes import Partition

MAX_HISTOGRAM_CELLS = 100_000
"""Most ``clients x classes`` counts a report keeps (10,000 clients of 10 labels)."""

Parameter = float | int | str | bool


@dataclass(frozen=True)
class PartitionReport:
    """Samples and label histogram per client of one partition.

    Parameters
    ----------
    kind : str
        The partition's kind, e.g. ``"dirichlet"``.
    parameters : tuple of (str, value)
        Its parameters (``alpha``, ``seed``, ...), sorted by name.
    num_classes : int
        Length of every histogram.
    samples : tuple of int
        Samples of each client.
    label_totals : tuple of int
        Samples of each label over all clients.
    unassigned : int
        Samples of the split in no client's partition.
    histograms : tuple of tuple of int, optional
        ``histograms[c][l]``: samples of label ``l`` held by client ``c``; ``None``
        when there would be more than :data:`MAX_HISTOGRAM_CELLS` counts.
    """

    kind: str
    parameters: tuple[tuple[str, Parameter], ...]
    num_classes: int
    samples: tuple[int, ...]
    label_totals: tuple[int, ...]
    unassigned: int
    histograms: tuple[tuple[int, ...], ...] | None

    @property
    def num_clients(self) -> int:
        """Number of clients."""
        return len(self.samples)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as JSON-ready plain types."""
        return {
            "kind": self.kind,
            "parameters": dict(self.parameters),
            "num_classes": self.num_classes,
            "samples": list(self.samples),
            "label_totals": list(self.label_totals),
            "unassigned": self.unassigned,
            "histograms": None
            if self.histograms is None
            else [list(row) for row in self.histograms],
        }


def partition_report(
    partition: Partition,
    labels: NDArray[np.integer],
    *,
    num_classes: int,
    kind: str,
    parameters: Mapping[str, Parameter] | None = None,
) -> PartitionReport:
    """Count what each client of ``partition`` holds.

    Parameters
    ----------
    partition : Partition
        One index array per client, indices into ``labels``.
    labels : array of int
        1-D, the labels the partition was made from, in ``0 .. num_classes - 1``.
    num_classes : int
        Number of classes, ``>= 1``.
    kind : str
        The partition's kind, recorded as given.
    parameters : mapping, optional
        Its parameters, recorded sorted by name.

    Raises
    ------
    ValueError
        When an index is out of range, a sample is in two partitions, or a label
        is outside ``0 .. num_classes - 1``.
    """
    y = np.asarray(labels)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be a 1-D integer array, got {y.dtype} {y.shape}")
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    if y.size and not 0 <= int(y.min()) <= int(y.max()) < num_classes:
        raise ValueError(f"labels must lie in 0..{num_classes - 1}")
    if not partition:
        raise ValueError("the partition has no clients")
    counts = np.zeros((len(partition), num_classes), dtype=np.int64)
    seen = np.zeros(y.size, dtype=bool)
    for client, indices in enumerate(partition):
        idx = np.asarray(indices)
        if idx.ndim != 1 or (idx.size and not np.issubdtype(idx.dtype, np.integer)):
            raise ValueError(f"client {client}: indices must be a 1-D integer array")
        if idx.size and not 0 <= int(idx.min()) <= int(idx.max()) < y.size:
            raise ValueError(f"client {client}: an index lies outside 0..{y.size - 1}")
        if seen[idx].any() or np.unique(idx).size != idx.size:
            raise ValueError(f"client {client}: a sample is already in a partition")
        seen[idx] = True
        counts[client] = np.bincount(y[idx], minlength=num_classes)
    keep = counts.size <= MAX_HISTOGRAM_CELLS
    return PartitionReport(
        kind=kind,
        parameters=tuple(sorted((parameters or {}).items())),
        num_classes=num_classes,
        samples=_ints(counts.sum(axis=1)),
        label_totals=_ints(counts.sum(axis=0)),
        unassigned=int(y.size - seen.sum()),
        histograms=tuple(_ints(row) for row in counts) if keep else None,
    )


def _ints(values: Sequence[Any] | NDArray[np.int64]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)
