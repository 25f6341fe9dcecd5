"""A data attack's labels, checked before anything trains on them."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor

from phalanx.attacks import LabelFlip
from phalanx.attacks.labels import poisoned_labels

LABELS = torch.tensor([0, 3, 9, 4, 4])


def test_the_label_flip_s_labels_pass_unchanged() -> None:
    assert torch.equal(poisoned_labels(LabelFlip().poison_labels, LABELS, 10), 9 - LABELS)


@pytest.mark.parametrize(
    ("poison", "expected"),
    [
        (lambda y, c: y[:-1], "must return int64 labels shaped \\(5,\\), got torch.int64 \\(4,\\)"),
        (lambda y, c: y.float(), "must return int64 labels shaped"),
        (lambda y, c: y.tolist(), "got list"),
        (lambda y, c: None, "got NoneType"),
        (lambda y, c: y.reshape(5, 1), "must return int64 labels shaped"),
        (lambda y, c: y + c, "labels outside 0..9"),
        (lambda y, c: y - 1, "labels outside 0..9"),
    ],
)
def test_a_poison_that_returns_no_class_per_sample_is_refused(poison: Any, expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        poisoned_labels(poison, LABELS, 10)


def test_a_poison_that_writes_into_its_input_leaves_the_caller_s_labels_alone() -> None:
    def scribbles(labels: Tensor, num_classes: int) -> Tensor:
        labels.fill_(0)
        return labels

    before = LABELS.clone()

    assert torch.equal(poisoned_labels(scribbles, LABELS, 10), torch.zeros(5, dtype=torch.int64))
    assert torch.equal(LABELS, before)
