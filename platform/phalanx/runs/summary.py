"""The one summary a finished run is judged by: accuracy, who was flagged, what was refused, bytes.

Every run stores the same :class:`RunSummary`, simulated or deployed. A simulated
run knows its red team (derived from its config and run id), so its summary names
the adversaries and scores detection against them. A deployed run has no ground
truth: ``adversaries`` is empty and ``precision``/``recall`` are ``None``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from phalanx.config import RunConfig
from phalanx.event_kinds import FLAG_KINDS
from phalanx.plan import adversaries
from phalanx.reports import RoundReport
from phalanx.roster import simulated_roster

Backend = Literal["simulation", "deployment"]
"""Where a run's workers ran: simulated identities, or enrolled clients on a SuperLink."""


@dataclass(frozen=True)
class RunSummary:
    """What a finished run is judged by (stored with the run; the CLI's ``--format json``).

    Parameters
    ----------
    run_id : str
        The run.
    backend : {"simulation", "deployment"}
        Simulated identities (with a known red team) or enrolled clients.
    rounds : int
        Rounds recorded.
    final_accuracy : float
        Test accuracy after the last recorded round (0 before any).
    flagged : list of str
        Client ids that detection flagged in any round, sorted.
    refused_replies : dict
        Events that are not flags (rejections and faults), counted by kind.
    adversaries : list of str
        Client ids of the simulated red team, sorted; empty in a deployment.
    precision, recall : float or None
        Of ``flagged`` against ``adversaries`` (1.0 by convention for an empty
        set); ``None`` when there is no ground truth (a deployment).
    bytes_up, bytes_down : int
        Traffic over all recorded rounds.
    model_digest : str
        SHA-256 of the last recorded model ("" before any round).
    """

    run_id: str
    backend: Backend
    rounds: int
    final_accuracy: float
    flagged: list[str]
    refused_replies: dict[str, int]
    adversaries: list[str]
    precision: float | None
    recall: float | None
    bytes_up: int
    bytes_down: int
    model_digest: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe summary with the documented keys."""
        return {
            "run_id": self.run_id,
            "backend": self.backend,
            "rounds": self.rounds,
            "final_accuracy": self.final_accuracy,
            "flagged": list(self.flagged),
            "refused_replies": dict(self.refused_replies),
            "adversaries": list(self.adversaries),
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


def red_team(config: RunConfig, run_id: str) -> set[str] | None:
    """Client ids of a run's adversaries; ``None`` when the run has no ground truth.

    Only a simulated run knows who lies: its adversaries are workers of the config's
    plan, with identities derived from the run id.
    """
    if config.deployment.backend != "simulation":
        return None
    roster = simulated_roster(run_id, config.assignment.num_workers)
    return {roster[w].client_id for w in adversaries(config)}


def build_summary(
    config: RunConfig,
    run_id: str,
    *,
    rounds: int,
    final_accuracy: float,
    flagged: Iterable[str],
    refused: Mapping[str, int],
    bytes_up: int,
    bytes_down: int,
    model_digest: str,
) -> RunSummary:
    """Build the summary of a run from its totals.

    Parameters
    ----------
    config : RunConfig
        The run's config: its ``deployment.backend`` says whether a red team is known.
    run_id : str
        The run.
    rounds, final_accuracy, bytes_up, bytes_down, model_digest
        Totals over the recorded rounds.
    flagged : iterable of str
        Client ids named by flag events (repeats allowed).
    refused : mapping
        Events that are not flags, counted by kind.
    """
    named = set(flagged)
    truth = red_team(config, run_id)
    precision, recall = precision_recall(named, truth) if truth is not None else (None, None)
    return RunSummary(
        run_id=run_id,
        backend=config.deployment.backend,
        rounds=rounds,
        final_accuracy=final_accuracy,
        flagged=sorted(named),
        refused_replies={kind: refused[kind] for kind in sorted(refused) if refused[kind]},
        adversaries=sorted(truth or ()),
        precision=precision,
        recall=recall,
        bytes_up=bytes_up,
        bytes_down=bytes_down,
        model_digest=model_digest,
    )


def summarize(config: RunConfig, run_id: str, reports: Sequence[RoundReport]) -> RunSummary:
    """Summarise the reports of every round of a run (including rounds before a resume)."""
    last = reports[-1] if reports else None
    events = [e for r in reports for e in r.events]
    return build_summary(
        config,
        run_id,
        rounds=len(reports),
        final_accuracy=last.accuracy if last else 0.0,
        flagged=(e.client_id for e in events if e.kind in FLAG_KINDS and e.client_id),
        refused=Counter(e.kind for e in events if e.kind not in FLAG_KINDS),
        bytes_up=sum(r.bytes_up for r in reports),
        bytes_down=sum(r.bytes_down for r in reports),
        model_digest=last.model_digest if last else "",
    )
