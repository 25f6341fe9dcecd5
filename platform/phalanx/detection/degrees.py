"""Aspis+: agreement-graph degrees accumulated over a window of rounds."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

from phalanx.detection.evidence import Evidence


def low_degree_workers(history: Sequence[Mapping[int, int]], threshold: float) -> frozenset[int]:
    """Workers whose agreement-graph degree, summed over ``history``, is below the bound.

    An honest worker agrees with every other honest worker, so when all K workers reply
    its degree is at least ``K - q - 1`` in every round (Aspis+ uses that as the
    per-round ``threshold``). A worker is flagged when its summed degree is below
    ``threshold`` times the number of rounds in which it replied; rounds it missed
    count neither way, so a straggler is not flagged for staying silent.

    Parameters
    ----------
    history : sequence of mapping of int to int
        Per round, degree by stable worker id.
    threshold : float
        Per-round degree bound.
    """
    return frozenset(
        w for w, (total, rounds) in _degree_totals(history).items() if total < threshold * rounds
    )


def _degree_totals(history: Sequence[Mapping[int, int]]) -> dict[int, tuple[int, int]]:
    """Per worker: (summed degree, rounds observed)."""
    totals: dict[int, tuple[int, int]] = {}
    for degrees in history:
        for w, d in degrees.items():
            total, rounds = totals.get(w, (0, 0))
            totals[w] = (total + d, rounds + 1)
    return totals


class DegreeWindow:
    """The last ``window`` rounds of degrees, and the workers `low_degree_workers` flags.

    Degrees must be keyed by stable worker ids (map the round's relabelled indices back
    before calling `observe`), so that a worker's history survives relabelling.

    Parameters
    ----------
    window : int
        Rounds remembered.
    threshold : float
        Per-round degree bound, ``K - q - 1`` in Aspis+.
    """

    def __init__(self, window: int, threshold: float) -> None:
        if window < 1:
            raise ValueError(f"window must be at least one round, got {window}")
        self.window = window
        self.threshold = threshold
        self._history: deque[dict[int, int]] = deque(maxlen=window)

    def observe(self, degrees: Mapping[int, int]) -> frozenset[int]:
        """Add one round's degrees and return the workers now flagged."""
        self._history.append(dict(degrees))
        return self.flagged

    @property
    def flagged(self) -> frozenset[int]:
        """Workers whose degree over the window is below the bound."""
        return low_degree_workers(self._history, self.threshold)

    def evidence(self) -> dict[int, Evidence]:
        """One `Evidence` record per flagged worker."""
        totals = _degree_totals(self._history)
        return {
            w: Evidence(
                worker=w,
                kind="low_degree",
                severity="high",
                score=float(totals[w][0]),
                threshold=self.threshold * totals[w][1],
                rounds=totals[w][1],
            )
            for w in sorted(self.flagged)
        }
