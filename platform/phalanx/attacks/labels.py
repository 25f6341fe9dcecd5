"""The data-level attack: poisoned labels, on which the adversary then trains honestly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor


@dataclass(frozen=True)
class LabelFlip:
    """Train on flipped labels ``y -> num_classes - 1 - y``; send that update honestly."""

    name: ClassVar[str] = "label_flip"

    def poison_labels(self, labels: Tensor, num_classes: int) -> Tensor:
        """Return ``num_classes - 1 - labels``."""
        if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
            raise ValueError(f"labels must lie in 0..{num_classes - 1}")
        return (num_classes - 1) - labels
