"""What a worker's task costs, counted: the calls deriving a round's plan, the files trained."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from torch import Tensor

import phalanx.assignment
import phalanx.data
import phalanx.plan
import phalanx_clients.file_updates

PLAN_FUNCTIONS = (
    (phalanx.plan, "round_assignment"),
    (phalanx.plan, "base_assignment"),
    (phalanx.plan, "file_samples"),
    (phalanx.plan, "round_samples"),
    (phalanx.assignment, "make_assignment"),
    (phalanx.assignment, "relabel"),
    (phalanx.data, "round_batch"),
    (phalanx.data, "split_files"),
)


def count_plan_calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count every call of a function that derives the round's plan, wherever it was imported."""
    calls: Counter[str] = Counter()
    for home, name in PLAN_FUNCTIONS:
        original = getattr(home, name)

        def spy(*args: Any, _name: str = name, _f: Callable[..., Any] = original, **kw: Any) -> Any:
            calls[_name] += 1
            return _f(*args, **kw)

        for module in list(sys.modules.values()):
            if (
                module is not None
                and module.__name__.startswith("phalanx")
                and getattr(module, name, None) is original
            ):
                monkeypatch.setattr(module, name, spy)
    return calls


def count_trainings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the sample count of every file a worker trains (``compute_update`` calls)."""
    trained: list[int] = []
    compute = phalanx_clients.file_updates.compute_update  # type: ignore[attr-defined]

    def counted(model: Any, x: Tensor, y: Tensor, **kw: Any) -> Tensor:
        trained.append(int(x.shape[0]))
        out: Tensor = compute(model, x, y, **kw)
        return out

    monkeypatch.setattr(phalanx_clients.file_updates, "compute_update", counted)
    return trained
