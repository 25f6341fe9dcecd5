"""The updates a worker computes for its files: honest, or with flipped labels (a data attack).

Honest workers (:mod:`phalanx_clients.worker`) and Byzantine ones
(:mod:`phalanx_clients.behaviour`) both start from these, so every honest replica
of a file is the same pure function of (model, round, file).
"""

from __future__ import annotations

from torch import Tensor

from phalanx.config import RunConfig
from phalanx.data import ImageDataset
from phalanx.nets import build_model, load_flat_
from phalanx.plan import file_samples, round_assignment
from phalanx.training import compute_update, derive_seed


def compute_file_updates(
    config: RunConfig,
    train_set: ImageDataset,
    round: int,
    files: tuple[int, ...],
    params: Tensor,
    *,
    poison_labels: bool = False,
) -> dict[int, Tensor]:
    """Compute honest (or label-flipped) updates of ``files`` in ``round`` from ``params``."""
    assignment = round_assignment(config, round)
    samples = file_samples(config, len(train_set.y), round, assignment.num_files)
    model = build_model(
        config.data.model,
        in_channels=train_set.in_channels,
        image_size=train_set.image_size,
        num_classes=train_set.num_classes,
    )
    load_flat_(model, params)
    updates = {}
    for f in files:
        idx = samples[f]
        y = train_set.y[idx]
        if poison_labels:
            y = train_set.num_classes - 1 - y
        updates[f] = compute_update(
            model,
            train_set.x[idx],
            y,
            seed=derive_seed(config.seed, round, f),
            local_steps=config.training.local_steps,
            lr=config.training.local_lr,
        )
    return updates
