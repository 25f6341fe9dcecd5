"""Why a node was excluded from a round's aggregation: the flag record and its English."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from phalanx.detection import Evidence

FlagKind = Literal["outlier", "error", "malformed", "layout", "nonfinite"]
"""Why a node was excluded.

``"outlier"``: its update lies far from the others (detection); ``"error"``: it replied
with an error message; ``"malformed"``: records missing, extra, undecodable or with a
bad weight; ``"layout"``: array keys or shapes differ from the model's; ``"nonfinite"``:
NaN or Inf in its arrays or metrics.
"""


@dataclass(frozen=True)
class FlaggedNode:
    """A node excluded from one round's aggregation, and why.

    Attributes
    ----------
    node_id : int
        Flower node id (unsigned 64-bit).
    kind : str
        One of `FlagKind`.
    summary : str
        One plain-English sentence or two explaining the exclusion.
    score, threshold : float or None
        Outlier score (robust standard deviations beyond the typical update) and the
        threshold it exceeded; ``None`` unless ``kind == "outlier"``.
    evidence : Evidence or None
        Detection's record, as the coordinator stores it, with ``worker`` set to the
        node id; ``None`` unless ``kind == "outlier"``.
    """

    node_id: int
    kind: FlagKind
    summary: str
    score: float | None = None
    threshold: float | None = None
    evidence: Evidence | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form; the node id as a string (JavaScript numbers lose uint64 ids)."""
        return {
            "node_id": str(self.node_id),
            "kind": self.kind,
            "summary": self.summary,
            "score": self.score,
            "threshold": self.threshold,
            "evidence": None if self.evidence is None else self.evidence.to_dict(),
        }


class MalformedReplyError(ValueError):
    """A reply that cannot be aggregated; ``kind`` says how (see `FlagKind`)."""

    def __init__(self, kind: FlagKind, reason: str) -> None:
        super().__init__(reason)
        self.kind: FlagKind = kind
        self.reason = reason


def rejection(node_id: int, kind: FlagKind, reason: str) -> FlaggedNode:
    """Flag a node whose reply was rejected, with one line of cause."""
    what = {
        "error": "replied with an error",
        "malformed": "sent a malformed reply",
        "layout": "sent arrays that do not fit the model",
        "nonfinite": "sent non-finite values",
        "outlier": "sent an outlying update",
    }[kind]
    summary = f"Node {node_id} {what}: {reason}; reply rejected."
    if kind == "error":
        summary += " Not proof of an attack: a crashed or unreachable ClientApp replies so too."
    return FlaggedNode(node_id=node_id, kind=kind, summary=summary)
