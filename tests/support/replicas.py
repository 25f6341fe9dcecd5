"""Replicas of a round for detection: honest values per file, and liars that negate them."""

from __future__ import annotations

import torch
from torch import Tensor

from phalanx.assignment import Assignment
from phalanx.detection import Replica, payload_digest

DIM = 16


def honest_value(file: int) -> Tensor:
    return torch.randn(DIM, generator=torch.Generator().manual_seed(1000 + file))


def replica(worker: int, file: int, value: Tensor) -> Replica:
    value = value.to(torch.float32)
    return Replica(worker, file, value, payload_digest(value.numpy().tobytes()))


def attacked(assignment: Assignment, liars: set[int], *, collude: bool = True) -> list[Replica]:
    return [
        replica(w, f, -honest_value(f) + (0 if collude else w) if w in liars else honest_value(f))
        for f, workers in enumerate(assignment.files)
        for w in workers
    ]
