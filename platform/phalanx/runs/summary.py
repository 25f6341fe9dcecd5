"""The summary a finished run is judged by: accuracy, who was flagged, bytes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from phalanx.config import RunConfig
from phalanx.event_kinds import FLAG_KINDS
from phalanx.plan import adversaries
from phalanx.reports import RoundReport
from phalanx.roster import simulated_roster

#: Kinds by which a worker is judged to lie (precision and recall count these).
DETECTION_KINDS = FLAG_KINDS


@dataclass(frozen=True)
class RunSummary:
    """What a finished run is judged by (the CLI's ``--format json``)."""

    run_id: str
    rounds: int
    final_accuracy: float
    flagged: list[str]
    adversaries: list[str]
    precision: float
    recall: float
    bytes_up: int
    bytes_down: int
    model_digest: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe summary with the documented keys."""
        return {
            "run_id": self.run_id,
            "rounds": self.rounds,
            "final_accuracy": self.final_accuracy,
            "flagged": self.flagged,
            "adversaries": self.adversaries,
            "precision": self.precision,
            "recall": self.recall,
            "bytes_up": self.bytes_up,
            "bytes_down": self.bytes_down,
            "model_digest": self.model_digest,
        }


def precision_recall(flagged: set[str], truth: set[str]) -> tuple[float, float]:
    """Precision and recall of a flagged set (1.0 by convention when a set is empty)."""
    hits = len(flagged & truth)
    precision = hits / len(flagged) if flagged else 1.0
    recall = hits / len(truth) if truth else 1.0
    return precision, recall


def summarize(config: RunConfig, run_id: str, reports: Sequence[RoundReport]) -> RunSummary:
    """Summarise the reports of every round of a run (including rounds before a resume)."""
    last = reports[-1] if reports else None
    return build_summary(
        config,
        run_id,
        rounds=len(reports),
        final_accuracy=last.accuracy if last else 0.0,
        flagged_workers=(e.worker for r in reports for e in r.events if e.kind in DETECTION_KINDS),
        bytes_up=sum(r.bytes_up for r in reports),
        bytes_down=sum(r.bytes_down for r in reports),
        model_digest=last.model_digest if last else "",
    )


def build_summary(
    config: RunConfig,
    run_id: str,
    *,
    rounds: int,
    final_accuracy: float,
    flagged_workers: Iterable[int],
    bytes_up: int,
    bytes_down: int,
    model_digest: str,
) -> RunSummary:
    """Build a summary from totals; flagged workers become client ids and are scored."""
    roster = simulated_roster(run_id, config.assignment.num_workers)
    flagged = {roster[w].client_id for w in flagged_workers}
    truth = {roster[w].client_id for w in adversaries(config)}
    precision, recall = precision_recall(flagged, truth)
    return RunSummary(
        run_id=run_id,
        rounds=rounds,
        final_accuracy=final_accuracy,
        flagged=sorted(flagged),
        adversaries=sorted(truth),
        precision=precision,
        recall=recall,
        bytes_up=bytes_up,
        bytes_down=bytes_down,
        model_digest=model_digest,
    )
