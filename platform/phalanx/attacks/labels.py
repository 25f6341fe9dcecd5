"""The data-level attack: poisoned labels, on which the adversary then trains honestly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

LabelPoison = Callable[[Tensor, int], Tensor]
"""Labels and the number of classes in, the labels to train on out: a data attack's
``poison_labels`` (:class:`phalanx.attacks.DataAttack`)."""


def poisoned_labels(poison: LabelPoison, labels: Tensor, num_classes: int) -> Tensor:
    """Return the labels ``poison`` gives ``labels``, checked: one class index per sample.

    ``poison`` gets a copy, so one that writes into its input leaves the caller's
    labels as they were.

    Raises
    ------
    ValueError
        When ``poison`` returns anything but an int64 tensor shaped like ``labels``
        whose values lie in ``0 .. num_classes - 1`` (a plug-in's output is checked
        before anything trains on it).
    """
    out = poison(labels.clone(), num_classes)
    if not isinstance(out, Tensor) or out.shape != labels.shape or out.dtype != torch.int64:
        got = f"{out.dtype} {tuple(out.shape)}" if isinstance(out, Tensor) else type(out).__name__
        raise ValueError(
            f"poison_labels must return int64 labels shaped {tuple(labels.shape)}, got {got}"
        )
    if out.numel() and (int(out.min()) < 0 or int(out.max()) >= num_classes):
        raise ValueError(f"poison_labels returned labels outside 0..{num_classes - 1}")
    return out


@dataclass(frozen=True)
class LabelFlip:
    """Train on flipped labels ``y -> num_classes - 1 - y``; send that update honestly."""

    name: ClassVar[str] = "label_flip"

    def poison_labels(self, labels: Tensor, num_classes: int) -> Tensor:
        """Return ``num_classes - 1 - labels``."""
        if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
            raise ValueError(f"labels must lie in 0..{num_classes - 1}")
        return (num_classes - 1) - labels
