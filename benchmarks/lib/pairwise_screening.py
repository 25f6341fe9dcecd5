"""The r = 1 outlier score Phalanx used before issue 19, kept here only to compare against.

:func:`pairwise_outlier_scores` is the Krum-style score that
``phalanx.detection.outliers`` computed until it moved to distances from a robust
centre: each update's mean L2 distance to its ``n - f - 2`` nearest other updates,
from an ``n x n`` float64 distance matrix, as a robust z-score. The product no longer
has it; ``eval_screening.py`` and ``bench_screening.py`` compare it with the new score.

:class:`ScreeningTap` runs a federated run with either score deciding (the *driver*)
while it scores every r = 1 round with both, on the very updates the round received,
and records who each would flag.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal
from unittest.mock import patch

import torch
from torch import Tensor

import phalanx.coordinator
import phalanx.detection.verdict
from phalanx.detection import RoundComparison, Verdict
from phalanx.detection import judge as real_judge
from phalanx.detection.outliers import outlier_scores, robust_z_scores

Score = Literal["old", "new"]
ScoreFn = Callable[[Tensor, int], Tensor]


def pairwise_outlier_scores(values: Tensor, f: int) -> Tensor:
    """Robust z-scores of the mean distance to the ``n - f - 2`` nearest other updates.

    The score before issue 19, verbatim: ``O(n^2 d)`` time, an ``n x n`` float64 matrix.
    """
    n = values.shape[0]
    if values.ndim != 2:
        raise ValueError(f"outlier_scores needs a (n, d) tensor, got shape {tuple(values.shape)}")
    if f < 0 or n < f + 3:
        raise ValueError(f"outlier_scores needs 0 <= f and n >= f + 3, got n={n}, f={f}")
    v = values.to(torch.float64)
    distances = torch.cdist(v, v)
    distances.fill_diagonal_(math.inf)
    raw = distances.topk(n - f - 2, dim=1, largest=False).values.mean(dim=1)
    return robust_z_scores(raw)


SCORES: dict[Score, ScoreFn] = {"old": pairwise_outlier_scores, "new": outlier_scores}


@dataclass
class ScreenedRound:
    """One r = 1 round scored by both scores: the workers each would flag."""

    scored: list[int]
    flagged: dict[Score, list[int]]


@dataclass
class ScreeningTap:
    """Both scores' flags for every r = 1 round of the runs under :meth:`driving`."""

    rounds: list[ScreenedRound] = field(default_factory=list)

    @contextmanager
    def driving(self, driver: Score) -> Iterator[ScreeningTap]:
        """Let ``driver``'s score decide the rounds; record both scores' flags meanwhile."""

        def judge(compared: RoundComparison, **options: Any) -> Verdict:
            self._observe(compared, options.get("outlier_threshold"), int(options.get("f", 0)))
            return real_judge(compared, **options)

        with (
            patch.object(phalanx.coordinator, "judge", judge),
            patch.object(phalanx.detection.verdict, "outlier_scores", SCORES[driver]),
        ):
            yield self

    def _observe(self, compared: RoundComparison, threshold: float | None, f: int) -> None:
        if compared.comparisons or threshold is None:
            return
        reps = [rs[0] for _, rs in sorted(compared.by_file.items())]
        if len(reps) < f + 3:
            return
        values = torch.stack([r.value for r in reps])
        flagged: dict[Score, list[int]] = {}
        for name, score in SCORES.items():
            scores = score(values, f).tolist()
            flagged[name] = sorted(
                {r.worker for r, s in zip(reps, scores, strict=True) if s > threshold}
            )
        self.rounds.append(ScreenedRound(scored=sorted({r.worker for r in reps}), flagged=flagged))


@dataclass(frozen=True)
class ScreeningCounts:
    """How one score did over a run's r = 1 rounds.

    Attributes
    ----------
    precision, recall : float
        Over distinct workers, as the run summary counts them (1.0 for an empty set).
    honest_flags : int
        Honest worker-rounds flagged (false positives).
    adversary_flags : int
        Adversary worker-rounds flagged.
    adversary_rounds : int
        Adversary worker-rounds scored.
    """

    precision: float
    recall: float
    honest_flags: int
    adversary_flags: int
    adversary_rounds: int

    def to_dict(self) -> dict[str, float | int]:
        """JSON form."""
        return {
            "precision": self.precision,
            "recall": self.recall,
            "honest_flags": self.honest_flags,
            "adversary_flags": self.adversary_flags,
            "adversary_rounds": self.adversary_rounds,
        }


def counts(rounds: list[ScreenedRound], score: Score, adversaries: set[int]) -> ScreeningCounts:
    """Count ``score``'s flags over ``rounds`` against the true ``adversaries``."""
    named = {w for r in rounds for w in r.flagged[score]}
    hits = len(named & adversaries)
    return ScreeningCounts(
        precision=hits / len(named) if named else 1.0,
        recall=hits / len(adversaries) if adversaries else 1.0,
        honest_flags=sum(len(set(r.flagged[score]) - adversaries) for r in rounds),
        adversary_flags=sum(len(set(r.flagged[score]) & adversaries) for r in rounds),
        adversary_rounds=sum(len(set(r.scored) & adversaries) for r in rounds),
    )
