"""The updates a worker computes for its files: honest, or with poisoned labels (a data attack).

Honest workers (:mod:`phalanx_clients.worker`) and Byzantine ones
(:mod:`phalanx_clients.behaviour`) both start from these, so every honest replica
of a file is the same pure function of (model, round, file, the file's samples).
The samples come with the task (:attr:`phalanx.replies.Task.samples`): computing
them costs the worker its own files, never the round's whole plan.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import torch
from torch import Tensor

from phalanx.attacks.labels import LabelPoison, poisoned_labels
from phalanx.config import RunConfig
from phalanx.data import ImageDataset
from phalanx.nets import build_model, load_flat_
from phalanx.training import compute_update, derive_seed


def compute_file_updates(
    config: RunConfig,
    train_set: ImageDataset,
    round: int,
    samples: Mapping[int, Sequence[int]],
    params: Tensor,
    *,
    poison_labels: LabelPoison | None = None,
) -> dict[int, Tensor]:
    """Compute honest (or label-poisoned) updates of each file in ``samples`` from ``params``.

    Parameters
    ----------
    samples : Mapping[int, Sequence[int]]
        File id -> the indices of its training samples in ``train_set``.
    poison_labels : callable, optional
        A data attack's ``poison_labels`` (e.g. the label flip ``y -> C - 1 - y``):
        each file trains on the labels it gives the file's labels instead.

    Raises
    ------
    ValueError
        When a file has no sample, an index is outside ``train_set``, or
        ``poison_labels`` returns no class index per sample.
    """
    return dict(
        file_updates(config, train_set, round, samples, params, poison_labels=poison_labels)
    )


def file_updates(
    config: RunConfig,
    train_set: ImageDataset,
    round: int,
    samples: Mapping[int, Sequence[int]],
    params: Tensor,
    *,
    poison_labels: LabelPoison | None = None,
) -> Iterator[tuple[int, Tensor]]:
    """Yield ``(file, update)`` for each file of ``samples`` in turn, each computed when asked.

    What :func:`compute_file_updates` returns, one file at a time: a worker with a
    compute budget stops asking once it runs out (DropCompute). Every sample index is
    checked before the first file is computed.
    """
    size = len(train_set.y)
    indices = {}
    for f, idx in samples.items():
        if not idx or not all(0 <= i < size for i in idx):
            raise ValueError(
                f"the task names samples of file {f} outside the {size} training samples "
                "this worker holds (or none): its data is not the run's dataset"
            )
        indices[f] = torch.tensor(idx, dtype=torch.int64)
    model = build_model(
        config.data.model,
        in_channels=train_set.in_channels,
        image_size=train_set.image_size,
        num_classes=train_set.num_classes,
    )
    load_flat_(model, params)
    for f, rows in indices.items():
        y = train_set.y[rows]
        if poison_labels is not None:
            y = poisoned_labels(poison_labels, y, train_set.num_classes)
        yield (
            f,
            compute_update(
                model,
                train_set.x[rows],
                y,
                seed=derive_seed(config.seed, round, f),
                local_steps=config.training.local_steps,
                lr=config.training.local_lr,
            ),
        )
